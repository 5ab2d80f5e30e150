import McuMgrCore
import Foundation
import Testing
import TestSupport

@testable import McuManager

/// Cross-checks against MCUboot's `imgtool` (PyPI, 2.5.0): images it signs parse to what `imgtool dumpinfo`
/// and `Image.verify` report, and the builder writes the same bytes.
@Suite(.enabled(if: ImgtoolPython.isAvailable, ImgtoolPython.skipReason))
struct McuMgrImageImgtoolTests {
    static let versions = ["1.2.3", "0.0.1+77", "255.255.65535+4294967295"]
    static let headerSizes = [0x20, 0x200, 0x400]

    /// A temporary directory with random bodies of a few sizes.
    final class Workspace {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("smp-image-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: url) }

        func body(_ size: Int, seed: UInt64) throws -> (path: String, data: Data) {
            var rng = SplitMix64(seed: seed)
            let data = Data((0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let path = url.appendingPathComponent("body-\(size)-\(seed).bin").path
            try data.write(to: URL(fileURLWithPath: path))
            return (path, data)
        }

        func output(_ name: String) -> String { url.appendingPathComponent(name).path }
    }

    /// Our parse agrees with imgtool on every field it reports.
    func check(_ imagePath: String, against report: ImgtoolPython.Report, extra: String) throws {
        let image = try McuMgrImage(contentsOf: URL(fileURLWithPath: imagePath))
        let v = image.version
        #expect("\(v.major).\(v.minor).\(v.revision)+\(v.build)" == report.version, "\(extra)")
        #expect(Int(image.header.headerSize) == report.hdrSize, "\(extra)")
        #expect(Int(image.header.protectedTLVSize) == report.protectedTLVSize, "\(extra)")
        #expect(Int(image.header.imageSize) == report.imgSize, "\(extra)")
        #expect(Int(image.header.flags.rawValue) == report.flags, "\(extra)")
        #expect(Int(image.header.loadAddress) == report.loadAddr, "\(extra)")
        #expect(image.protectedTLVs.map { Int($0.type.rawValue) } == report.protectedTypes, "\(extra)")
        #expect(image.unprotectedTLVs.map { Int($0.type.rawValue) } == report.unprotectedTypes, "\(extra)")
        #expect(report.verifyResult == "VerifyResult.OK", "\(extra)")
        #expect(McuMgrImage.hex(image.hash) == report.digest, "\(extra)")
        #expect(McuMgrImage.hex(image.computedHash()) == report.digest, "\(extra)")
        #expect(McuMgrImage.hex(image.fileSHA256) == report.fileSHA256, "\(extra)")
        #expect(throws: Never.self, "\(extra)") { try image.verify() }
    }

    @Test("header sizes x versions x body sizes: version, hash, TLVs as imgtool dumpinfo says")
    func headerSizesAndVersions() throws {
        let workspace = try Workspace()
        var cases: [ImgtoolPython.SignCase] = []
        var seed: UInt64 = 1
        for header in Self.headerSizes {
            for version in Self.versions {
                for size in [1, 1000, 4097] {
                    let body = try workspace.body(size, seed: seed)
                    seed += 1
                    let args = ["-v", version, "-H", String(header), "--pad-header", "-S", "0x80000"]
                    cases.append(.init(args: args, input: body.path, output: workspace.output("o\(cases.count).bin")))
                }
            }
        }
        let reports = try ImgtoolPython.sign(cases)
        #expect(reports.count == cases.count)
        for (signCase, report) in zip(cases, reports) {
            try check(signCase.output, against: report, extra: signCase.args.joined(separator: " "))
            let image = try McuMgrImage(contentsOf: URL(fileURLWithPath: signCase.output))
            #expect(image.version == McuMgrImageVersion(signCase.args[1]))
            #expect(image.version.description == signCase.args[1])
            #expect(image.hashAlgorithm == .sha256)
        }
    }

    @Test("options: align, slot padding, protected TLVs, hash algorithms, flags, signature")
    func options() throws {
        let workspace = try Workspace()
        let body = try workspace.body(3000, seed: 99)
        let key = workspace.output("k.pem")
        let base = ["-v", "1.2.3+4", "-H", "0x200", "--pad-header", "-S", "0x20000"]
        let variants: [[String]] = [
            ["--align", "4"],
            ["--align", "8"],
            ["--pad"],
            ["--pad", "--align", "8"],
            ["--pad", "--confirm"],
            ["-s", "auto"],
            ["-s", "0x1234"],
            ["--boot-record", "CoFM"],
            ["-d", "(1,2.0.0)"],
            ["-s", "auto", "--boot-record", "CoFM", "-d", "(1,2.0.0+7)", "--custom-tlv", "0xa0", "0x1234"],
            ["--sha", "384"],
            ["--sha", "512"],
            ["--sha", "512", "-s", "5"],
            ["-L", "0x20000000"],
            ["-F", "0x10000"],
            ["--non-bootable"],
            ["-R", "0"],
            ["-k", key],
            ["-k", key, "-s", "auto", "--pad"],
            ["-k", key, "--public-key-format", "full"],
        ]
        let cases = variants.enumerated().map { index, extra in
            ImgtoolPython.SignCase(args: base + extra, input: body.path, output: workspace.output("v\(index).bin"))
        }
        let reports = try ImgtoolPython.sign(cases, keygen: key)
        #expect(reports.count == cases.count)
        for (signCase, report) in zip(cases, reports) {
            try check(signCase.output, against: report, extra: signCase.args.joined(separator: " "))
        }
        func image(_ index: Int) throws -> McuMgrImage {
            try McuMgrImage(contentsOf: URL(fileURLWithPath: cases[index].output))
        }
        // Slot padding: the file is the slot; the hash ignores what follows the TLV area.
        #expect(try image(2).data.count == 0x20000)
        #expect(try image(2).hash == image(0).hash)
        #expect(try image(6).protectedTLVs == [.securityCounter(0x1234).withOffset(image(6).protectedTLVs[0].offset)])
        #expect(try image(8).protectedTLVs.first?.value == McuMgrImageTLV.dependency(
            imageID: 1, minimumVersion: .init(major: 2)).value)
        #expect(try image(10).hashAlgorithm == .sha384)
        #expect(try image(10).hash.count == 48)
        #expect(try image(11).hashAlgorithm == .sha512)
        #expect(try image(13).flags.contains(.ramLoad))
        #expect(try image(14).flags.contains(.romFixed))
        #expect(try image(15).flags == .nonBootable)
        #expect(try image(17).unprotectedTLVs.map(\.type) == [.sha256, .keyHash, .ecdsaSignature])
        #expect(try image(19).unprotectedTLVs.map(\.type).contains(.publicKey))
    }

