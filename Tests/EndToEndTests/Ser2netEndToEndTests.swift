import Foundation
import Testing
import TestSupport

/// `smp` through real ser2net (Debian's 4.3) to smp-sim's pty: `tcp://` (raw accepter) and
/// `rfc2217://` (telnet(rfc2217) accepter), default options (link sizing must find Zephyr's 2 x 128-byte
/// line buffers through the port server), raw framing, the baud rate arriving at the port, and the
/// failures: no server, the wrong kind of server, the server killed mid-transfer.
@Suite(
    "smp over ser2net (tcp:// and rfc2217://)", .serialized, .timeLimit(.minutes(10)),
    .enabled(if: Ser2netRig.isAvailable, Comment(rawValue: Ser2netRig.missingReason)))
struct Ser2netEndToEndTests {
    enum Accepter: String, CaseIterable, Sendable, CustomStringConvertible {
        case tcp, rfc2217
        var description: String { rawValue }
    }

    /// smp-sim on a pty and ser2net serving it.
    struct Rig: Sendable {
        let sim: SimProcess
        let ser2net: Ser2netRig
        let directory: TemporaryDirectory
        var pty: String { ser2net.device }

        func uri(_ accepter: Accepter, _ options: String = "") -> String {
            var uri = accepter == .tcp ? ser2net.tcpURI : ser2net.rfc2217URI
            var query = options
            if accepter == .rfc2217 && !query.contains("baud=") { query = query.isEmpty ? "baud=115200" : "baud=115200&" + query }
            if !query.isEmpty { uri += "?" + query }
            return uri
        }

        func smp(_ accepter: Accepter, _ arguments: [String], options: String = "", timeout: Double = 60) async throws
            -> ProcessResult
        {
            try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", uri(accepter, options)] + arguments, timeout: timeout)
        }
    }

    static func withRig<R>(_ simArguments: [String], _ body: (Rig) async throws -> R) async throws -> R {
        try TestEnvironment.requireBinaries()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // ser2net opens the --pty-link path on each connection: after a reset that removes the pty (USB
        // re-enumeration, --reset-vanish) it finds the new one there.
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty")] + simArguments)
        defer { sim.stop() }
        let pty = try #require(sim.ptyLink ?? sim.ptyPath, "smp-sim printed no pty path")
        let ser2net = try Ser2netRig.start(device: pty, in: directory)
        defer { ser2net.stop() }
        return try await body(Rig(sim: sim, ser2net: ser2net, directory: directory))
    }

    @Test("echo, files and an image with default options through Zephyr's line buffers", arguments: Accepter.allCases)
    func defaultOptions(_ accepter: Accepter) async throws {
        // Zephyr's default serial buffers (2 lines of 128 bytes, 384-byte SMP buffers), with the image group
        // (the --like native_sim builds have none) and an unlimited file system.
        try await Self.withRig(["--rx-line-size", "128", "--rx-lines", "2", "--buf-size", "384", "--fs-blocks", "0"]) { rig in
            let short = expectSuccess(try await rig.smp(accepter, ["os", "echo", "hello through ser2net"]))
            #expect(short.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "hello through ser2net")
            let long = String(repeating: "e", count: 184)
            let echo = expectSuccess(try await rig.smp(accepter, ["os", "echo", long]))
            #expect(echo.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == long)

            let content = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let local = try DFUPackages.write(content, "f.bin", in: rig.directory)
            // Whole and verified (a resend now and then is a loaded machine's late answer; that every frame
            // fits Zephyr's line buffers is checked byte for byte by the pacing tests in virtual time).
            expectSuccess(try await rig.smp(accepter, ["fs", "upload", local, "/lfs1/f.bin"], timeout: 120))
            let back = rig.directory.path("back.bin")
            expectSuccess(try await rig.smp(accepter, ["fs", "download", "/lfs1/f.bin", back], timeout: 120))
            #expect(FileManager.default.contents(atPath: back) == content)

            let empty = try DFUPackages.write(Data(), "empty.bin", in: rig.directory)
            expectSuccess(try await rig.smp(accepter, ["fs", "upload", empty, "/lfs1/empty.bin"]))
            let emptyBack = rig.directory.path("empty-back.bin")
            expectSuccess(try await rig.smp(accepter, ["fs", "download", "/lfs1/empty.bin", emptyBack]))
            #expect(FileManager.default.contents(atPath: emptyBack) == Data())

            let image = try DFUPackages.image(size: 6 * 1024, seed: accepter == .tcp ? 11 : 12)
            let imagePath = try DFUPackages.write(image.data, "app.bin", in: rig.directory)
            expectSuccess(try await rig.smp(accepter, ["image", "upload", imagePath], timeout: 180))
            let list = expectSuccess(try await rig.smp(accepter, ["--json", "image", "list"]))
            #expect(list.stdout.lowercased().contains(hex(image.hash)), "\(list)")
        }
    }

