import Foundation
import Testing

/// The shared Zephyr builds (../shared/firmware beside the repository, as on the development machines).
enum SharedFirmware {
    static let directory = TestEnvironment.repositoryRoot.appendingPathComponent("../shared/firmware").standardized
    static let udpBuild = "zephyr_4.4.0_smp_server_0eae053d_native_sim_udp.exe"
    static var hasUDPBuild: Bool {
        FileManager.default.isExecutableFile(atPath: directory.appendingPathComponent(udpBuild).path)
    }
    static var missingReason: String {
        "needs the shared Zephyr builds at \(directory.path) (\(udpBuild)); skipped where they are absent"
    }

    /// The QEMU builds (mps2_an385 MCUboot + app, qemu_cortex_m0 merged image) and the tools to run them.
    static let qemuBuilds = [
        "zephyr_4.4.0_smp_server_0eae053d_mps2_an385_serial_recovery_buf1024.hex",
        "zephyr_4.4.0_smp_server_0eae053d_mps2_an385_serial_recovery_buf1024.signed.bin",
        "zephyr_4.4.0_smp_server_0eae053d_qemu_cortex_m0_serial.merged.hex",
        "zephyr_4.4.0_smp_server_0eae053d_qemu_cortex_m0_serial.signed.bin",
    ]
    static var missingForQEMU: [String] {
        let files = qemuBuilds.filter {
            !FileManager.default.fileExists(atPath: directory.appendingPathComponent($0).path)
        }
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        let tools = ["qemu-system-arm", "socat"].filter { tool in
            !path.contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }
        }
        return files.map { "\(directory.path)/\($0)" } + tools
    }
    static var qemuMissingReason: String {
        "needs \(missingForQEMU.joined(separator: ", ")) (apt-get install qemu-system-arm socat; the shared "
            + "firmware beside the repository); skipped where they are absent"
    }
}

/// smp-sim against the real firmware (issue 11.2): `Scripts/conformance.py` sends the same requests over
/// UDP to the shared Zephyr 4.4.0 build native_sim_udp.exe and to `smp-sim --like native_sim_udp` and
/// compares the answers field by field (its ALLOWED list names accepted differences with the reason).
@Suite(
    "Conformance with the real firmware", .serialized,
    .enabled(if: TestEnvironment.hasVenv, Comment(rawValue: TestEnvironment.venvMissingReason)),
    .enabled(if: SharedFirmware.hasUDPBuild, Comment(rawValue: SharedFirmware.missingReason)))
struct ConformanceTests {
    @Test func udpAnswersMatchNativeSimUDP() async throws {
        try TestEnvironment.requireBinaries()
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("Scripts/conformance.py").path
        let result = try await ProcessRunner.run(
            TestEnvironment.venvTool("python"),
            [script, "--sim", TestEnvironment.smpSim.path, "--firmware", SharedFirmware.directory.path],
            timeout: 240)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(" 0 differences"), "\(result)")
    }

    /// `Scripts/conformance_serial.py`: requests and line-buffer probes (longest line, too long a line,
    /// frames and lines back to back, packets at buf_size - 4) against each serial build and
    /// `smp-sim --like` it over a pty.
    @Test(arguments: ["native_sim_serial", "native_sim_serial_fs"])
    func serialAnswersAndLineBuffersMatch(build: String) async throws {
        try TestEnvironment.requireBinaries()
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("Scripts/conformance_serial.py").path
        let result = try await ProcessRunner.run(
            TestEnvironment.venvTool("python"),
            [script, "--sim", TestEnvironment.smpSim.path, "--build", build, "--firmware", SharedFirmware.directory.path],
            timeout: 240)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(" 0 differences"), "\(result)")
    }

    /// `Scripts/conformance_qemu.py`: each QEMU build (started once, under qemu-system-arm with socat) and
    /// `smp-sim --like` it: every command of every group the build has, good and bad arguments, upload first
    /// chunks, bad offsets, too large and wrong-slot uploads, state writes with bad hashes, unknown groups and
    /// commands, v1/v2/bad headers, line-buffer probes; MCUboot serial recovery for `mps2_recovery`; the
    /// qemu_cortex_m0 test / swap / confirm cycle. About 20 s each, 60 s for qemu_cortex_m0. One build at a
    /// time: on 2 cores, three guests under TCG at once (beside the real-BlueZ guests in the project's test
    /// command) gain nothing and each answers seconds late.
    @Test(
        .enabled(if: SharedFirmware.missingForQEMU.isEmpty, Comment(rawValue: SharedFirmware.qemuMissingReason)),
        .serialized, arguments: ["mps2_recovery", "mps2_app", "qemu_cortex_m0"])
    func qemuAnswersMatch(build: String) async throws {
        try TestEnvironment.requireBinaries()
        let script = TestEnvironment.repositoryRoot.appendingPathComponent("Scripts/conformance_qemu.py").path
        let result = try await ProcessRunner.run(
            TestEnvironment.venvTool("python"),
            [script, "--sim", TestEnvironment.smpSim.path, "--build", build, "--firmware", SharedFirmware.directory.path],
            timeout: 480)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(" 0 differences"), "\(result)")
    }
}
