import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `smp dfu` against MCUboot's serial recovery: the image goes to slot 0 without test or confirm, a
/// reset boots it, and the application must then run the uploaded hash.
@Suite(.serialized) struct SerialRecoveryDFUTests {
    @Test("smp-sim in serial recovery (reset with boot mode 1): dfu uploads to slot 0, resets, the app runs it", arguments: Link.allCases)
    func simulatorRecovery(_ link: Link) async throws {
        try await withDFUSimulator(link) { session in
            expectSuccess(try await session.smp("os", "reset", "--boot-mode", "1"))
            let inRecovery = try await session.imageList()  // retried while the device reboots
            #expect(!inRecovery.contains { $0.active }, "\(inRecovery)")
            let image = try DFUPackages.image(version: (2, 0, 0), seed: 41)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "dfu", package, "--swap-time", "0.2"], timeout: 120)
            expectSuccess(run)
            let result = try #require(dfuResult(run))
            #expect(result["serial_recovery"] as? Bool == true, "\(run)")
            // No test or confirm was tried, and nothing claims a resume.
            #expect(!run.stdout.contains("\"to\":\"test\"") && !run.stdout.contains("\"to\":\"confirm\""), "\(run)")
            let images = result["images"] as? [[String: Any]] ?? []
            #expect(images.allSatisfy { ($0["resumed_from"] as? Int ?? 0) == 0 }, "\(run)")
            let after = try await session.imageList()
            #expect(after.contains { $0.slot == 0 && $0.active && $0.hash == hex(image.hash) }, "\(after)")
        }
    }
}

/// MCUboot's raw (unencoded) serial recovery with its sector erases (issue 22): `smp dfu` with default options
/// must succeed although each chunk that reaches a new 4 KiB sector keeps the bootloader busy (376 ms by
/// default, as measured; 2.5 s outlasts even the erase floor, so copies are sent and answered as boot_serial.c
/// answers them).
@Suite(.serialized) struct RawSerialRecoveryEraseTests {
    @Test("smp dfu through raw framing into smp-sim's MCUboot recovery with sector erase delays: the app runs the upload", arguments: [nil, 2500] as [Int?])
    func rawRecoveryWithEraseDelays(eraseMilliseconds: Int?) async throws {
        let erase = eraseMilliseconds.map { ["--recovery-erase-time", "\($0)"] } ?? []
        try await withDFUSimulator(.serial, extraArguments: ["--like", "mps2_recovery", "--framing", "raw"] + erase) { session in
            let device = session.sim.serialURI + "?framing=raw"
            let image = try DFUPackages.image(version: (2, 0, 0), size: 20 * 1024, seed: 43)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await ProcessRunner.run(TestEnvironment.smp, ["--device", device, "--json", "dfu", package], timeout: 180)
            expectSuccess(run)
            let result = try #require(dfuResult(run))
            #expect(result["serial_recovery"] as? Bool == true, "\(run)")
            let list = expectSuccess(try await ProcessRunner.run(TestEnvironment.smp, ["--device", device, "--json", "image", "list"], timeout: 60))
            #expect(list.stdout.contains(hex(image.hash)) && list.stdout.contains("\"active\":true"), "\(list)")
        }
    }
}

/// The real MCUboot (mps2-an385 under QEMU) with no application: serial recovery, as the firmware README
/// describes. About 30 s (each request ~60 ms under QEMU).
@Suite(
    .serialized,
    .enabled(if: MCUbootRecoveryQEMU.available, "needs qemu-system-arm, socat and ../shared/firmware (or $SMP_FIRMWARE_DIR) with the mps2 build"))
struct RealSerialRecoveryDFUTests {
    @Test("MCUboot serial recovery under QEMU: smp dfu uploads the app to slot 0, resets, and the app runs its hash")
    func mcubootRecovery() async throws {
        let qemu = try MCUbootRecoveryQEMU()
        defer { qemu.stop() }
        try await qemu.waitUntilAnswering()
        let uri = "serial:\(qemu.tty)"
        let list = expectSuccess(try await runSMP(["--device", uri, "--json", "image", "list"], timeout: 60))
        #expect(list.stdout.contains("\"images\":[]"), "\(list)")
        let run = try await runSMP(["--device", uri, "--json", "dfu", MCUbootRecoveryQEMU.application.path], timeout: 300)
        expectSuccess(run)
        let result = try #require(dfuResult(run))
        #expect(result["serial_recovery"] as? Bool == true, "\(run)")
        let images = result["images"] as? [[String: Any]] ?? []
        #expect(images.allSatisfy { ($0["resumed_from"] as? Int ?? 0) == 0 }, "\(run)")
        let hash = (images.first?["hash"] as? String) ?? "?"
        let after = expectSuccess(try await runSMP(["--device", uri, "--json", "image", "list"], timeout: 60))
        #expect(after.stdout.contains(hash) && after.stdout.contains("\"active\":true"), "\(after)")
    }
}

