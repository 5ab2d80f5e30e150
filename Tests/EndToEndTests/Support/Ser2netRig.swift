import Foundation
import TestSupport

/// Real ser2net (Debian's 4.3) serving a pty, e.g. smp-sim's, on two free loopback ports: a raw `tcp`
/// accepter and a `telnet(rfc2217)` one. Started in the foreground (`ser2net -n -d -c FILE`), stopped by
/// its PID in all paths.
final class Ser2netRig: @unchecked Sendable {
    /// `SMP_TEST_REQUIRE_SER2NET=1` (Scripts/test.sh sets it): a missing ser2net fails instead of skipping.
    static let isRequired = ProcessInfo.processInfo.environment["SMP_TEST_REQUIRE_SER2NET"] == "1"

    /// The ser2net executable on PATH (or /usr/sbin), nil when not installed.
    static let executable: URL? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/sbin"] {
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent("ser2net")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }()

    /// Whether the tests can run: ser2net installed, or required (then they fail saying what to install).
    static var isAvailable: Bool { executable != nil || isRequired }
    static let missingReason = "needs ser2net (apt-get install ser2net; Scripts/setup.sh installs it)"

    let process: Process
    let rawPort: Int
    let rfc2217Port: Int
    let device: String
    let configuration: URL
    private let log: URL
    private let stopped = LockedBox(false)

    var tcpURI: String { "tcp://127.0.0.1:\(rawPort)" }
    var rfc2217URI: String { "rfc2217://127.0.0.1:\(rfc2217Port)" }

    /// Starts ser2net for `device` (a pty path) with its config and log in `directory`; returns once both
    /// ports listen. `speed` is the port's setting before any RFC 2217 client changes it.
    static func start(device: String, in directory: TemporaryDirectory, speed: Int = 115_200) throws -> Ser2netRig {
        guard let executable else { throw E2EError("ser2net is not installed: \(missingReason)") }
        let raw = try freeTCPPort()
        var telnet = try freeTCPPort()
        while telnet == raw { telnet = try freeTCPPort() }
        let configuration = URL(fileURLWithPath: directory.path("ser2net.yaml"))
        // ser2net.yaml(5): one connection per accepter, both on the same serial device. `local`: no
        // modem control lines (a pty has none).
        let yaml = """
            %YAML 1.1
            ---
            connection: &raw
              accepter: tcp,127.0.0.1,\(raw)
              connector: serialdev,\(device),\(speed)n81,local
              options:
                kickolduser: true
            connection: &rfc2217
              accepter: telnet(rfc2217),tcp,127.0.0.1,\(telnet)
              connector: serialdev,\(device),\(speed)n81,local
              options:
                kickolduser: true

            """
        try yaml.write(to: configuration, atomically: true, encoding: .utf8)
        return try Ser2netRig(
            executable: executable, configuration: configuration, device: device, rawPort: raw, rfc2217Port: telnet,
            log: URL(fileURLWithPath: directory.path("ser2net.log")))
    }

    private init(executable: URL, configuration: URL, device: String, rawPort: Int, rfc2217Port: Int, log: URL) throws {
        self.configuration = configuration
        self.device = device
        self.rawPort = rawPort
        self.rfc2217Port = rfc2217Port
        self.log = log
        process = Process()
        process.executableURL = executable
        // -n: foreground, -d: debug to stderr, -c: this config, -P: a pid file of its own (not /run),
        // -u: no UUCP lock files (a killed ser2net would leave one behind in /var/lock).
        process.arguments = ["-n", "-d", "-u", "-c", configuration.path, "-P", configuration.path + ".pid"]
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.runHoldingSpawnLock()
        do {
            try waitUntilListening(timeout: 10)
        } catch {
            stop()
            throw error
        }
    }

    /// Polls /proc/net/tcp until both ports are in LISTEN state (connecting would open the device).
    private func waitUntilListening(timeout: Double) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw E2EError("ser2net exited (status \(process.terminationStatus)) before listening: \(logText)")
            }
            let listening = Self.listeningPorts()
            if listening.contains(rawPort) && listening.contains(rfc2217Port) { return }
            usleep(20_000)
        }
        throw E2EError("ser2net did not listen on \(rawPort) and \(rfc2217Port) within \(timeout) s: \(logText)")
    }

    /// Waits (at most `timeout` seconds) until a client is connected to ser2net's `port`.
    func waitForClient(on port: Int, timeout: Double = 20) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if Self.ports(inState: "01").contains(port) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Loopback IPv4 ports in LISTEN state.
    static func listeningPorts() -> Set<Int> { ports(inState: "0A") }

    /// Local IPv4 ports of sockets in a /proc/net/tcp state (0A listen, 01 established).
    static func ports(inState state: Substring) -> Set<Int> {
        // Read to the end: String(contentsOfFile:) stops after the first page of a procfs file (seen: 4 KiB
        // of a 46 KiB table on a busy machine).
        guard let handle = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return [] }
        defer { try? handle.close() }
        let table = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        var ports = Set<Int>()
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 3, fields[3] == state else { continue }
            let local = fields[1].split(separator: ":")
            if local.count == 2, let port = Int(local[1], radix: 16) { ports.insert(port) }
        }
        return ports
    }

    /// What ser2net wrote.
    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    var isRunning: Bool { process.isRunning }

    /// Kills ser2net at once (a port server that vanishes).
    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// SIGTERM, then SIGKILL; waits (bounded) for the exit. Idempotent.
    func stop() {
        let first = stopped.withValue { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first, process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(3)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            let killDeadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < killDeadline { usleep(10_000) }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// A loopback TCP port nothing listens on right now (bound to port 0 and released).
    static func freeTCPPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw E2EError("socket() failed: errno \(errno)") }
        defer { close(fd) }
        guard let port = bindToLoopback(fd) else { throw E2EError("bind() to 127.0.0.1 failed: errno \(errno)") }
        return port
    }
}

/// The termios speed of a tty as `stty -F PATH speed` reports it.
func ttySpeed(_ path: String) async throws -> Int? {
    let result = try await ProcessRunner.run(URL(fileURLWithPath: "/bin/stty"), ["-F", path, "speed"], timeout: 10)
    return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
}
