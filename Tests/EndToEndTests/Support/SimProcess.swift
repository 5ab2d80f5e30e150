import Foundation
import TestSupport

/// A running `smp-sim`, started with the given arguments and stopped with SIGTERM (SIGKILL if it
/// lingers) in all paths.
final class SimProcess: @unchecked Sendable {
    let process: Process
    let arguments: [String]
    /// `/dev/pts/N` when serving a pty.
    private(set) var ptyPath: String?
    /// The `--pty-link` symlink when given.
    private(set) var ptyLink: String?
    /// Every pty's path (its link when it has one), in device order (`--count N`: one per device).
    private(set) var ptyPaths: [String] = []
    /// `HOST:PORT` of each UDP front end, in order.
    private(set) var udpEndpoints: [(host: String, port: Int)] = []
    /// The BLE peripheral's address (`ble ADAPTER ADDRESS ...` line) when serving over BLE.
    private(set) var bleAddress: String?
    private let stderrFile: URL
    private let lines = LockedBox([String]())
    private let linesChanged = NSCondition()
    private let stopped = LockedBox(false)

    /// Starts `smp-sim` and waits until it printed one ready line per front end.
    static func start(
        _ arguments: [String], readyTimeout: Double = 20, environment: [String: String] = [:]
    ) async throws -> SimProcess {
        try TestEnvironment.requireBinaries()
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let sim = try SimProcess(arguments: arguments, environment: environment)
                    do {
                        try sim.waitUntilReady(timeout: readyTimeout)
                        continuation.resume(returning: sim)
                    } catch {
                        sim.stop()
                        continuation.resume(throwing: error)
                    }
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// What the CLI tests run against unless they say otherwise: smp-sim's former defaults (2048-byte
    /// buffers, no serial line-buffer or UDP buffer limits, unlimited file system), so that tests about
    /// commands and transfers stay fast. smp-sim now defaults to Zephyr's limits (384-byte buffers,
    /// 2 x 128-byte receive lines on a 10 ms tick, two buffers per UDP request, 16 KiB LittleFS), where a
    /// 1 MiB serial transfer takes minutes however well the client fits the link: the tests about the
    /// link (LinkProbeTests, LossyLinkTests, UDPWindowTests, RealFirmwareTests) and the conformance suite
    /// run against those limits.
    static let permissiveDefaults: [(option: String, value: String)] = [
        ("--buf-size", "2048"), ("--rx-lines", "0"), ("--fs-blocks", "0"), ("--udp-queue", "unlimited"),
    ]

    private init(arguments: [String], environment: [String: String] = [:]) throws {
        var arguments = arguments
        for (option, value) in Self.permissiveDefaults where !arguments.contains(option) && !arguments.contains("--like") {
            arguments += [option, value]
        }
        self.arguments = arguments
        process = Process()
        process.executableURL = TestEnvironment.smpSim
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        stderrFile = FileManager.default.temporaryDirectory
            .appendingPathComponent("smp-sim-\(UUID().uuidString.prefix(8)).stderr")
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        process.standardInput = FileHandle.nullDevice
        childSpawnLock.lock()
        let pipe = Pipe()
        process.standardOutput = pipe
        do {
            try process.runWithSignalsUnblocked()
        } catch {
            childSpawnLock.unlock()
            throw error
        }
        try? pipe.fileHandleForWriting.close()
        childSpawnLock.unlock()
        let handle = pipe.fileHandleForReading
        let lines = self.lines
        let condition = linesChanged
        readLines(from: handle) { line in
            condition.lock()
            lines.withValue { $0.append(line) }
            condition.broadcast()
            condition.unlock()
        } end: {
            condition.lock()
            lines.withValue { $0.append("<eof>") }
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Waits (off the cooperative threads) for a line of the simulator's output that `matches`, for at
    /// most `timeout` seconds: the line, or nil.
    func waitForLine(timeout: Double = 120, _ matches: @escaping @Sendable (String) -> Bool) async -> String? {
        let lines = self.lines
        let condition = linesChanged
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let deadline = Date().addingTimeInterval(timeout)
                condition.lock()
                defer { condition.unlock() }
                while true {
                    let current = lines.value
                    if let line = current.first(where: matches) { return continuation.resume(returning: line) }
                    if current.last == "<eof>" || !condition.wait(until: deadline) { return continuation.resume(returning: nil) }
                }
            }
        }
    }

    private var expectedFrontEnds: Int {
        var count = 0
        var index = 0
        while index < arguments.count {
            switch arguments[index] {
            case "--pty", "--pty-link": count += 1
            case "--udp": count += 1
            case "--ble": count += 1
            default: break
            }
            index += 1
        }
        // --pty with --pty-link is one front end.
        if arguments.contains("--pty") && arguments.contains("--pty-link") { count -= 1 }
        // --count N: every front end once per device.
        if let option = arguments.firstIndex(of: "--count"), option + 1 < arguments.count, let devices = Int(arguments[option + 1]) {
            count *= devices
        }
        return count
    }

    private func waitUntilReady(timeout: Double) throws {
        let deadline = Date().addingTimeInterval(timeout)
        let wanted = expectedFrontEnds
        linesChanged.lock()
        defer { linesChanged.unlock() }
        while true {
            let current = lines.value
            if current.contains("<eof>") {
                throw E2EError("smp-sim \(arguments.joined(separator: " ")) exited before it was ready: \(stderrText)")
            }
            let ready = current.filter { $0.hasPrefix("pty ") || $0.hasPrefix("udp ") || $0.hasPrefix("ble ") }
            if ready.count >= wanted {
                parse(ready)
                return
            }
            if !linesChanged.wait(until: deadline) {
                throw E2EError(
                    "smp-sim \(arguments.joined(separator: " ")) printed no ready line within \(timeout) s; stdout: \(current), stderr: \(stderrText)"
                )
            }
        }
    }

    private func parse(_ ready: [String]) {
        for line in ready {
            let words = line.split(separator: " ").map(String.init)
            if words.first == "pty", words.count >= 2 {
                ptyPath = words[1]
                if let link = words.firstIndex(of: "link"), link + 1 < words.count { ptyLink = words[link + 1] }
                ptyPaths.append(words.firstIndex(of: "link").flatMap { $0 + 1 < words.count ? words[$0 + 1] : nil } ?? words[1])
            } else if words.first == "ble", words.count >= 3 {
                bleAddress = words[2]
            } else if words.first == "udp", words.count >= 2, let colon = words[1].lastIndex(of: ":"),
                let port = Int(words[1][words[1].index(after: colon)...])
            {
                var host = String(words[1][..<colon])
                if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
                udpEndpoints.append((host, port))
            }
        }
    }

    /// The sim's stderr so far.
    var stderrText: String {
        (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
    }

    var isRunning: Bool { process.isRunning }

    /// The serial device URI (`serial:<link or pty>`).
    var serialURI: String { "serial:\(ptyLink ?? ptyPath ?? "?")" }

    /// The UDP device URI of the first UDP front end.
    var udpURI: String { udpURIs.first ?? "udp:?" }

    /// The UDP device URI of every UDP front end, in order (`--count N --udp ...`: device 0 first).
    var udpURIs: [String] {
        udpEndpoints.map { endpoint in
            endpoint.host.contains(":") ? "udp:[\(endpoint.host)]:\(endpoint.port)" : "udp:\(endpoint.host):\(endpoint.port)"
        }
    }

    /// Kills the simulator at once (a vanished device).
    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// SIGTERM, then SIGKILL after `grace` seconds; waits for the exit. Idempotent.
    func stop(grace: Double = 3) {
        let first = stopped.withValue { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(grace)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                // Bounded, like ProcessRunner: Foundation may learn of the exit late (see there).
                let killDeadline = Date().addingTimeInterval(10)
                while process.isRunning && Date() < killDeadline { usleep(10_000) }
            }
        }
        try? FileManager.default.removeItem(at: stderrFile)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// The links the CLI tests run over.
enum Link: String, CaseIterable, Sendable, CustomStringConvertible {
    case serial
    case udp

    var description: String { rawValue }

    /// smp-sim arguments serving this link; `directory` holds the pty symlink.
    func simArguments(in directory: TemporaryDirectory) -> [String] {
        switch self {
        case .serial: return ["--pty-link", directory.path("tty")]
        case .udp: return ["--udp", "127.0.0.1:0"]
        }
    }

    func deviceURI(of sim: SimProcess) -> String {
        switch self {
        case .serial: return sim.serialURI
        case .udp: return sim.udpURI
        }
    }
}

/// A simulator serving one link, a temporary directory, and `smp` pointed at both.
struct SimSession: Sendable {
    let sim: SimProcess
    let link: Link
    let directory: TemporaryDirectory
    var device: String { link.deviceURI(of: sim) }

    /// Runs `smp --device <sim> ARGS` with a hard timeout.
    func smp(_ arguments: [String], timeout: Double = 60) async throws -> ProcessResult {
        try await ProcessRunner.run(TestEnvironment.smp, ["--device", device] + arguments, timeout: timeout)
    }

    func smp(_ arguments: String..., timeout: Double = 60) async throws -> ProcessResult {
        try await smp(arguments, timeout: timeout)
    }
}

/// Starts a simulator on `link`, runs `body`, and stops the simulator and removes the directory in all
/// paths.
@discardableResult
func withSimulator<R>(
    _ link: Link, extraArguments: [String] = [], _ body: (SimSession) async throws -> R
) async throws -> R {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let sim = try await SimProcess.start(link.simArguments(in: directory) + extraArguments)
    defer { sim.stop() }
    return try await body(SimSession(sim: sim, link: link, directory: directory))
}

/// Runs smp without a simulator.
func runSMP(_ arguments: [String], timeout: Double = 30) async throws -> ProcessResult {
    try TestEnvironment.requireBinaries()
    return try await ProcessRunner.run(TestEnvironment.smp, arguments, timeout: timeout)
}
