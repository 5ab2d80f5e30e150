import Foundation
import Testing

/// `smp` through real ser2net (Debian's 4.3) to smp-sim's pty: `tcp://` (raw accepter) and
/// `rfc2217://` (telnet(rfc2217) accepter), default options (link sizing must find Zephyr's 2 x 128-byte
/// line buffers through the port server), raw framing, the baud rate arriving at the port, and the
/// failures: no server, the wrong kind of server, the server killed mid-transfer.
@Suite(
    "smp over ser2net (tcp:// and rfc2217://)", .serialized, .timeLimit(.minutes(5)),
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
        let sim = try await SimProcess.start(["--pty"] + simArguments)
        defer { sim.stop() }
        let pty = try #require(sim.ptyPath, "smp-sim printed no pty path")
        let ser2net = try Ser2netRig.start(device: pty, in: directory)
        defer { ser2net.stop() }
        return try await body(Rig(sim: sim, ser2net: ser2net, directory: directory))
    }

    @Test("echo, files and an image with default options through Zephyr's line buffers", arguments: Accepter.allCases)
    func defaultOptions(_ accepter: Accepter) async throws {
        try await Self.withRig(["--like", "native_sim_serial_fs"]) { rig in
            let short = expectSuccess(try await rig.smp(accepter, ["os", "echo", "hello through ser2net"]))
            #expect(short.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "hello through ser2net")
            let long = String(repeating: "e", count: 184)
            let echo = expectSuccess(try await rig.smp(accepter, ["os", "echo", long]))
            #expect(echo.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == long)

            let content = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let local = try DFUPackages.write(content, "f.bin", in: rig.directory)
            let up = expectSuccess(try await rig.smp(accepter, ["-v", "fs", "upload", local, "/lfs1/f.bin"], timeout: 120))
            #expect(!up.stderr.contains("resend"), "a frame the device could not hold: \(up.stderr.suffix(1500))")
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

    /// A whole upgrade: upload, test, reset (the connection is opened again after it), confirm.
    @Test("dfu test-and-confirm through ser2net", arguments: Accepter.allCases)
    func dfu(_ accepter: Accepter) async throws {
        try await Self.withRig(["--swap-time", "0.2"]) { rig in
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

    /// ser2net applies what RFC 2217 asks for to its port: the pty's termios speed changes.
    @Test func theBaudRateReachesTheServersPort() async throws {
        try await Self.withRig([]) { rig in
            for baud in [57_600, 230_400, 115_200] {
                let run = expectSuccess(try await rig.smp(.rfc2217, ["-v", "os", "echo", "b\(baud)"], options: "baud=\(baud)"))
                #expect(run.stdout.contains("b\(baud)"))
                #expect(try await ttySpeed(rig.pty) == baud, "ser2net's port after baud=\(baud); log: \(rig.ser2net.logText.suffix(800))")
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
        let run = try await runSMP(["--device", uri, "os", "echo", "x"], timeout: 20)
        #expect(run.status == 69, "\(run)")
        #expect(run.stderr.contains("connection refused") && run.stderr.contains(uri), "\(run)")
        #expect(run.stderr.contains("ser2net"), "says what to check: \(run)")
        #expect(run.duration < 5, "\(run)")
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
            let run = try await ProcessRunner.run(TestEnvironment.smp, ["--device", uri, "os", "echo", "x"], timeout: 30)
            #expect(run.status == 69, "\(run)")
            #expect(run.stderr.contains("tcp://") && run.stderr.contains("RFC 2217"), "\(run)")
            #expect(run.duration < 8, "\(run)")
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
            try await Task.sleep(for: .milliseconds(800))
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
    "smp rfc2217:// against pyserial's RFC 2217 server", .timeLimit(.minutes(3)),
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
            try process.run()
            try? pipe.fileHandleForWriting.close()
            let handle = pipe.fileHandleForReading
            let lines = self.lines
            Thread.detachNewThread {
                var pending = Data()
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    pending.append(chunk)
                    while let newline = pending.firstIndex(of: 0x0A) {
                        let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                        pending = Data(pending[(newline + 1)...])
                        lines.withValue { $0.append(line) }
                    }
                }
            }
            var found: Int?
            let deadline = Date().addingTimeInterval(15)
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

        /// Waits (at most 5 s) until the server printed `line`.
        func waitForLine(_ line: String) throws -> Bool {
            let deadline = Date().addingTimeInterval(5)
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
