import McuMgrCore
import Foundation
import Testing
import TestSupport

@testable import McuManager

@Suite struct McuMgrImageTests {
    static let body = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    static let builder = McuMgrImageBuilder(
        version: McuMgrImageVersion(major: 1, minor: 2, revision: 3, build: 4), headerSize: 0x200,
        protectedTLVs: [.securityCounter(7), McuMgrImageTLV(type: McuMgrImageTLVType(0x00A0), value: Data([1, 2, 3]))])

    /// Expects a `.file` error whose message contains every one of `words`.
    func expectFileError(_ data: Data, _ words: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let image = try McuMgrImage(data: data)
            try image.verify()
            Issue.record("parsed and verified, expected an error containing \(words)", sourceLocation: sourceLocation)
        } catch let error as McuMgrError {
            #expect(error.kind == .file, sourceLocation: sourceLocation)
            for word in words {
                #expect(error.message.contains(word), "\(error.message)", sourceLocation: sourceLocation)
            }
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func parsesBuiltImage() throws {
        let data = try Self.builder.build(body: Self.body)
        let image = try McuMgrImage(data: data)
        #expect(image.header.magic == McuMgrImageHeader.magic)
        #expect(image.header.headerSize == 0x200)
        #expect(image.header.imageSize == 1000)
        #expect(image.header.protectedTLVSize == 4 + 8 + 7)
        #expect(image.version.description == "1.2.3+4")
        #expect(image.body == Self.body)
        #expect(image.protectedTLVs.map(\.type) == [.securityCounter, McuMgrImageTLVType(0xA0)])
        #expect(image.protectedTLVs[0].offset == 0x200 + 1000 + 4)
        #expect(image.protectedTLVs[1].type.isVendor)
        #expect(image.unprotectedTLVs.map(\.type) == [.sha256])
        #expect(image.protectedTLVRange == (0x200 + 1000)..<(0x200 + 1000 + 19))
        #expect(image.unprotectedTLVRange.upperBound == data.count)
        #expect(image.hash == Data(SHA256.hash(data: data.prefix(0x200 + 1000 + 19))))
        #expect(image.fileSHA256 == Data(SHA256.hash(data: data)))
        #expect(image.hash != image.fileSHA256)
        try image.verify()
        // A slice with a non-zero start index parses the same.
        let slice = (Data([9, 9, 9]) + data).dropFirst(3)
        #expect(try McuMgrImage(data: slice).hash == image.hash)
    }

    @Test func readsFile() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("smp-image-\(UUID().uuidString).bin")
        defer { try? FileManager.default.removeItem(at: url) }
        try Self.builder.build(body: Self.body).write(to: url)
        #expect(try McuMgrImage(contentsOf: url).version == McuMgrImageVersion("1.2.3+4"))
        let missing = url.appendingPathExtension("missing")
        #expect { try McuMgrImage(contentsOf: missing) } throws: { error in
            (error as? McuMgrError)?.message.contains("cannot read") == true
        }
        try Data("hello world".utf8).write(to: url)
        #expect { try McuMgrImage(contentsOf: url) } throws: { error in
            let message = (error as? McuMgrError)?.message ?? ""
            return message.contains(url.path) && message.contains("68 65 6c 6c 6f")
        }
    }

    @Test func legacyImage() throws {
        var header = McuMgrImageHeader(
            magic: McuMgrImageHeader.legacyMagic, headerSize: 32, imageSize: UInt32(Self.body.count),
            version: McuMgrImageVersion(major: 0, minor: 9))
        header.flags = []
        var bytes = header.encoded + [UInt8](Self.body)
        let hash = [UInt8](SHA256.hash(data: bytes))
        bytes += [0x01, 0x00, 32, 0] + hash + [0x04, 0x00, 2, 0, 0xAA, 0xBB]
        let image = try McuMgrImage(data: Data(bytes))
        #expect(image.header.isLegacy)
        #expect(image.hash == Data(hash))
        #expect(image.hashAlgorithm == .sha256)
        #expect(image.unprotectedTLVs.map(\.type.rawValue) == [0x01, 0x04])
        try image.verify()
    }

    @Test func notAnImage() {
        expectFileError(Data(), ["truncated", "32", "has 0"])
        expectFileError(Data([0x3D, 0xB8]), ["truncated"])
        expectFileError(Data("hello world, this is not firmware".utf8), ["not an MCUboot image", "68 65 6c 6c 6f 20 77 6f"])
        var rng = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let data = Data((0..<Int.random(in: 4...600, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            expectFileError(data, ["not an MCUboot image"])
        }
    }

    @Test func truncatedAtEveryBoundary() throws {
        let data = try Self.builder.build(body: Self.body)
        let image = try McuMgrImage(data: data)
        let bodyEnd = 0x200 + 1000
        let protectedEnd = image.protectedTLVRange.upperBound
        let cases: [(Int, [String])] = [
            (3, ["truncated", "32 bytes"]), (4, ["truncated", "32 bytes"]), (31, ["truncated", "has 31"]),
            (32, ["truncated", "512 bytes"]), (0x1FF, ["truncated", "512"]),
            (0x200, ["truncated", "body", "\(bodyEnd)"]), (bodyEnd - 1, ["truncated", "body"]),
            (bodyEnd, ["without a protected TLV area"]), (bodyEnd + 2, ["truncated", "protected TLV area"]),
            (bodyEnd + 4, ["truncated", "protected TLV area", "19 bytes"]),
            (protectedEnd - 1, ["truncated", "protected TLV area"]),
            (protectedEnd, ["without a TLV area"]), (protectedEnd + 3, ["truncated", "TLV area"]),
            (protectedEnd + 4, ["truncated", "TLV area", "40 bytes"]), (data.count - 1, ["truncated", "TLV area"]),
        ]
        for (length, words) in cases {
            expectFileError(data.prefix(length), words)
        }
        // Every other cut fails too, and never crashes.
        for length in 0..<data.count {
            #expect(throws: McuMgrError.self) { try McuMgrImage(data: data.prefix(length)) }
        }
    }

    @Test func corruptedBodyFailsVerification() throws {
        var data = try Self.builder.build(body: Self.body)
        data[0x200 + 500] ^= 0x01
        let image = try McuMgrImage(data: data)
        expectFileError(data, ["hash mismatch", "corrupt or was modified after signing; rebuild it", McuMgrImage.hex(image.hash)])
        // The protected area is covered too; the unprotected area's other bytes are not.
        var protectedChanged = try Self.builder.build(body: Self.body)
        protectedChanged[0x200 + 1000 + 8] ^= 0xFF
        expectFileError(protectedChanged, ["hash mismatch"])
        var headerChanged = try Self.builder.build(body: Self.body)
        headerChanged[20] = 9
        expectFileError(headerChanged, ["hash mismatch"])
    }

    @Test func malformedTLVAreas() throws {
        let clean = try Self.builder.build(body: Self.body)
        let image = try McuMgrImage(data: clean)
        let protectedStart = image.protectedTLVRange.lowerBound
        let start = image.unprotectedTLVRange.lowerBound

        func patched(_ offset: Int, _ bytes: [UInt8]) -> Data {
            var data = clean
            data.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
            return data
        }
        // The hash TLV's length runs past the end of its area and the file.
        expectFileError(patched(start + 6, [0xFF, 0xFF]), ["SHA256 (0x10)", "runs past the end of the TLV area", "claims 65535 bytes"])
        // A TLV's length runs past the end of the protected area.
        expectFileError(patched(protectedStart + 6, [0x20, 0x00]), ["claims 32 bytes", "runs past the end of the protected TLV area"])
        // Area totals: too small, past the end, disagreeing with the header.
        expectFileError(patched(start + 2, [0x02, 0x00]), ["less than its own"])
        expectFileError(patched(start + 2, [0xFF, 0x00]), ["truncated", "needs 255 bytes"])
        expectFileError(patched(protectedStart + 2, [0x14, 0x00]), ["header says the protected TLV area is 19"])
        expectFileError(patched(10, [0x00, 0x00]), ["malformed", "header says the protected TLV area is 0 bytes"])
        // Bad magic.
        expectFileError(patched(start, [0x07, 0x68]), ["magic 0x6807", "expected 0x6907"])
        expectFileError(patched(protectedStart, [0x07, 0x69]), ["magic 0x6907", "expected 0x6908"])
        // Room for part of a TLV header only.
        expectFileError(patched(start + 2, [0x2A, 0x00]) + Data([1, 2]), ["TLV header", "runs past"])
        // No hash TLV, or one of the wrong length.
        expectFileError(patched(start + 4, [0xA0, 0x00]), ["without a hash TLV", "imgtool sign"])
        expectFileError(patched(start + 4, [0x12, 0x00]), ["SHA512", "32 bytes, expected 64"])
        // Header size below 32.
        expectFileError(patched(8, [0x10, 0x00]), ["header size", "16"])
    }

    @Test func slotPaddingAfterTheTLVAreaIsIgnored() throws {
        let data = try Self.builder.build(body: Self.body)
        let padded = data + Data(repeating: 0xFF, count: 4096)
        let image = try McuMgrImage(data: padded)
        try image.verify()
        #expect(image.hash == (try McuMgrImage(data: data)).hash)
        #expect(image.fileSHA256 == Data(SHA256.hash(data: padded)))
    }

    @Test("fuzz: thousands of mutated images never crash")
    func fuzz() throws {
        var rng = SplitMix64(seed: 0x5EED)
        let seeds = [
            try Self.builder.build(body: Self.body),
            try McuMgrImageBuilder(version: .init(major: 1), headerSize: 32).build(body: Data([1, 2, 3])),
            try McuMgrImageBuilder(version: .init(major: 2), hashAlgorithm: .sha512).build(body: Data()),
        ]
        var parsed = 0
        for iteration in 0..<6000 {
            var bytes = [UInt8](seeds[iteration % seeds.count])
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                switch Int.random(in: 0..<6, using: &rng) {
                case 0:  // flip a byte
                    let i = Int.random(in: 0..<bytes.count, using: &rng)
                    bytes[i] = UInt8.random(in: 0...255, using: &rng)
                case 1:  // hit a length or size field
                    let fields = [8, 9, 10, 11, 12, 13, 14, 15] + (bytes.count > 0x200 + 1004 ? [0x200 + 1002, 0x200 + 1003, 0x200 + 1006] : [])
                    let i = fields.randomElement(using: &rng)!
                    if i < bytes.count { bytes[i] = [0, 1, 0x7F, 0x80, 0xFF].randomElement(using: &rng)! }
                case 2:  // truncate
                    bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng)))
                case 3:  // append junk
                    bytes += (0..<Int.random(in: 1...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                case 4:  // delete a run
                    if bytes.count > 1 {
                        let i = Int.random(in: 0..<bytes.count, using: &rng)
                        bytes.removeSubrange(i..<min(bytes.count, i + Int.random(in: 1...16, using: &rng)))
                    }
                default:  // insert a run
                    let i = Int.random(in: 0...bytes.count, using: &rng)
                    bytes.insert(contentsOf: (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, at: i)
                }
                if bytes.isEmpty { break }
            }
            do {
                let image = try McuMgrImage(data: Data(bytes))
                parsed += 1
                _ = image.body
                _ = image.tlvs
                _ = image.computedHash()
                _ = try? image.verify()
                #expect(image.hashedRange.upperBound <= bytes.count)
            } catch let error as McuMgrError {
                #expect(error.kind == .file)
                #expect(!error.message.isEmpty)
            }
        }
        #expect(parsed > 0)
    }
}