    /// A whole upgrade: upload, test, reset (the pty vanishes and comes back as USB CDC does; ser2net
    /// drops the connection and smp connects again), confirm.
    @Test("dfu test-and-confirm through ser2net", arguments: Accepter.allCases)
    func dfu(_ accepter: Accepter) async throws {
        try await Self.withRig(["--swap-time", "0.2", "--reset-vanish"]) { rig in
            let image = try DFUPackages.image(size: 16 * 1024, seed: accepter == .tcp ? 21 : 22)
            let path = try DFUPackages.write(image.data, "app_update.bin", in: rig.directory)
            let run = expectSuccess(
                try await rig.smp(accepter, ["--json", "dfu", path, "--mode", "test-and-confirm", "--swap-time", "0.2"], timeout: 120))
            #expect(dfuResult(run)?["status"] as? String == "success", "\(run)")
            let list = expectSuccess(try await rig.smp(accepter, ["--json", "image", "list"]))
            #expect(list.stdout.lowercased().contains(hex(image.hash)), "\(list)")
        }
    }

    @Test("raw framing through ser2net", arguments: Accepter.allCases)
    func rawFraming(_ accepter: Accepter) async throws {
        try await Self.withRig(["--framing", "raw"]) { rig in
            let echo = expectSuccess(try await rig.smp(accepter, ["os", "echo", "raw"], options: "framing=raw"))
            #expect(echo.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "raw")
            // Every byte value, 0xFF (Telnet's IAC) and CR (NVT's CR NUL) included.
            let content = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 0xF8) })
            let local = try DFUPackages.write(content, "raw.bin", in: rig.directory)
            expectSuccess(try await rig.smp(accepter, ["fs", "upload", local, "/lfs1/raw.bin"], options: "framing=raw", timeout: 120))
            let back = rig.directory.path("raw-back.bin")
            expectSuccess(try await rig.smp(accepter, ["fs", "download", "/lfs1/raw.bin", back], options: "framing=raw", timeout: 120))
            #expect(FileManager.default.contents(atPath: back) == content)
        }
    }

    /// ser2net applies what RFC 2217 asks for to its port: while smp is connected, the pty's termios speed
    /// is the requested one (ser2net restores the port's earlier settings when the client leaves), and
    /// the server's SET-BAUDRATE acknowledgement reports it.
    @Test func theBaudRateReachesTheServersPort() async throws {
        // The device never answers (silent-after=0): smp stays connected, waiting for its echo, until the
        // test has seen the port's speed and stops it, however slow the machine is to run `stty`.
        try await Self.withRig(["--baud", "230400", "--faults", "silent-after=0"]) { rig in
            for baud in [57_600, 230_400, 19_200] {
                let running = try TransferEndToEndTests.Running(
                    ["-v", "--device", rig.uri(.rfc2217, "baud=\(baud)"), "--timeout", "120", "os", "echo", "x"])
                try await running.waitFor(1, of: "server acknowledged setBaudRate = \(baud)")
                var seen = Set<Int>()
                let reached = await waitUntil(interval: .milliseconds(30)) {
                    if let speed = try? await ttySpeed(rig.pty) { seen.insert(speed) }
                    return seen.contains(baud)
                }
                #expect(reached, "ser2net's port while connected with baud=\(baud): \(seen.sorted())")
                let (status, _, stderr) = try await running.signal(SIGINT)
                #expect(status == 130, "\(stderr.suffix(1500))")
            }
            // A raw TCP port server keeps its own settings: baud= is refused there, saying why.
            let refused = try await rig.smp(.tcp, ["os", "echo", "x"], options: "baud=9600")
            #expect(refused.status == 64, "\(refused)")
            #expect(refused.stderr.contains("rfc2217://"), "\(refused)")
        }
    }

    @Test("no server listening: a clear error, exit 69, at once", arguments: Accepter.allCases)
    func serverDown(_ accepter: Accepter) async throws {
        try TestEnvironment.requireBinaries()
        let port = try Ser2netRig.freeTCPPort()
        let uri = "\(accepter.rawValue)://127.0.0.1:\(port)"
        let run = try await runSMP(["--device", uri, "os", "echo", "x"], timeout: 60)
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("connection refused") && run.stderr.contains(uri), "\(run)")
        #expect(run.stderr.contains("ser2net"), "says what to check: \(run)")
        // The refusal itself is the error (the message above); the bound only catches a retry loop or a
        // hang, loose enough for a loaded machine.
        #expect(run.duration < 30, "\(run)")
    }

    @Test func anUnknownHostIsAClearError() async throws {
        let run = try await runSMP(["--device", "tcp://no-such-host.invalid:2000", "os", "echo", "x"], timeout: 30)
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("not found"), "\(run)")
    }

    /// rfc2217:// against a raw TCP accepter: no Telnet answer, so a bounded wait and an error that says
    /// to use tcp://.
    @Test func rfc2217AgainstARawPortSaysSo() async throws {
        try await Self.withRig([]) { rig in
            let uri = "rfc2217://127.0.0.1:\(rig.ser2net.rawPort)?timeout=2"
            let run = try await ProcessRunner.run(TestEnvironment.smp, ["--device", uri, "os", "echo", "x"], timeout: 60)
            #expect(run.status == 69, "\(run)")
            #expect(run.stderr.contains("tcp://") && run.stderr.contains("RFC 2217"), "\(run)")
            // Bounded by the URI's timeout (the message says which), not by the run's: no wall-clock bound
            // tighter than a hang catcher.
            #expect(run.stderr.contains("within 2000 ms"), "\(run)")
            #expect(run.duration < 30, "\(run)")
            // The device is still fine afterwards.
            expectSuccess(try await rig.smp(.tcp, ["os", "echo", "still here"]))
        }
    }

    /// ser2net killed during a download: the transport reports the closed connection, smp exits 69
    /// promptly, and no partial file appears under the final name.
    @Test("ser2net killed mid-transfer", arguments: Accepter.allCases)
    func killedMidTransfer(_ accepter: Accepter) async throws {
        try await Self.withRig(["--baud", "230400"]) { rig in
            let content = randomBytes(48 * 1024)
            let local = try DFUPackages.write(content, "big.bin", in: rig.directory)
            expectSuccess(try await rig.smp(accepter, ["fs", "upload", local, "/lfs1/big.bin"], timeout: 120))
            let target = rig.directory.path("big-back.bin")
            async let download = rig.smp(accepter, ["fs", "download", "/lfs1/big.bin", target], timeout: 60)
            // Once smp is connected and the transfer under way (48 KiB at 230400 baud take about 3 s).
            let port = accepter == .tcp ? rig.ser2net.rawPort : rig.ser2net.rfc2217Port
            #expect(try await rig.ser2net.waitForClient(on: port), "smp never connected")
            // Once the download has written data (mid-transfer, however loaded the machine).
            let underWay = await waitUntil(timeout: .seconds(30), interval: .milliseconds(20)) {
                (partialDownloadSize(of: target) ?? 0) > 0
            }
            #expect(underWay, "the download wrote nothing")
            rig.ser2net.kill9()
            let run = try await download
            #expect(run.status == 69, "\(run)")
            #expect(run.stderr.contains("closed by the server"), "\(run)")
            #expect(!run.timedOut && run.duration < 20, "\(run)")
            #expect(!FileManager.default.fileExists(atPath: target), "no partial file under the final name")
        }
    }
}

