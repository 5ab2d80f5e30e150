import Foundation
import TestSupport
import Testing

/// One real firmware build (unmodified Zephyr 4.4.0 / MCUboot from the shared firmware directory)
/// running under native_sim or QEMU, started and stopped through `Scripts/firmware-rig.sh`.
///
/// The firmware directory is `$SMP_FIRMWARE_DIR`, else `../shared/firmware` beside the repository;
/// the tests skip only when it is absent. Each rig stops itself when the test process exits, even
/// after a crash or SIGKILL (the script's owner watcher).
final class FirmwareRig: @unchecked Sendable {
    /// The builds the rig script knows (its BUILD argument).
    enum Build: String, Sendable, CustomStringConvertible {
        /// native_sim_serial.exe: console-framed SMP on a pty, 2 x 128 B line buffers, 4 x 384 B.
        case serial
        /// native_sim_serial_fs.exe: 512 B lines, 4 x 1024 B.
        case serialFS = "serial-fs"
        /// native_sim_udp.exe: UDP 127.0.0.1:1337, 2 x 2048 B.
        case udp
        /// QEMU mps2-an385: MCUboot serial recovery without an application.
        case mps2Recovery = "mps2-recovery"
        /// QEMU mps2-an385: MCUboot with its application loaded.
        case mps2
        /// QEMU microbit (Cortex-M0): MCUboot (swap) and the application, one merged hex.
        case m0

        var description: String { rawValue }
    }

    static let script = TestEnvironment.repositoryRoot.appendingPathComponent("Scripts/firmware-rig.sh")

