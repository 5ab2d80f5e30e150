import Foundation
import Testing

/// A private D-Bus daemon (and, unless told otherwise, bluezoo: a BlueZ stand-in with adapters hci0,
/// hci1 and hci2) for one test suite, started and stopped through `Scripts/ble-rig.sh`.
///
/// Tests find the script through `SMP_TEST_BLE_RIG` (Scripts/test.sh sets it) and skip without it, so
/// a plain `swift test` still runs everything else. Each rig stops itself when the test process
/// exits, even after a crash.
public final class BLERig: @unchecked Sendable {
    /// The central's adapter (the client side) and its address.
    public static let centralAdapter = "hci0"
    public static let centralAddress = "00:00:5E:00:53:00"
    /// The peripheral's adapter (where `smp-sim --ble` serves) and its address.
    public static let peripheralAdapter = "hci1"
    public static let peripheralAddress = "00:00:5E:00:53:01"
    /// A second peripheral adapter and address: where `smp-sim --ble-loader-adapter` serves its firmware
    /// loader (a device that comes back as another peripheral).
    public static let loaderAdapter = "hci2"
    public static let loaderAddress = "00:00:5E:00:53:02"

    /// The rig script, when configured.
    public static var script: String? {
        guard let path = ProcessInfo.processInfo.environment["SMP_TEST_BLE_RIG"], !path.isEmpty,
            FileManager.default.isReadableFile(atPath: path)
        else { return nil }
        return path
    }

    public static var isAvailable: Bool { script != nil }

    public static let skipReason: Comment =
        "needs the BLE rig (private dbus-daemon + bluezoo): run Scripts/test.sh, or run Scripts/setup.sh and set SMP_TEST_BLE_RIG=Scripts/ble-rig.sh"

    /// The rig's directory (bus socket, logs).
    public let directory: String
    /// The bus address, for `DBUS_SYSTEM_BUS_ADDRESS`.
    public let address: String
    private let lock = NSLock()
    private var stopped = false

    private init(directory: String, address: String) {
        self.directory = directory
        self.address = address
    }

    /// Starts a fresh rig; with `bluez: false` only the bus.
    public static func start(bluez: Bool = true) throws -> BLERig {
        guard let script else { throw RigError("SMP_TEST_BLE_RIG is not set") }
        var arguments = [script, "start", "--owner", String(getpid())]
        if !bluez { arguments.append("--no-bluez") }
        let output = try runScript(arguments)
        var directory: String?
        var address: String?
        for line in output.split(separator: "\n") {
            if line.hasPrefix("dir ") { directory = String(line.dropFirst(4)) }
            if line.hasPrefix("address ") { address = String(line.dropFirst(8)) }
        }
        guard let directory, let address else { throw RigError("ble-rig.sh start printed no address: \(output)") }
        return BLERig(directory: directory, address: address)
    }

    /// Starts a rig, runs `body`, stops the rig.
    public static func with<R>(bluez: Bool = true, _ body: (BLERig) async throws -> R) async throws -> R {
        let rig = try start(bluez: bluez)
        defer { rig.stop() }
        return try await body(rig)
    }

    /// Environment for child processes that should use this rig as their system bus.
    public var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }

    /// bluezoo's log so far (for failure messages).
    public var bluezooLog: String {
        (try? String(contentsOfFile: directory + "/bluezoo.log", encoding: .utf8)) ?? ""
    }

    /// Stops the rig. Idempotent.
    public func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        guard first, let script = Self.script else { return }
        _ = try? Self.runScript([script, "stop", directory])
    }

    deinit { stop() }

    /// Runs the script with stdout and stderr in files, and waits for it by polling its pid rather
    /// than through Foundation's exit monitoring: that monitoring (a socket the child inherits) is
    /// also inherited by any other child spawned at the same moment, such as a simulator another test
    /// starts, and then reports the exit only when that one ends.
    private static func runScript(_ arguments: [String]) throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ble-rig-\(UUID().uuidString)")
        let outURL = base.appendingPathExtension("out")
        let errURL = base.appendingPathExtension("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        let outHandle = try FileHandle(forWritingTo: outURL)
        let errHandle = try FileHandle(forWritingTo: errURL)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = arguments
        process.standardOutput = outHandle
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.runHoldingSpawnLock { try? outHandle.close() }
        try? errHandle.close()
        let pid = process.processIdentifier
        let deadline = Date().addingTimeInterval(60)
        while isRunning(pid) {
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                throw RigError("\(arguments.joined(separator: " ")) did not finish within 60 s")
            }
            usleep(10_000)
        }
        let output = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        if arguments.count > 1, arguments[1] == "start", !output.contains("\naddress ") && !output.hasPrefix("address ") {
            let text = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
            throw RigError("\(arguments.joined(separator: " ")) failed: \(text)")
        }
        return output
    }

    /// Whether `pid` still runs (a zombie has finished).
    private static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let rest = stat[stat.index(after: close)...].drop { $0 == " " }
        return rest.first != "Z"
    }

    public struct RigError: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}