/// The RFC 2217 client against an independent server: pyserial's own `serial.rfc2217.PortManager`
/// (Tests/Harness/rfc2217_server.py) serving smp-sim's pty.
@Suite(
    "smp rfc2217:// against pyserial's RFC 2217 server", .timeLimit(.minutes(10)),
    .enabled(if: TestEnvironment.hasVenv, Comment(rawValue: TestEnvironment.venvMissingReason)))
struct PyserialRFC2217Tests {
    @Test func echoBaudRateAndAFileRoundTrip() async throws {
        try TestEnvironment.requireBinaries()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--pty", "--like", "native_sim_serial_fs"])
        defer { sim.stop() }
        let pty = try #require(sim.ptyPath)
        let server = try PythonServer.start(pty: pty)
        defer { server.stop() }
        let uri = "rfc2217://127.0.0.1:\(server.port)"

        let echo = expectSuccess(try await runSMP(["--device", uri + "?baud=57600", "os", "echo", "via pyserial"]))
        #expect(echo.stdout.contains("via pyserial"))
        #expect(try server.waitForLine("client baud 57600"), "\(server.output)")
        #expect(try await ttySpeed(pty) == 57_600)

        let content = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 0xFD) })
        let local = try DFUPackages.write(content, "p.bin", in: directory)
        expectSuccess(try await runSMP(["--device", uri + "?baud=230400", "fs", "upload", local, "/lfs1/p.bin"], timeout: 120))
        let back = directory.path("p-back.bin")
        expectSuccess(try await runSMP(["--device", uri + "?baud=230400", "fs", "download", "/lfs1/p.bin", back], timeout: 120))
        #expect(FileManager.default.contents(atPath: back) == content)
        #expect(try server.waitForLine("client baud 230400"), "\(server.output)")
    }

    /// Tests/Harness/rfc2217_server.py in the venv's Python (pyserial pinned by Scripts/setup.sh).
    final class PythonServer: @unchecked Sendable {
        let process = Process()
        let port: Int
        private let lines = LockedBox([String]())

        var output: [String] { lines.value }

        static func start(pty: String) throws -> PythonServer { try PythonServer(pty: pty) }

        private init(pty: String) throws {
            process.executableURL = TestEnvironment.venvTool("python")
            process.arguments = [
                TestEnvironment.repositoryRoot.appendingPathComponent("Tests/Harness/rfc2217_server.py").path, pty,
            ]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.runHoldingSpawnLock { try? pipe.fileHandleForWriting.close() }
            let handle = pipe.fileHandleForReading
            let lines = self.lines
            readLines(from: handle) { line in lines.withValue { $0.append(line) } }
            var found: Int?
            let deadline = Date().addingTimeInterval(60)
            while found == nil && Date() < deadline && process.isRunning {
                found = lines.value.first { $0.hasPrefix("listening ") }.flatMap { Int($0.dropFirst(10)) }
                if found == nil { usleep(20_000) }
            }
            guard let found else {
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                throw E2EError("rfc2217_server.py did not start listening: \(lines.value)")
            }
            port = found
        }

        /// Waits (at most 60 s: a deadline that only stops a hang) until the server printed `line`.
        func waitForLine(_ line: String) throws -> Bool {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                if lines.value.contains(line) { return true }
                usleep(20_000)
            }
            return false
        }

        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(3)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }
}

