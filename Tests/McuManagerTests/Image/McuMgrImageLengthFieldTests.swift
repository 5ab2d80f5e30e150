import Foundation
import Testing

@testable import McuManager

/// A hostile image file whose size fields claim far more than the file holds: each is refused with a
/// file error that names the claim, at once, and the parser never reads or copies past the file.
@Suite struct McuMgrImageLengthFieldTests {
    static let clean = try! McuMgrImageBuilder(
        version: McuMgrImageVersion(major: 1, minor: 0, revision: 0, build: 0), headerSize: 32,
        protectedTLVs: [.securityCounter(1)]
    ).build(body: Data(repeating: 0x5A, count: 100))

    static func patched(_ offset: Int, _ bytes: [UInt8]) -> Data {
        var data = clean
        data.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        return data
    }

    static func refusal(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let start = ContinuousClock.now
        let error = #expect(throws: McuMgrError.self, sourceLocation: sourceLocation) { try McuMgrImage(data: data) }
        #expect(error?.kind == .file, sourceLocation: sourceLocation)
        #expect(ContinuousClock.now - start < .seconds(30), "refused before reading what the fields claim", sourceLocation: sourceLocation)
        return error?.message ?? ""
    }

    @Test func bodySizeOfFourGigabytes() {
        // ih_img_size = 0xFFFFFFFF.
        let message = Self.refusal(Self.patched(12, [0xFF, 0xFF, 0xFF, 0xFF]))
        #expect(message.contains("body 4294967295"))
        #expect(message.contains("the file has \(Self.clean.count)"))
    }

    @Test func headerSizeOfSixtyFourKilobytes() {
        // ih_hdr_size = 0xFFFF.
        #expect(Self.refusal(Self.patched(8, [0xFF, 0xFF])).contains("header needs 65535 bytes"))
    }

    @Test func protectedAreaSizeBeyondTheFile() {
        // ih_protect_tlv_size = 0xFFFF: disagrees with the area, which is checked against the file first.
        #expect(Self.refusal(Self.patched(10, [0xFF, 0xFF])).contains("protected TLV area is 65535 bytes"))
        // The area's own total (it_tlv_tot) = 0xFFFF.
        let image = try! McuMgrImage(data: Self.clean)
        let area = image.protectedTLVRange.lowerBound
        #expect(Self.refusal(Self.patched(area + 2, [0xFF, 0xFF])).contains("needs 65535 bytes"))
    }

    @Test func tlvAreaAndEntryLengthsBeyondTheFile() {
        let image = try! McuMgrImage(data: Self.clean)
        let area = image.unprotectedTLVRange.lowerBound
        #expect(Self.refusal(Self.patched(area + 2, [0xFF, 0xFF])).contains("needs 65535 bytes"))
        // The hash TLV's length = 0xFFFF.
        #expect(Self.refusal(Self.patched(area + 6, [0xFF, 0xFF])).contains("claims 65535 bytes"))
    }

    @Test func legacyTLVLengthBeyondTheFile() {
        var legacy = Self.patched(0, [0x3C, 0xB8, 0xF3, 0x96])
        let bodyEnd = 32 + 100
        legacy = legacy.prefix(bodyEnd) + Data([0x01, 0x00, 0xFF, 0xFF]) + Data(count: 32)
        #expect(Self.refusal(legacy).contains("claims 65535 bytes"))
    }
}