/// The same real MCUboot and its Zephyr application, upgraded as `smp dfu --bootloader-mode single-app` does:
/// the application (which builds in CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE) resets into serial recovery with
/// boot mode 1, the image goes to slot 0 there, and a reset boots it. The build runs MCUboot in RAM-load
/// mode, not single-app, so its application still lists its images: the test reads them at the end.
/// QEMU is started with MCUboot alone (a loader for the application would write the old one back on every
/// reset); the application is installed through recovery first. About 30 s.
@Suite(
    .serialized,
    .enabled(if: MCUbootRecoveryQEMU.available && TestEnvironment.hasVenv, "needs qemu-system-arm, socat, the mps2 build and the venv's imgtool"))
struct RealSingleApplicationDFUTests {
    @Test("the real Zephyr application resets into MCUboot serial recovery (boot mode 1); dfu uploads slot 0 there and the app runs the new hash")
    func applicationIntoRecovery() async throws {
        let qemu = try MCUbootRecoveryQEMU()
        defer { qemu.stop() }
        try await qemu.waitUntilAnswering()
        let uri = "serial:\(qemu.tty)"
        // Install the shipped application through recovery (the device starts with none). Told single-app, smp
        // sees recovery's list (no active slot) and uploads without a reset: MCUboot ignores boot_mode, so a
        // reset from recovery would not stay there.
        let install = try await runSMP(
            ["--device", uri, "--json", "dfu", MCUbootRecoveryQEMU.application.path, "--bootloader-mode", "single-app"], timeout: 300)
        expectSuccess(install)
        let installed = try #require(dfuResult(install))
        #expect((installed["notes"] as? [String])?.contains { $0.contains("already answers from MCUboot's serial recovery") } == true, "\(installed)")
        #expect(!dfuEvents(install).contains { ($0["message"] as? String)?.contains("boot mode 1") == true }, "no reset into recovery")
        // A new version of the same application: its payload signed again by imgtool (hash TLV only).
        let signed = try Data(contentsOf: MCUbootRecoveryQEMU.application)
        let headerSize = Int(signed[8]) | Int(signed[9]) << 8
        let imageSize = Int(signed[12]) | Int(signed[13]) << 8 | Int(signed[14]) << 16 | Int(signed[15]) << 24
        let loadAddress = Int(signed[4]) | Int(signed[5]) << 8 | Int(signed[6]) << 16 | Int(signed[7]) << 24
        let payload = qemu.directory.appendingPathComponent("payload.bin")
        let upgrade = qemu.directory.appendingPathComponent("app-2.0.0.bin")
        try signed[headerSize..<(headerSize + imageSize)].write(to: payload)
        let sign = try await ProcessRunner.run(
            TestEnvironment.venvTool("imgtool"),
            ["sign", "--header-size", "0x\(String(headerSize, radix: 16))", "--pad-header", "--align", "4", "--version", "2.0.0",
             "--load-addr", "0x\(String(loadAddress, radix: 16))", "--slot-size", "0x40000", payload.path, upgrade.path],
            timeout: 60)
        expectSuccess(sign)

        let run = try await runSMP(
            ["--device", uri, "--json", "dfu", upgrade.path, "--bootloader-mode", "single-app", "--reconnect-timeout", "30"], timeout: 300)
        expectSuccess(run)
        let result = try #require(dfuResult(run))
        #expect(result["serial_recovery"] as? Bool == true, "\(run)")
        #expect((result["uploaded"] as? [Any])?.count == 1, "\(result)")
        let logs = dfuEvents(run).compactMap { $0["message"] as? String }
        #expect(logs.contains { $0.contains("into MCUboot's serial recovery (boot mode 1)") }, "\(logs)")
        let hash = ((result["images"] as? [[String: Any]])?.first?["hash"] as? String) ?? "?"
        #expect((result["verified"] as? String)?.contains("shows the uploaded hash running") == true, "\(result)")
        let after = expectSuccess(try await runSMP(["--device", uri, "--json", "image", "list"], timeout: 60))
        #expect(after.stdout.contains(hash) && after.stdout.contains("\"active\":true") && after.stdout.contains("2.0.0"), "\(after)")
    }
}

