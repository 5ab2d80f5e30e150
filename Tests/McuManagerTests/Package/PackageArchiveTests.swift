import Foundation
import Testing
import TestSupport

@testable import McuManager

/// The zip reader of firmware packages against zips written by Python's zipfile (an independent
/// writer), and against damaged and hostile zips: clear errors, never a crash.
@Suite struct PackageArchiveTests {
    static let limits = McuMgrPackage.Limits.default

    /// A zip written by Python's zipfile: `entries` is Python code for a list of
    /// (ZipInfo or name, bytes, compression) tuples.
    static func pythonZip(_ entries: String) throws -> Data {
        let script = """
            import base64, io, sys, zipfile
            from zipfile import ZipInfo, ZIP_STORED, ZIP_DEFLATED, ZIP_BZIP2
            def info(name, mode=None, system=3, attributes=None):
                i = ZipInfo(name, (2024, 1, 2, 3, 4, 6))
                i.create_system = system
                if mode is not None: i.external_attr = mode << 16
                if attributes is not None: i.external_attr = attributes
                return i
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as z:
                for name, data, method in \(entries):
                    z.writestr(name, data, compress_type=method)
            sys.stdout.write(base64.b64encode(out.getvalue()).decode())
            """
        let output = try TestPython.run(script: script, input: "")
        return try #require(Data(base64Encoded: output))
    }

    static func refusal(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        do {
            let archive = try PackageArchive(data: data, name: "p.zip", limits: limits)
            for path in archive.paths { _ = try archive.read(path) }
            Issue.record("accepted", sourceLocation: sourceLocation)
            return ""
        } catch let error as McuMgrError {
            #expect(error.kind == .file, sourceLocation: sourceLocation)
            #expect(error.message.contains("p.zip"), sourceLocation: sourceLocation)
            return error.message
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
            return ""
        }
    }

    @Test(.enabled(if: TestPython.path != nil, TestPython.skipReason("zipfile")))
    func storedAndDeflatedEntriesFromPythonReadBack() throws {
        let zip = try Self.pythonZip("""
            [("manifest.json", b'{"files": []}', ZIP_STORED),
             ("big.bin", bytes(range(256)) * 400 + b"tail", ZIP_DEFLATED),
             ("empty.bin", b"", ZIP_DEFLATED), ("empty-stored.bin", b"", ZIP_STORED),
             (info("dir/", 0o040755), b"", ZIP_STORED),
             (info("dir/inner.bin", 0o100644), b"x" * 70000, ZIP_DEFLATED),
             (info("dos-dir", system=0, attributes=0x10), b"", ZIP_STORED),
             ("caf\\u00e9.bin", b"utf-8 name", ZIP_STORED)]
            """)
        let archive = try PackageArchive(data: zip, name: "p.zip", limits: Self.limits)
        #expect(archive.paths == ["manifest.json", "big.bin", "empty.bin", "empty-stored.bin", "dir/inner.bin", "café.bin"])
        #expect(try archive.read("manifest.json") == Data(#"{"files": []}"#.utf8))
        var big = [UInt8]()
        for _ in 0..<400 { big += (0...255).map { UInt8($0) } }
        #expect(try archive.read("big.bin") == Data(big + Array("tail".utf8)))
        #expect(try archive.read("empty.bin").isEmpty)
        #expect(try archive.read("empty-stored.bin").isEmpty)
        #expect(try archive.read("dir/inner.bin") == Data(repeating: UInt8(ascii: "x"), count: 70000))
        #expect(try archive.read("café.bin") == Data("utf-8 name".utf8))
        #expect(!archive.contains("dir/"))
    }

    @Test(.enabled(if: TestPython.path != nil, TestPython.skipReason("zipfile")))
    func hostileEntriesAreRefused() throws {
        #expect(Self.refusal(try Self.pythonZip(#"[("../evil.bin", b"x", ZIP_STORED)]"#)).contains("climbs out"))
        #expect(Self.refusal(try Self.pythonZip(#"[("a/../../evil.bin", b"x", ZIP_DEFLATED)]"#)).contains("climbs out"))
        #expect(Self.refusal(try Self.pythonZip(#"[(info("/etc/evil"), b"x", ZIP_STORED)]"#)).contains("absolute path"))
        #expect(Self.refusal(try Self.pythonZip(#"[(info("C:/evil"), b"x", ZIP_STORED)]"#)).contains("absolute path"))
        #expect(Self.refusal(try Self.pythonZip(#"[(info("link", 0o120777), b"/etc/passwd", ZIP_STORED)]"#))
            .contains("symbolic link"))
        #expect(Self.refusal(try Self.pythonZip(#"[("a.bin", b"1", ZIP_STORED), ("a.bin", b"2", ZIP_STORED)]"#))
            .contains("two entries"))
        #expect(Self.refusal(try Self.pythonZip(#"[("a.bin", b"x" * 100, ZIP_BZIP2)]"#)).contains("compression method 12"))
    }

    @Test(.enabled(if: TestPython.path != nil, TestPython.skipReason("zipfile")))
    func damagedDataIsRefusedWithAReason() throws {
        let stored = [UInt8](try Self.pythonZip(#"[("a.bin", b"firmware bytes" * 10, ZIP_STORED)]"#))
        var flipped = stored
        flipped[30 + 5 + 3] ^= 0x01  // inside the stored data, after the local header and name
        #expect(Self.refusal(Data(flipped)).contains("CRC-32 mismatch"))

        let deflated = [UInt8](try Self.pythonZip(#"[("a.bin", bytes(range(256)) * 64, ZIP_DEFLATED)]"#))
        var garbled = deflated
        for i in 35..<45 { garbled[i] = 0xFF }
        #expect(Self.refusal(Data(garbled)).contains("cannot be read"))

        // Both headers declare fewer bytes than the deflated data holds.
        var lying = deflated
        let central = Self.find([0x50, 0x4B, 0x01, 0x02], in: lying)
        for at in [22, central + 24] { lying.replaceSubrange(at..<(at + 4), with: [100, 0, 0, 0]) }
        #expect(Self.refusal(Data(lying)).contains("holds more data than the 100 bytes it declares"))

        // ...or more than it holds.
        var short = deflated
        for at in [22, central + 24] { short.replaceSubrange(at..<(at + 4), with: [0, 0x50, 0, 0]) }
        #expect(Self.refusal(Data(short)).contains("holds 16384 bytes but declares 20480"))

        var encrypted = stored
        encrypted[directory(of: encrypted) + 8] |= 0x01
        #expect(Self.refusal(Data(encrypted)).contains("encrypted"))

        for cut in stride(from: 0, to: deflated.count, by: 7) {
            _ = Self.refusal(Data(deflated.prefix(cut)))
        }
    }

    static func find(_ signature: [UInt8], in bytes: [UInt8]) -> Int {
        (0...(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == signature } ?? 0
    }

    func directory(of bytes: [UInt8]) -> Int { Self.find([0x50, 0x4B, 0x01, 0x02], in: bytes) }

    @Test func codePage437NamesDecode() {
        #expect(PackageArchive.decodePath([0x61, 0x80, 0xE1, 0xFF], utf8: false) == "aÇß\u{00A0}")
        #expect(PackageArchive.decodePath([0x61, 0xC3, 0xA9], utf8: true) == "aé")
        #expect(PackageArchive.decodePath([0x61, 0xC3], utf8: true) == nil)
    }
}