    @Test("the builder writes the same bytes as imgtool sign --pad-header")
    func builderMatchesImgtool() throws {
        let workspace = try Workspace()
        struct Expected {
            var builder: McuMgrImageBuilder
            var body: Data
        }
        var cases: [ImgtoolPython.SignCase] = []
        var expected: [Expected] = []
        var seed: UInt64 = 500
        func add(_ args: [String], _ builder: McuMgrImageBuilder, size: Int) throws {
            let body = try workspace.body(size, seed: seed)
            seed += 1
            cases.append(.init(args: args, input: body.path, output: workspace.output("b\(cases.count).bin")))
            expected.append(Expected(builder: builder, body: body.data))
        }
        for header in Self.headerSizes {
            for version in Self.versions {
                for size in [0, 17, 2048] {
                    let v = try #require(McuMgrImageVersion(version))
                    try add(
                        ["-v", version, "-H", String(header), "--pad-header", "-S", "0x80000"],
                        McuMgrImageBuilder(version: v, headerSize: header), size: size)
                    try add(
                        ["-v", version, "-H", String(header), "--pad-header", "-S", "0x80000", "--align", "8"],
                        McuMgrImageBuilder(version: v, headerSize: header), size: size)
                }
            }
        }
        let v = McuMgrImageVersion(major: 1, minor: 2, revision: 3)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "-R", "0"],
            McuMgrImageBuilder(version: v, headerPadding: 0), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "-s", "0x01020003"],
            McuMgrImageBuilder(version: v, protectedTLVs: [.securityCounter(0x0102_0003)]), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "-s", "auto", "-d", "(1,2.3.4+5)"],
            McuMgrImageBuilder(
                version: v,
                protectedTLVs: [
                    .securityCounter(0x0102_0003),
                    .dependency(imageID: 1, minimumVersion: .init(major: 2, minor: 3, revision: 4, build: 5)),
                ]), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "--sha", "384"],
            McuMgrImageBuilder(version: v, hashAlgorithm: .sha384), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "--sha", "512"],
            McuMgrImageBuilder(version: v, hashAlgorithm: .sha512), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "--non-bootable"],
            McuMgrImageBuilder(version: v, flags: .nonBootable), size: 999)
        try add(
            ["-v", "1.2.3", "-H", "0x200", "--pad-header", "-S", "0x80000", "-L", "0x20000000"],
            McuMgrImageBuilder(version: v, loadAddress: 0x2000_0000, flags: .ramLoad), size: 999)

        let reports = try ImgtoolPython.sign(cases)
        #expect(reports.count == cases.count)
        for ((signCase, report), want) in zip(zip(cases, reports), expected) {
            let label = signCase.args.joined(separator: " ")
            let imgtoolBytes = try Data(contentsOf: URL(fileURLWithPath: signCase.output))
            let built = try want.builder.build(body: want.body)
            #expect(built == imgtoolBytes, "\(label)")
            let image = try McuMgrImage(data: built)
            #expect(McuMgrImage.hex(image.hash) == report.digest, "\(label)")
            #expect(image.body == want.body, "\(label)")
        }
    }
}

extension McuMgrImageTLV {
    func withOffset(_ offset: Int) -> McuMgrImageTLV {
        McuMgrImageTLV(type: type, value: value, offset: offset)
    }
}
