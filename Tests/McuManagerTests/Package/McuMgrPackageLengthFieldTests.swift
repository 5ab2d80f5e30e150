import Foundation
import McuManager
import Testing

/// A hostile zip whose directory claims sizes or offsets far beyond the file: refused with a file error
/// before any entry is read, never a crash or an allocation sized by the claim.
@Suite struct McuMgrPackageLengthFieldTests {
    static let image = PackageFixtures.mcubootImage(body: PackageFixtures.body(300))
    static let zip = try! PackageFixtures.zip([
        ("manifest.json", Data(PackageFixtures.singleManifest(file: "zephyr.signed.bin").utf8)),
        ("zephyr.signed.bin", image.data),
    ])

    /// Offset of the end-of-central-directory record.
    static var endOfDirectory: Int {
        let bytes = [UInt8](zip)
        return (0...(bytes.count - 22)).last { bytes[$0..<($0 + 4)].elementsEqual([0x50, 0x4B, 0x05, 0x06]) }!
    }

    static func patched(_ offset: Int, _ value: UInt32, width: Int = 4) -> Data {
        var bytes = [UInt8](zip)
        for i in 0..<width { bytes[offset + i] = UInt8((value >> (8 * UInt32(i))) & 0xFF) }
        return Data(bytes)
    }

    static func refusal(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let error = #expect(throws: McuMgrError.self, sourceLocation: sourceLocation) {
            try McuMgrPackage(data: data, fileName: "dfu_application.zip")
        }
        #expect(error?.kind == .file, sourceLocation: sourceLocation)
        return error?.message ?? ""
    }

    @Test func centralDirectoryBeyondTheFile() {
        // Directory offset and size of almost 4 GiB.
        #expect(Self.refusal(Self.patched(Self.endOfDirectory + 16, 0xFFFF_FF00)).contains("outside the file"))
        #expect(Self.refusal(Self.patched(Self.endOfDirectory + 12, 0xFFFF_FF00)).contains("outside the file"))
    }

    @Test func entryCountBeyondTheDirectory() {
        // 65534 entries claimed, 2 present.
        let refusal = Self.refusal(Self.patched(Self.endOfDirectory + 10, 0xFFFE, width: 2))
        #expect(refusal.contains("corrupt") || refusal.contains("damaged"), "\(refusal)")
    }

    @Test func entryDataBeyondTheFile() {
        // The first central directory entry's compressed size claims 4 GiB - 256 bytes.
        let directory = [UInt8](Self.zip)[(Self.endOfDirectory + 16)..<(Self.endOfDirectory + 20)]
            .reversed().reduce(0) { $0 << 8 | Int($1) }
        #expect(Self.refusal(Self.patched(directory + 20, 0xFFFF_FF00)).contains("past the end of the file"))
        // Its local header offset points past the end.
        #expect(Self.refusal(Self.patched(directory + 42, 0x7FFF_FFFF)).contains("local header lies outside"))
    }

    @Test func zip64MarkersAreRefused() {
        #expect(Self.refusal(Self.patched(Self.endOfDirectory + 10, 0xFFFF, width: 2)).contains("zip64"))
        #expect(Self.refusal(Self.patched(Self.endOfDirectory + 16, 0xFFFF_FFFF)).contains("zip64"))
    }

    @Test func entryHoldingMoreThanItDeclaresIsRefused() {
        // Both headers say 10 bytes; the data inflates to the whole manifest.
        let lying = PackageFixtures.declaringUncompressedSize(10, in: Self.zip)
        let message = Self.refusal(lying)
        #expect(message.contains("manifest.json") || message.contains("zephyr.signed.bin"))
    }
}
