import Foundation
#if canImport(Glibc)
import Glibc
#endif
import McuMgrSimulator
import Testing

/// `smp`'s round-trip budget, end to end: the requests smp-sim receives (`--request-log`) from the CLI's
/// transfers, for a device seen the first time and for a known one (the same `$XDG_CACHE_HOME`). An upload
/// to a known device sends its chunks and one verification; the first contact adds `os params`; a
/// download sends its chunks and one hash (see the FirmwareUpgrade article's "Round trips").
@Suite(.serialized) struct RoundTripBudgetEndToEndTests {
    /// A simulator with a request log, and smp runs sharing one cache.
    struct Rig {
        let session: SimSession
        let log: String
        let cache: String

        /// The device as smp addresses it, with a fixed resend interval of 5 s: the budget counts the
        /// requests smp decides to send, and the session's adaptive timeout (a few round trips of a
        /// millisecond or two here) resends a request whose answer a loaded machine delivers late, which
        /// the device logs again, and whose second answer changes what smp does next (FS error 11 to a
        /// repeated chunk, a repeated first chunk appended). Resends themselves are tested in virtual time
        /// (`McuMgrClientTimingTests`). A frame the device drops is not logged: its resend counts once.
        var device: String {
            session.device + (session.device.contains("?") ? "&" : "?") + "retransmit=5000"
        }

        /// Runs smp and returns the requests the device received meanwhile.
        func requests(_ arguments: String...) async throws -> [String] {
            // Emptied in place: smp-sim keeps the file open (appending), so it must stay the same file.
            guard truncate(log, 0) == 0 else { throw E2EError("cannot empty \(log)") }
            let result = try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", device] + arguments, timeout: 60,
                environment: ["XDG_CACHE_HOME": cache])
            expectSuccess(result)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let lines = text.split(separator: "\n").map(String.init)
            #expect(lines.allSatisfy { SimulatedRequestRecord(line: $0) != nil }, "\(lines)")
            return lines
        }
    }

    static func withRig(_ link: Link, _ arguments: [String], _ body: (Rig) async throws -> Void) async throws {
        try TestEnvironment.requireBinaries()
        let logDirectory = try TemporaryDirectory()
        defer { logDirectory.remove() }
        let log = logDirectory.path("requests.log")
        try await withSimulator(link, extraArguments: arguments + ["--request-log", log]) { session in
            try await body(Rig(session: session, log: log, cache: logDirectory.path("cache")))
        }
    }

    static func times(_ count: Int, _ line: String) -> [String] { Array(repeating: line, count: count) }

    /// As native_sim_udp (2 x 2048-byte buffers, one request in flight): 4 KiB in three chunks.
    @Test func fsUploadAndDownloadOverUDP() async throws {
        try await Self.withRig(.udp, ["--like", "native_sim_udp"]) { rig in
            let directory = rig.session.directory
            try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: URL(fileURLWithPath: directory.path("a.bin")))
            try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 11) }).write(to: URL(fileURLWithPath: directory.path("b.bin")))
            let first = try await rig.requests("fs", "upload", directory.path("a.bin"), "/lfs1/f.bin")
            #expect(first == ["read 0/6"] + Self.times(3, "write 8/0") + ["read 8/2"])
            let known = try await rig.requests("fs", "upload", directory.path("b.bin"), "/lfs1/f.bin")
            #expect(known == Self.times(3, "write 8/0") + ["read 8/2"])
            let download = try await rig.requests("fs", "download", "/lfs1/f.bin", directory.path("back.bin"))
            #expect(download == Self.times(3, "read 8/0") + ["read 8/2"])
            #expect(FileManager.default.contents(atPath: directory.path("back.bin")) == FileManager.default.contents(atPath: directory.path("b.bin")))
            #expect(try await rig.requests("os", "echo", "hi") == ["write 0/0"])
        }
    }

    /// As native_sim_serial (4 x 384-byte buffers, 2 x 128-byte receive lines): the first upload also
    /// asks for the device's copy (the file takes more than 8 chunks) and probes the console lines; the
    /// known device gets the same chunks and the hash alone. A loaded machine may stall a transfer beyond
    /// smp-sim's idle close of the open file, as the real builds do: then smp checks the file the long
    /// way (`RealFirmwareTests.withoutTheLongWay`).
    @Test func fsUploadOverASerialConsole() async throws {
        try await Self.withRig(.serial, ["--like", "native_sim_serial"]) { rig in
            let directory = rig.session.directory
            try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: URL(fileURLWithPath: directory.path("a.bin")))
            try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 11) }).write(to: URL(fileURLWithPath: directory.path("b.bin")))
            let first = RealFirmwareTests.withoutTheLongWay(
                try await rig.requests("fs", "upload", directory.path("a.bin"), "/lfs1/f.bin"), device: "smp-sim")
            let chunks = first.filter { $0 == "write 8/0" }.count
            let probes = first.filter { $0 == "write 0/0" }.count
            #expect(chunks > 8 && probes > 0)
            #expect(first == ["write 8/4", "read 8/1", "read 0/6"] + Self.times(probes, "write 0/0") + Self.times(chunks, "write 8/0") + ["read 8/2"])
            let known = RealFirmwareTests.withoutTheLongWay(
                try await rig.requests("fs", "upload", directory.path("b.bin"), "/lfs1/f.bin"), device: "smp-sim")
            #expect(known == Self.times(chunks, "write 8/0") + ["read 8/2"])
        }
    }

    /// An image upload: `os params` and the chunks; to the known device the chunks alone.
    @Test func imageUploadOverUDP() async throws {
        try await Self.withRig(.udp, []) { rig in
            let image = try DFUPackages.image(size: 8 * 1024)
            let file = try DFUPackages.write(image.data, "app.bin", in: rig.session.directory)
            let first = try await rig.requests("image", "upload", file, "--chunk-size", "1024")
            #expect(first == ["read 0/6"] + Self.times(8, "write 1/1"))
            _ = try await rig.requests("image", "erase")
            let known = try await rig.requests("image", "upload", file, "--chunk-size", "1024")
            #expect(known == Self.times(8, "write 1/1"))
        }
    }
}