@Suite struct McuMgrImageVersionAndFlagsTests {
    @Test func versionText() {
        #expect(McuMgrImageVersion(major: 1, minor: 2, revision: 3).description == "1.2.3")
        #expect(McuMgrImageVersion(major: 0, minor: 0, revision: 1, build: 77).description == "0.0.1+77")
        #expect(McuMgrImageVersion("255.255.65535+4294967295") == McuMgrImageVersion(
            major: 255, minor: 255, revision: 65535, build: 4_294_967_295))
        #expect(McuMgrImageVersion("1") == McuMgrImageVersion(major: 1))
        #expect(McuMgrImageVersion("1.2") == McuMgrImageVersion(major: 1, minor: 2))
        for bad in ["", "a", "1.2.3.4", "256.0.0", "1.2.65536", "1.2.3+", "1.2.3+4294967296", "1..2", "-1"] {
            #expect(McuMgrImageVersion(bad) == nil, "\(bad)")
        }
        #expect(McuMgrImageVersion("1.2.3")! < McuMgrImageVersion("1.2.3+1")!)
        #expect(McuMgrImageVersion("1.10.0")! > McuMgrImageVersion("1.9.300")!)
    }

    @Test func flagsText() {
        #expect(McuMgrImageFlags().description == "none")
        #expect(McuMgrImageFlags([.ramLoad, .nonBootable]).description == "NON_BOOTABLE|RAM_LOAD")
        #expect(McuMgrImageFlags(rawValue: 0x1_0100).description == "ROM_FIXED|0x10000")
    }

    @Test func tlvTypeNames() {
        #expect(McuMgrImageTLVType.sha256.description == "SHA256 (0x10)")
        #expect(McuMgrImageTLVType(0x1234).description == "0x1234")
        #expect(McuMgrImageTLVType.uuidCID.name == "UUID_CID")
        #expect(McuMgrImageHashAlgorithm(tlvType: .sha384) == .sha384)
        #expect(McuMgrImageHashAlgorithm(tlvType: .keyHash) == nil)
    }
}