/// QEMU's mps2-an385 with MCUboot alone, its UART bridged to a pty link by socat.
final class MCUbootRecoveryQEMU: @unchecked Sendable {
    static let prefix = "zephyr_4.4.0_smp_server_0eae053d_mps2_an385_serial_recovery_buf1024"
    static var firmwareDirectory: URL {
        ProcessInfo.processInfo.environment["SMP_FIRMWARE_DIR"].map { URL(fileURLWithPath: $0) }
            ?? TestEnvironment.repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/firmware")
    }
    static var bootloader: URL { firmwareDirectory.appendingPathComponent(prefix + ".hex") }
    static var application: URL { firmwareDirectory.appendingPathComponent(prefix + ".signed.bin") }
    static func tool(_ name: String) -> URL? {
        ["/usr/bin", "/usr/local/bin"].map { URL(fileURLWithPath: $0).appendingPathComponent(name) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
    static var available: Bool {
        tool("qemu-system-arm") != nil && tool("socat") != nil
            && FileManager.default.fileExists(atPath: bootloader.path)
            && FileManager.default.fileExists(atPath: application.path)
    }

    let directory: URL
    let tty: String
    private let qemu = Process()
    private let socat = Process()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("mcuboot-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        tty = directory.appendingPathComponent("tty").path
        let port = try Self.freePort()
        qemu.executableURL = Self.tool("qemu-system-arm")
        qemu.arguments = [
            "-cpu", "cortex-m3", "-machine", "mps2-an385", "-nographic",
            "-chardev", "socket,id=con,host=127.0.0.1,port=\(port),server=on,wait=off",
            "-serial", "chardev:con", "-serial", "null", "-monitor", "none",
            "-device", "loader,file=\(Self.bootloader.path)",
        ]
        qemu.standardOutput = FileHandle.nullDevice
        qemu.standardError = FileHandle.nullDevice
        qemu.standardInput = FileHandle.nullDevice
        try qemu.runHoldingSpawnLock()
        // socat connects once QEMU listens (deadlines, not counts of tries: QEMU under TCG starts slowly
        // on a loaded machine).
        let deadline = Date().addingTimeInterval(60)
        while !Self.listening(port) && qemu.isRunning && Date() < deadline { usleep(20_000) }
        if Self.listening(port) {
            socat.executableURL = Self.tool("socat")
            socat.arguments = ["pty,link=\(tty),raw,echo=0", "tcp:127.0.0.1:\(port)"]
            socat.standardOutput = FileHandle.nullDevice
            socat.standardError = FileHandle.nullDevice
            try socat.runHoldingSpawnLock()
            while !FileManager.default.fileExists(atPath: tty) && socat.isRunning && Date() < deadline { usleep(20_000) }
        }
        guard FileManager.default.fileExists(atPath: tty) else {
            stop()
            throw E2EError("QEMU's UART did not come up on 127.0.0.1:\(port)")
        }
    }

    /// Waits until MCUboot answers an SMP request on the pty, as Scripts/firmware-rig.sh does (its
    /// probe: one echo, any answer counts; serial recovery answers it with ENOTSUP).
    func waitUntilAnswering(within limit: Double = 60) async throws {
        let probe = TestEnvironment.repositoryRoot.appendingPathComponent("Scripts/firmware_probe.py")
        let deadline = Date().addingTimeInterval(limit)
        while qemu.isRunning && socat.isRunning && Date() < deadline {
            let answer = try await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/python3"), [probe.path, "--serial", tty, "--timeout", "1"], timeout: 20)
            if answer.status == 0 { return }
        }
        throw E2EError("MCUboot under QEMU did not answer on \(tty) within \(Int(limit)) s")
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        guard let port = bindToLoopback(fd) else { throw E2EError("cannot bind a loopback port: errno \(errno)") }
        return port
    }

    static func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        // A probe connection would take QEMU's only client slot: only check the port is bound.
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } != 0
    }

    func stop() {
        // SIGKILL: children of the test runner inherit its blocked signal mask (SIGTERM included).
        for process in [socat, qemu] where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}
