import Foundation
import Testing

#if canImport(Glibc)
import Glibc
import TestSupport
#endif

/// `smp fs` end to end: large UDP answers, interruption (SIGINT/SIGTERM) and resumption, against
/// `smp-sim` and against the real Zephyr build (native_sim_serial_fs) when ../shared/firmware has it.
@Suite(.serialized) struct TransferEndToEndTests {
    /// A started `smp` that the test signals.
    final class Running: @unchecked Sendable {
        let process = Process()
        private let stdout = Pipe()
        /// stderr goes to a file that the test reads as it grows: no pipe handler that a loaded machine
        /// runs late (with a pipe, the whole upload was over before the test saw its first lines).
        private let stderrFile = FileManager.default.temporaryDirectory.appendingPathComponent("smp-running-\(UUID().uuidString).stderr")

        init(_ arguments: [String]) throws {
            try TestEnvironment.requireBinaries()
            process.executableURL = TestEnvironment.smp
            process.arguments = arguments
            var environment = ProcessInfo.processInfo.environment
            environment.removeValue(forKey: "SMP_DEVICE")
            process.environment = environment
            process.standardOutput = stdout
            _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: stderrFile)
            process.standardInput = FileHandle.nullDevice
            try process.runHoldingSpawnLock()
        }

        deinit { try? FileManager.default.removeItem(at: stderrFile) }

