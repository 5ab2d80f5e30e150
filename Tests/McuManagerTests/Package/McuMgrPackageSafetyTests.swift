import Foundation
import McuManager
import Testing
import TestSupport

@Suite struct McuMgrPackageSafetyTests {
    static let image = PackageFixtures.mcubootImage(body: PackageFixtures.body(1200))
    static let manifest = Data(PackageFixtures.singleManifest(file: "zephyr.signed.bin").utf8)

    /// Opens `data` and returns the file error it must throw.
    static func refusal(
        _ data: Data, fileName: String = "dfu_application.zip", limits: McuMgrPackage.Limits = .default,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> McuMgrError? {
        let error = #expect(throws: McuMgrError.self, sourceLocation: sourceLocation) {
            try McuMgrPackage(data: data, fileName: fileName, limits: limits)
        }
        #expect(error?.kind == .file, sourceLocation: sourceLocation)
        return error
    }

    @Test func entryClimbingOutWithDotDotIsRefused() throws {
        let zip = try PackageFixtures.zip([
            ("manifest.json", Self.manifest), ("zephyr.signed.bin", Self.image.data),
            ("../../evil.sh", Data("rm -rf".utf8)),
        ])
        let error = Self.refusal(zip)
        #expect(error?.message.contains("\"..\"") == true)
        #expect(error?.message.contains("../../evil.sh") == true)
        #expect(error?.message.contains("refused") == true)
    }

    @Test func entryWithAnAbsolutePathIsRefused() throws {
        let zip = try PackageFixtures.zip([
            ("manifest.json", Self.manifest), ("zephyr.signed.bin", Self.image.data),
            ("/etc/cron.d/evil", Data("x".utf8)),
        ])
        #expect(Self.refusal(zip)?.message.contains("absolute path") == true)
        let backslash = try PackageFixtures.zip([("manifest.json", Self.manifest), ("a\\..\\..\\b", Data())])
        #expect(Self.refusal(backslash)?.message.contains("\"..\"") == true)
    }

    @Test func manifestNamingAMissingFileIsRefused() throws {
        let zip = try PackageFixtures.zip([("manifest.json", Data(PackageFixtures.twoCoreManifest.utf8)),
                                           ("app.signed.bin", Self.image.data)])
        let error = Self.refusal(zip)
        #expect(error?.message.contains("\"ipc_radio.signed.bin\", which is not in the zip") == true)
    }

    @Test func hugeDeclaredEntrySizeIsRefusedBeforeReading() throws {
        let zip = try PackageFixtures.zip([("manifest.json", Self.manifest), ("zephyr.signed.bin", Self.image.data)])
        let lying = PackageFixtures.declaringUncompressedSize(0xFFFF_0000, in: zip)
        let error = Self.refusal(lying)
        #expect(error?.message.contains("declares 4294901760 bytes uncompressed") == true)
        #expect(error?.message.contains("limit") == true)
    }

    @Test func entriesOverTheTotalLimitAreRefused() throws {
        let zip = try PackageFixtures.zip([
            ("manifest.json", Self.manifest), ("padding.bin", Data(count: 3000)),
            ("zephyr.signed.bin", Self.image.data),
        ])
        let limits = McuMgrPackage.Limits(maximumEntrySize: 4000, maximumTotalSize: 4000)
        #expect(Self.refusal(zip, limits: limits)?.message.contains("in all") == true)
        let perEntry = McuMgrPackage.Limits(maximumEntrySize: 1000, maximumTotalSize: 1 << 20)
        #expect(Self.refusal(zip, limits: perEntry)?.message.contains("limit per file") == true)
        #expect(Self.refusal(Self.image.data, fileName: "a.bin", limits: perEntry)?.message.contains("limit") == true)
    }

    @Test func zipWithoutManifestIsRefused() throws {
        let zip = try PackageFixtures.zip([("zephyr.signed.bin", Self.image.data)])
        let error = Self.refusal(zip)
        #expect(error?.message.contains("has no manifest.json") == true)
        #expect(error?.message.contains("dfu_application.zip") == true)
    }

    @Test func invalidManifestIsRefused() throws {
        let broken = try PackageFixtures.zip([("manifest.json", Data("{\"files\": [".utf8)),
                                              ("zephyr.signed.bin", Self.image.data)])
        #expect(Self.refusal(broken)?.message.contains("manifest.json is invalid") == true)
        let empty = try PackageFixtures.zip([("manifest.json", Data("{\"files\": []}".utf8))])
        #expect(Self.refusal(empty)?.message.contains("lists no files") == true)
        let twice = try PackageFixtures.zip([
            ("manifest.json", Data(
                "{\"files\": [{\"file\": \"zephyr.signed.bin\"}, {\"file\": \"zephyr.signed.bin\"}]}".utf8)),
            ("zephyr.signed.bin", Self.image.data),
        ])
        #expect(Self.refusal(twice)?.message.contains("twice") == true)
    }