    /// The firmware directory.
    static let directory: URL = {
        if let path = ProcessInfo.processInfo.environment["SMP_FIRMWARE_DIR"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return TestEnvironment.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/firmware")
            .standardizedFileURL
    }()

    static var isAvailable: Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    static let skipReason: Comment =
        "needs the real firmware builds: ../shared/firmware beside the repository, or set SMP_FIRMWARE_DIR"

    /// A file of the firmware directory by its name after the common prefix.
    static func file(_ suffix: String) -> URL {
        directory.appendingPathComponent("zephyr_4.4.0_smp_server_0eae053d_" + suffix)
    }

    let build: Build
    /// The rig's directory (device log, pty link, the device's working directory).
    let rigDirectory: String
    /// The `smp --device` URI.
    let device: String
    private let stopped = LockedBox(false)

    private init(build: Build, rigDirectory: String, device: String) {
        self.build = build
        self.rigDirectory = rigDirectory
        self.device = device
    }

    /// Starts `build` and waits until it answers an SMP echo. The UDP build waits for port 1337 while
    /// another process holds it (up to `$SMP_FIRMWARE_UDP_WAIT`, here 180 s by default).
    static func start(_ build: Build) async throws -> FirmwareRig {
        try TestEnvironment.requireBinaries()
        let output = try await runScript(["start", build.rawValue, "--owner", String(getpid())], timeout: 420)
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let space = line.firstIndex(of: " ") else { continue }
            values[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        guard let directory = values["dir"], let device = values["device"] else {
            throw E2EError("firmware-rig.sh start \(build) printed no device: \(output)")
        }
        return FirmwareRig(build: build, rigDirectory: directory, device: device)
    }

    /// Starts `build`, runs `body`, stops the rig in all paths.
    static func with<R>(_ build: Build, _ body: (FirmwareRig) async throws -> R) async throws -> R {
        let rig = try await start(build)
        defer { rig.stop() }
        return try await body(rig)
    }

    /// Runs `smp --device <rig> ARGS` with default options and a hard timeout: a hang fails the test.
    /// What smp learns about a serial link is cached per device path (`$XDG_CACHE_HOME/smp`); each rig
    /// has a cache of its own, as a fresh device would (ptys are reused by the next build), which the
    /// runs on that rig share, as a user's successive commands do.
    func smp(_ arguments: [String], timeout: Double) async throws -> ProcessResult {
        try await ProcessRunner.run(
            TestEnvironment.smp, ["--device", device] + arguments, timeout: timeout,
            environment: ["XDG_CACHE_HOME": rigDirectory + "/cache"])
    }

    func smp(_ arguments: String..., timeout: Double = 30) async throws -> ProcessResult {
        try await smp(arguments, timeout: timeout)
    }

    /// The last lines of the device's own log ("Insufficient buffers, fragment dropped", ...).
    func deviceLog(lines: Int = 15) -> String {
        let text = (try? String(contentsOfFile: rigDirectory + "/device.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Stops the device. Idempotent.
    func stop() {
        let first = stopped.withValue { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        _ = try? Self.runScriptBlocking(["stop", rigDirectory], timeout: 30)
    }

    deinit { stop() }

    private static func runScript(_ arguments: [String], timeout: Double) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do { continuation.resume(returning: try runScriptBlocking(arguments, timeout: timeout)) } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Runs the script with its output in files and waits by polling its pid, not through Foundation's
    /// exit monitoring: that uses a descriptor that a child another test spawns at the same moment can
    /// inherit, and then the exit is seen only when that child ends (see BLERig).
    private static func runScriptBlocking(_ arguments: [String], timeout: Double) throws -> String {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("fw-rig-\(UUID().uuidString)")
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
        process.arguments = [script.path] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["SMP_FIRMWARE_DIR"] = directory.path
        // Another process's native_sim_udp on port 1337 is waited for, but not for the script's default 300 s.
        if environment["SMP_FIRMWARE_UDP_WAIT"] == nil { environment["SMP_FIRMWARE_UDP_WAIT"] = "180" }
        process.environment = environment
        process.standardOutput = outHandle
        process.standardError = errHandle
        process.standardInput = FileHandle.nullDevice
        try process.runHoldingSpawnLock { try? outHandle.close() }
        try? errHandle.close()
        let pid = process.processIdentifier
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning(pid) {
            guard Date() < deadline else {
                kill(pid, SIGKILL)
                throw E2EError("firmware-rig.sh \(arguments.joined(separator: " ")) did not finish within \(Int(timeout)) s")
            }
            usleep(20_000)
        }
        let output = (try? String(contentsOf: outURL, encoding: .utf8)) ?? ""
        if arguments.first == "start", !output.contains("device ") {
            let errors = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
            throw E2EError("firmware-rig.sh \(arguments.joined(separator: " ")) failed: \(errors)")
        }
        return output
    }

    /// Whether `pid` still runs (a zombie has finished).
    private static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].drop { $0 == " " }.first != "Z"
    }
}

/// Reads an MCUboot image's few fields the real-firmware tests need, independently of the library under
/// test: header size, body size, version, and the SHA-256 hash TLV that `image list` reports.
struct SignedImageFile {
    let data: Data
    let headerSize: Int
    let bodySize: Int
    let version: String
    let hash: Data

    init(_ url: URL) throws {
        data = try Data(contentsOf: url)
        let bytes = [UInt8](data)
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard bytes.count >= 32, u32(0) == 0x96F3_B83D else { throw E2EError("\(url.path) is not an MCUboot image") }
        headerSize = u16(8)
        let protectedSize = u16(10)
        bodySize = u32(12)
        version = "\(bytes[20]).\(bytes[21]).\(u16(22))"
        // The unprotected TLV area (magic 0x6907) follows the body and the protected area.
        var offset = headerSize + bodySize + protectedSize
        guard offset + 4 <= bytes.count, u16(offset) == 0x6907 else { throw E2EError("\(url.path): no TLV area") }
        let end = offset + u16(offset + 2)
        offset += 4
        var found: Data?
        while offset + 4 <= end {
            let type = u16(offset)
            let length = u16(offset + 2)
            if type == 0x10 { found = data.subdata(in: (offset + 4)..<(offset + 4 + length)) }
            offset += 4 + length
        }
        guard let found else { throw E2EError("\(url.path): no SHA-256 TLV") }
        hash = found
    }

    /// The header and TLVs taken off: what `imgtool sign --pad-header` signs again.
    var body: Data { data.subdata(in: headerSize..<(headerSize + bodySize)) }
}
