import Foundation
import Testing

/// Interoperability: the independent Python client (`smpmgr` 0.19.1 on smpclient 7.3.0) against `smp-sim`
/// over its pty and over UDP.
@Suite(
    "smpmgr against smp-sim", .serialized, .timeLimit(.minutes(10)),
    .enabled(if: TestEnvironment.hasVenv, Comment(rawValue: TestEnvironment.venvMissingReason)))
struct InteropTests {
    /// Runs smpmgr against the session's device. smpmgr's UDP transport always uses port 1337; a tiny
    /// launcher points its default port at the simulator's ephemeral one.
    static func smpmgr(_ session: SimSession, _ arguments: [String], timeout: Double = 90) async throws -> ProcessResult {
        let python = TestEnvironment.venvTool("python")
        let launcher = """
            import sys
            from smpclient.transport.udp import SMPUDPTransport
            SMPUDPTransport.connect.__defaults__ = (int(sys.argv.pop(1)),)
            from smpmgr.main import app
            sys.argv[0] = "smpmgr"
            sys.exit(app())
            """
        var linkArguments: [String]
        var port = "1337"
        switch session.link {
        case .serial:
            linkArguments = ["--port", session.sim.ptyLink ?? session.sim.ptyPath ?? "?"]
        case .udp:
            let endpoint = session.sim.udpEndpoints[0]
            linkArguments = ["--ip", endpoint.host]
            port = String(endpoint.port)
        }
        return try await ProcessRunner.run(
            python, ["-c", launcher, port] + linkArguments + ["--timeout", "5"] + arguments, timeout: timeout,
            environment: ["COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"])
    }

    @Test("os echo", arguments: Link.allCases)
    func echo(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await Self.smpmgr(session, ["os", "echo", "hello-from-smpmgr"]))
            #expect(result.stdout.contains("hello-from-smpmgr"), "\(result)")
        }
    }

    @Test("image state-read shows the running image", arguments: Link.allCases)
    func imageStateRead(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await Self.smpmgr(session, ["image", "state-read"]))
            #expect(result.stdout.contains("1.0.0"), "\(result)")
        }
    }

    @Test("image upload of an imgtool image lands in slot 1", arguments: Link.allCases)
    func imageUpload(link: Link) async throws {
        try await withSimulator(link) { session in
            let image = try await makeMCUbootImage(in: session.directory, version: "2.3.4", bodySize: 40 * 1024)
            expectSuccess(try await Self.smpmgr(session, ["image", "upload", image.path], timeout: 150))
            let state = expectSuccess(try await Self.smpmgr(session, ["image", "state-read"]))
            #expect(state.stdout.contains("2.3.4"), "\(state)")
            // Our own client reads the same slot back, with imgtool's digest.
            let ours = expectSuccess(try await session.smp("--json", "image", "list"))
            #expect(ours.stdout.contains(image.digest), "\(ours)")
        }
    }

    /// `smpmgr upgrade` marks the upload only with `--confirm` (without it, it expects serial recovery's
    /// direct upload to the primary slot); the swap then makes the new image permanent.
    @Test("upgrade --confirm: upload, permanent mark, reset, the new image runs confirmed", arguments: Link.allCases)
    func upgrade(link: Link) async throws {
        try await withSimulator(link) { session in
            let image = try await makeMCUbootImage(in: session.directory, version: "3.1.4", bodySize: 48 * 1024)
            expectSuccess(try await Self.smpmgr(session, ["upgrade", "--confirm", image.path], timeout: 150))
            // smpmgr exits once the reset is answered; the device applied it then (the swap) and is silent
            // while it reboots: `imageList` asks until it answers.
            let after = try await session.imageList()
            let running = after.first { $0.image == 0 && $0.active }
            #expect(running?.version == "3.1.4", "\(after)")
            #expect(running?.hash == image.digest, "\(after)")
            #expect(running?.confirmed == true, "\(after)")
            let kept = try await session.resetAndWait()
            #expect(kept.first { $0.image == 0 && $0.active }?.version == "3.1.4", "a permanent image stays: \(kept)")
        }
    }

    @Test("file upload and download round-trip", arguments: Link.allCases)
    func fileRoundTrip(link: Link) async throws {
        try await withSimulator(link) { session in
            let payload = randomBytes(96 * 1024)
            let local = session.directory.path("interop-up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await Self.smpmgr(session, ["file", "upload", local, "/lfs1/interop.bin"], timeout: 150))
            let back = session.directory.path("interop-down.bin")
            expectSuccess(try await Self.smpmgr(session, ["file", "download", "/lfs1/interop.bin", back], timeout: 150))
            let downloaded = try Data(contentsOf: URL(fileURLWithPath: back))
            #expect(downloaded == payload, "smpmgr's download differs from its upload (\(downloaded.count) bytes)")
            let size = expectSuccess(try await Self.smpmgr(session, ["file", "read-size", "/lfs1/interop.bin"]))
            #expect(size.stdout.contains(String(payload.count)), "\(size)")
        }
    }

    @Test("shell command", arguments: Link.allCases)
    func shell(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await Self.smpmgr(session, ["shell", "kernel version"]))
            #expect(result.stdout.contains("Zephyr version 3.7.0"), "\(result)")
        }
    }

    @Test("statistics list and smp_svr_stats", arguments: Link.allCases)
    func statistics(link: Link) async throws {
        try await withSimulator(link) { session in
            let list = expectSuccess(try await Self.smpmgr(session, ["statistics", "list"]))
            #expect(list.stdout.contains("smp_svr_stats"), "\(list)")
            let group = expectSuccess(try await Self.smpmgr(session, ["statistics", "smp_svr_stats"]))
            #expect(group.stdout.contains("ticks"), "\(group)")
        }
    }
}