    @Test func binThatIsNotAnMCUbootImageIsRefused() throws {
        let error = Self.refusal(Data(PackageFixtures.body(4096)), fileName: "zephyr.bin")
        #expect(error?.message.contains("not an MCUboot image") == true)
        #expect(error?.message.contains("imgtool") == true)
        let inZip = try PackageFixtures.zip([("manifest.json", Self.manifest),
                                             ("zephyr.signed.bin", Data(PackageFixtures.body(4096)))])
        #expect(Self.refusal(inZip)?.message.contains("zephyr.signed.bin: not an MCUboot image") == true)
    }

    @Test func corruptImageHashIsRefused() throws {
        var bytes = [UInt8](Self.image.data)
        bytes[40] ^= 0xFF
        #expect(Self.refusal(Data(bytes), fileName: "a.bin")?.message.contains("corrupt") == true)
    }

    @Test func truncatedFilesAreRefused() throws {
        let data = Self.image.data
        for cut in [10, 31, 32, 100, 1232, data.count - 20, data.count - 1] {
            let error = Self.refusal(data.prefix(cut), fileName: "a.bin")
            let message = error?.message ?? ""
            #expect(
                ["truncated", "cut short", "not an MCUboot", "past the end"].contains { message.contains($0) },
                "cut at \(cut): \(message)")
        }
        let zip = try PackageFixtures.zip([("manifest.json", Self.manifest), ("zephyr.signed.bin", data)])
        for cut in [0, 10, zip.count / 2, zip.count - 30, zip.count - 1] {
            _ = Self.refusal(zip.prefix(cut))
        }
        let suit = PackageFixtures.suitEnvelope(digest: PackageFixtures.body(32))
        #expect(Self.refusal(suit.prefix(suit.count - 3), fileName: "root.suit")?.message
            .contains("not a valid SUIT envelope") == true)
    }

    @Test func unknownExtensionIsRefused() throws {
        let error = Self.refusal(Self.image.data, fileName: "zephyr.hex")
        #expect(error?.message.contains("\".hex\"") == true)
        #expect(error?.message.contains(".bin") == true)
        #expect(Self.refusal(Self.image.data, fileName: "firmware")?.message.contains("no extension") == true)
        let url = URL(fileURLWithPath: "/nonexistent/firmware.elf")
        let byURL = #expect(throws: McuMgrError.self) { try McuMgrPackage(url: url) }
        #expect(byURL?.message.contains(".elf") == true)
    }

    @Test func missingFileIsAClearError() throws {
        let error = #expect(throws: McuMgrError.self) {
            try McuMgrPackage(url: URL(fileURLWithPath: "/nonexistent/dfu_application.zip"))
        }
        #expect(error?.kind == .file)
        #expect(error?.message.contains("/nonexistent/dfu_application.zip") == true)
    }

    @Test func suitEnvelopeWithoutSHA256IsRefused() throws {
        let sha512 = PackageFixtures.suitEnvelope(digest: PackageFixtures.body(64), algorithm: -44)
        #expect(Self.refusal(sha512, fileName: "root.suit")?.message.contains("only SHA-256") == true)
        #expect(Self.refusal(Data([0xA0]), fileName: "root.suit")?.message.contains("tag 107") == true)
    }

    @Test func randomBytesNeverCrash() throws {
        var rng = SplitMix64(seed: 42)
        let names = ["a.bin", "a.zip", "a.suit"]
        for round in 0..<300 {
            let count = Int(rng.next() % 512)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Some rounds start like the real thing, so parsers get past their first check.
            if round % 3 == 1, bytes.count >= 4 { bytes.replaceSubrange(0..<4, with: [0x3D, 0xB8, 0xF3, 0x96]) }
            if round % 3 == 2, bytes.count >= 2 { bytes.replaceSubrange(0..<2, with: [0xD8, 0x6B]) }
            _ = try? McuMgrPackage(data: Data(bytes), fileName: names[round % 3])
        }
    }

    @Test func damagedZipNeverCrashes() throws {
        var rng = SplitMix64(seed: 7)
        let zip = try PackageFixtures.zip([("manifest.json", Self.manifest), ("zephyr.signed.bin", Self.image.data)])
        for _ in 0..<1000 {
            var bytes = [UInt8](zip)
            for _ in 0..<4 { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? McuMgrPackage(data: Data(bytes), fileName: "a.zip")
        }
    }
}