        private var collectedText: String {
            (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
        }

        /// Waits (at most 60 s) until stderr (with `-v`: one line per request and answer) holds `count`
        /// lines containing `text`, e.g. answers to upload chunks.
        func waitFor(_ count: Int, of text: String) async throws {
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, process.isRunning {
                let seen = collectedText.split(separator: "\n").filter { $0.contains(text) }.count
                if seen >= count { return }
                try await Task.sleep(for: .milliseconds(10))
            }
            let log = collectedText
            let lines = log.split(separator: "\n")
            let exit = process.isRunning ? "still running" : "exited with \(process.terminationStatus)"
            throw E2EError(
                "smp did not log \(count) lines with \"\(text)\" (\(exit), \(lines.filter { $0.contains(text) }.count) seen); stderr:\n"
                    + (lines.prefix(15) + ["..."] + lines.suffix(15)).joined(separator: "\n"))
        }

        /// Sends `signal` and waits (at most 20 s) for the exit; returns status, stdout, stderr.
        func signal(_ number: Int32) async throws -> (Int32, String, String) {
            kill(process.processIdentifier, number)
            let deadline = Date().addingTimeInterval(20)
            while process.isRunning, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                throw E2EError("smp did not exit within 20 s of signal \(number)")
            }
            let out = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            return (process.terminationStatus, out, collectedText)
        }
    }

    /// Runs `smp ARGS` and stops it with `signal` once its stderr has `count` lines containing `text`.
    /// A shell watches and signals, so a loaded test process (late timers) cannot miss the moment.
    /// - Returns: the exit status, stderr, and whether the signal was sent before smp ended by itself.
    static func runStopped(
        _ arguments: [String], after count: Int, of text: String, signal: Int32
    ) async throws -> (status: Int32, stderr: String, signalled: Bool) {
        try TestEnvironment.requireBinaries()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let script = #"""
            "$SMP" "$@" 2>"$DIR/err" >"$DIR/out" &
            pid=$!
            while kill -0 "$pid" 2>/dev/null; do
                if [ "$(grep -c -- "$TEXT" "$DIR/err")" -ge "$COUNT" ]; then kill "-$SIGNAL" "$pid"; touch "$DIR/signalled"; break; fi
                sleep 0.01
            done
            wait "$pid"
            echo $? >"$DIR/status"
            """#
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script, "sh"] + arguments, timeout: 120,
            environment: [
                "SMP": TestEnvironment.smp.path, "DIR": directory.url.path, "TEXT": text, "COUNT": "\(count)",
                "SIGNAL": "\(signal)",
            ])
        guard let statusText = try? String(contentsOfFile: directory.path("status"), encoding: .utf8),
            let status = Int32(statusText.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw E2EError("the watcher did not finish: \(result)") }
        let stderr = (try? String(contentsOfFile: directory.path("err"), encoding: .utf8)) ?? ""
        return (status, stderr, FileManager.default.fileExists(atPath: directory.path("signalled")))
    }

    static func json(_ text: String) throws -> [String: Any] {
        let line = text.split(separator: "\n").last.map(String.init) ?? ""
        guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw E2EError("not a JSON object: \(text)")
        }
        return object
    }

    @Test("UDP answers longer than 2048 bytes arrive whole: fs download from a device with buf_size 8192")
    func largeUDPAnswers() async throws {
        try await withSimulator(.udp, extraArguments: ["--buf-size", "8192"]) { session in
            let payload = randomBytes(100_000)
            let local = session.directory.path("up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp("fs", "upload", local, "/lfs1/big.bin"))
            let back = session.directory.path("down.bin")
            expectSuccess(try await session.smp("-v", "fs", "download", "/lfs1/big.bin", back))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    @Test("an fs upload stopped by SIGINT exits 130 and resumes from the device's offset when run again")
    func interruptedUploadResumes() async throws {
        try await withSimulator(.serial, extraArguments: ["--baud", "115200"]) { session in
            let payload = randomBytes(80_000)
            let local = session.directory.path("up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let running = try Running(["-v", "--device", session.device, "fs", "upload", local, "/lfs1/resume.bin"])
            try await running.waitFor(3, of: "<- write-response fs(8) cmd 0")
            let (status, _, stderr) = try await running.signal(SIGINT)
            #expect(status == 130, "\(stderr)")
            #expect(stderr.contains("cancelled") || stderr.contains("interrupted"), "\(stderr)")
            let again = expectSuccess(try await session.smp(["--json", "fs", "upload", local, "/lfs1/resume.bin"], timeout: 120))
            let result = try Self.json(again.stdout)
            let resumed = result["resumed_from"] as? Int ?? 0
            #expect(resumed > 0 && resumed < payload.count, "\(again)")
            #expect(result["verified"] as? String == "sha256", "\(again)")
            let back = session.directory.path("back.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/resume.bin", back], timeout: 120))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    @Test("an fs download stopped by SIGTERM exits 130 and leaves no file, temporary or final")
    func interruptedDownloadLeavesNothing() async throws {
        try await withSimulator(.serial, extraArguments: ["--baud", "115200"]) { session in
            let local = session.directory.path("up.bin")
            try randomBytes(80_000).write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp(["fs", "upload", local, "/lfs1/down.bin"], timeout: 120))
            let folder = session.directory.url.appendingPathComponent("out")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let running = try Running(["-v", "--device", session.device, "fs", "download", "/lfs1/down.bin", folder.path + "/down.bin"])
            // Stopped three answers into the download (of about eighty), seen in the -v trace: not after a
            // time, which a loaded machine can stretch past the whole download.
            try await running.waitFor(3, of: "<- read-response fs(8) cmd 0")
            let started = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(started.contains { $0.hasPrefix(".down.bin.") && $0.hasSuffix(".download") }, "\(started)")
            let (status, _, stderr) = try await running.signal(SIGTERM)
            #expect(status == 130, "\(stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        }
    }

    @Test("dfu stopped by SIGINT mid-upload exits 130; the next run resumes from the device's offset")
    func interruptedDFUResumes() async throws {
        try await withDFUSimulator(.serial, extraArguments: ["--baud", "115200"]) { session in
            let image = try DFUPackages.image(version: (3, 0, 0), size: 96 * 1024, seed: 77)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let running = try Running(["-v", "--device", session.device, "dfu", package, "--mode", "upload-only"])
            try await running.waitFor(3, of: "<- write-response image(1) cmd 1")
            let (status, _, stderr) = try await running.signal(SIGINT)
            #expect(status == 130, "\(stderr)")
            let again = try await session.smp(["--json", "dfu", package, "--mode", "upload-only"], timeout: 180)
            expectSuccess(again)
            let result = try #require(dfuResult(again))
            let images = result["images"] as? [[String: Any]] ?? []
            let resumed = images.first?["resumed_from"] as? Int ?? 0
            #expect(resumed > 0 && resumed < image.data.count, "\(again)")
        }
    }

    @Test("a command waiting on a silent device stops on SIGTERM with exit 130")
    func silentDeviceCommandStops() async throws {
        // A UDP socket that never answers: the echo would wait for its timeout.
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        let port = try #require(bindToLoopback(fd))
        let running = try Running(["--device", "udp:127.0.0.1:\(port)", "--timeout", "60", "os", "echo", "hi"])
        // Once its request arrived (smp then waits for the answer).
        var readable = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let asked = await waitUntil(timeout: .seconds(30)) { poll(&readable, 1, 0) == 1 }
        #expect(asked, "smp sent no request within 30 s")
        let (status, _, stderr) = try await running.signal(SIGTERM)
        #expect(status == 130, "\(stderr)")
    }

    @Test("fs download --max-size refuses a larger file with a clear error (exit 64)")
    func downloadSizeLimit() async throws {
        try await withSimulator(.udp) { session in
            let local = session.directory.path("up.bin")
            try randomBytes(5000).write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp("fs", "upload", local, "/lfs1/limit.bin"))
            let refused = try await session.smp("fs", "download", "--max-size", "4096", "/lfs1/limit.bin", session.directory.path("x.bin"))
            expectStatus(refused, SMPExit.usage)
            #expect(refused.stderr.contains("announces 5000 bytes"), "\(refused)")
            #expect(!FileManager.default.fileExists(atPath: session.directory.path("x.bin")))
        }
    }
}

/// The real Zephyr 4.4.0 build with LittleFS at /lfs1 (native_sim_serial_fs.exe), started per test in
/// its own directory.
@Suite(.serialized, .enabled(if: RealFileSystemDevice.executable != nil, "needs ../shared/firmware (or $SMP_FIRMWARE_DIR) with native_sim_serial_fs.exe"))
struct RealFileSystemTransferTests {
    @Test("against Zephyr: an upload killed mid-way resumes from the device's bytes; download matches; empty files")
    func killedUploadResumesOnZephyr() async throws {
        let device = try RealFileSystemDevice()
        defer { device.stop() }
        try await device.waitUntilAnswering()
        let uri = "serial:\(device.pty)"  // default options: the link engine finds the line limits
        let payload = randomBytes(4000)
        let local = device.directory.appendingPathComponent("k.bin").path
        try payload.write(to: URL(fileURLWithPath: local))
        // Small chunks, one at a time (500 of them, ~10 s), stopped after 10 were answered.
        let (status, stderr, signalled) = try await TransferEndToEndTests.runStopped(
            ["-v", "--device", uri, "fs", "upload", local, "/lfs1/k.bin", "--chunk-size", "8", "--pipeline", "1"],
            after: 10, of: "<- write-response fs(8) cmd 0", signal: SIGTERM)
        #expect(signalled, "smp ended before it was stopped: \(stderr.suffix(1000))")
        #expect(status == 130, "\(stderr.suffix(2000))")
        // An upload asks for the device's copy when it takes more than `resumeCheckMinimumChunks` chunks:
        // 4000 bytes are 5 frames of this build's (12 lines of 127 B), so chunks of 256 bytes here (this
        // build's LittleFS cannot append to a file of more than about 4 KiB).
        let again = expectSuccess(
            try await runSMP(["--device", uri, "--json", "fs", "upload", local, "/lfs1/k.bin", "--chunk-size", "256"]))
        let result = try TransferEndToEndTests.json(again.stdout)
        let resumed = result["resumed_from"] as? Int ?? 0
        #expect(resumed > 0 && resumed < payload.count, "\(again)")
        #expect(result["verified"] as? String == "sha256", "\(again)")
        let back = device.directory.appendingPathComponent("back.bin").path
        expectSuccess(try await runSMP(["--device", uri, "fs", "download", "/lfs1/k.bin", back]))
        #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)

        let empty = device.directory.appendingPathComponent("empty.bin").path
        try Data().write(to: URL(fileURLWithPath: empty))
        let up = expectSuccess(try await runSMP(["--device", uri, "--json", "fs", "upload", empty, "/lfs1/e.bin"]))
        #expect(try TransferEndToEndTests.json(up.stdout)["verified"] as? String == "empty", "\(up)")
        let emptyBack = device.directory.appendingPathComponent("e.bin").path
        let down = expectSuccess(try await runSMP(["--device", uri, "--json", "fs", "download", "/lfs1/e.bin", emptyBack]))
        #expect(try TransferEndToEndTests.json(down.stdout)["verified"] as? String == "empty", "\(down)")
        // Zephyr keeps an existing file on an upload of 0 bytes: said, not hidden.
        let over = try await runSMP(["--device", uri, "fs", "upload", empty, "/lfs1/k.bin"])
        expectStatus(over, SMPExit.protocolError)
        #expect(over.stderr.contains("does not truncate"), "\(over)")
    }
}

/// A native_sim build of ../shared/firmware in a fresh directory; a serial one's pty from its first line.
final class RealFileSystemDevice: @unchecked Sendable {
    static func firmware(_ name: String) -> URL? {
        let environment = ProcessInfo.processInfo.environment["SMP_FIRMWARE_DIR"]
        let directory = environment.map { URL(fileURLWithPath: $0) }
            ?? TestEnvironment.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/firmware")
        let file = directory.appendingPathComponent("zephyr_4.4.0_smp_server_0eae053d_native_sim_\(name).exe")
        return FileManager.default.isExecutableFile(atPath: file.path) ? file : nil
    }
    static let executable = firmware("serial_fs")

    let process = Process()
    let directory: URL
    private(set) var pty = ""

    init(_ name: String = "serial_fs") throws {
        guard let executable = Self.firmware(name) else { throw E2EError("native_sim_\(name).exe is missing") }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("zephyr-fs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let log = directory.appendingPathComponent("device.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = executable
        process.currentDirectoryURL = directory
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        process.standardInput = FileHandle.nullDevice
        try process.runHoldingSpawnLock()
        let deadline = Date().addingTimeInterval(10)
        while name.hasPrefix("serial"), Date() < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: #"/dev/pts/[0-9]+"#, options: .regularExpression) {
                pty = String(text[range])
                break
            }
            usleep(50_000)
        }
        guard !pty.isEmpty || !name.hasPrefix("serial") else {
            stop()
            throw E2EError("native_sim_serial_fs.exe did not print its pty (see \(log.path))")
        }
    }

    /// Waits until the serial build answers an SMP echo (its pty exists before its SMP server runs).
    func waitUntilAnswering(within limit: Double = 60) async throws {
        let deadline = Date().addingTimeInterval(limit)
        while process.isRunning && Date() < deadline {
            if try await runSMP(["--device", "serial:\(pty)", "--timeout", "0.5", "os", "echo", "ready"]).status == 0 { return }
        }
        throw E2EError("native_sim at \(pty) did not answer an echo within \(Int(limit)) s (see \(directory.path)/device.log)")
    }

    func stop() {
        // SIGKILL: a child of the test runner inherits its blocked signal mask, SIGTERM included, and
        // native_sim keeps running with it blocked. Its flash dies with the directory anyway.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Zephyr's answer to a repeated fs write, on the real UDP build (native_sim_udp, port 1337) through a
/// relay that loses one answer, so `smp` sends the same chunk again: FS error 11 with `len` = the
/// device's length (the file then stays open without its length until closed), or, for the chunk at
/// offset 0, the chunk appended a second time.
@Suite(.serialized, .enabled(if: RealFileSystemDevice.firmware("udp") != nil, "needs ../shared/firmware (or $SMP_FIRMWARE_DIR) with native_sim_udp.exe"))
struct RealRepeatedWriteTests {
    /// Port 1337 is fixed in the build and shared by everyone on the machine: wait for it.
    static func waitForPort() async throws -> Bool {
        for _ in 0..<120 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(1337).bigEndian
            let free = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            close(fd)
            if free { return true }
            try await Task.sleep(for: .seconds(1))
        }
        return false
    }

    func run(droppingAnswerTo request: Int) async throws {
        guard try await Self.waitForPort() else {
            Issue.record("UDP port 1337 stayed busy for 120 s (another native_sim_udp runs): not tested")
            return
        }
        let device = try RealFileSystemDevice("udp")
        defer { device.stop() }
        // Until it answers (a deadline, not a count of tries: a refused one fails at once).
        var ready = false
        let deadline = Date().addingTimeInterval(60)
        while !ready && Date() < deadline && device.process.isRunning {
            ready = try await runSMP(["--device", "udp:127.0.0.1:1337", "--timeout", "0.5", "os", "echo", "hi"]).status == 0
        }
        try #require(ready, "native_sim_udp did not answer an echo")
        let proxy = try AnswerDroppingUDPRelay.start(devicePort: 1337, dropAnswersTo: [request])
        defer { proxy.stop() }
        let payload = randomBytes(2000)
        let local = device.directory.appendingPathComponent("up.bin").path
        try payload.write(to: URL(fileURLWithPath: local))
        let uri = "udp:127.0.0.1:\(proxy.port)"
        let upload = expectSuccess(try await runSMP(
            ["--device", uri, "--json", "fs", "upload", local, "/lfs1/r.bin", "--chunk-size", "300", "--pipeline", "1"]))
        #expect(proxy.dropped == 1)
        #expect(try TransferEndToEndTests.json(upload.stdout)["verified"] as? String == "sha256", "\(upload)")
        let stat = expectSuccess(try await runSMP(["--device", uri, "fs", "stat", "/lfs1/r.bin"]))
        #expect(stat.stdout.contains("2000 bytes"), "\(stat)")
        let back = device.directory.appendingPathComponent("back.bin").path
        expectSuccess(try await runSMP(["--device", uri, "fs", "download", "/lfs1/r.bin", back]))
        #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
    }

    @Test("a lost answer to a middle chunk: FS error 11 with the device's length, the whole file committed")
    func lostMiddleAnswer() async throws { try await run(droppingAnswerTo: 3) }

    @Test("a lost answer to the first chunk: the repeated chunk is appended; the upload starts again")
    func lostFirstAnswer() async throws { try await run(droppingAnswerTo: 1) }
}