/// rfc2217:// against servers that misbehave on purpose (a scripted loopback TCP server): the error
/// says what happened, exit 69, no hang.
@Suite("rfc2217:// against refusing servers")
struct RFC2217RefusalTests {
    /// Accepts one connection, waits for the client's first bytes, sends `reply` (nil: closes at once)
    /// and keeps the connection open until the client closes it.
    final class ScriptedServer: @unchecked Sendable {
        let port: Int
        private let fd: Int32

        init(reply: [UInt8]?) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0, let port = bindToLoopback(fd), listen(fd, 1) == 0 else {
                throw E2EError("cannot listen on loopback: errno \(errno)")
            }
            self.port = port
            let listener = fd
            Thread.detachNewThread {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                defer { close(client) }
                guard let reply else { return }
                var buffer = [UInt8](repeating: 0, count: 256)
                _ = read(client, &buffer, buffer.count)
                _ = reply.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                // Open until the client leaves: it must fail on the reply, not on a close.
                while read(client, &buffer, buffer.count) > 0 {}
            }
        }

        func stop() { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
    }

    @Test func aServerThatRefusesTheComPortOption() async throws {
        // WONT/DONT COM-PORT-OPTION: a Telnet server without RFC 2217.
        let server = try ScriptedServer(reply: [255, 254, 44, 255, 252, 44])
        defer { server.stop() }
        let run = try await runSMP(["--device", "rfc2217://127.0.0.1:\(server.port)", "os", "echo", "x"], timeout: 60)
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("refused the RFC 2217 com port option"), "\(run)")
        // It failed on the refusal (the server holds the connection open until smp leaves, and a
        // negotiation timeout would say so): the bound only catches a hang, loose enough for a loaded machine.
        #expect(run.duration < 30, "\(run)")
    }

    @Test func aServerThatClosesDuringNegotiation() async throws {
        let server = try ScriptedServer(reply: nil)
        defer { server.stop() }
        let run = try await runSMP(["--device", "rfc2217://127.0.0.1:\(server.port)", "os", "echo", "x"], timeout: 60)
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("closed the connection during RFC 2217 negotiation"), "\(run)")
        #expect(run.duration < 30, "only a hang is this slow: \(run)")
    }
}
