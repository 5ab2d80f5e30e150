import Foundation
import Testing

/// One `smp-sim --count N` serving N independent devices: each on its own port or pty, each with its own
/// state.
@Suite("smp-sim --count: many devices from one process", .serialized, .timeLimit(.minutes(10)))
struct MultiDeviceSimTests {
    @Test("--count 3 --udp 127.0.0.1:0: three ports, three devices whose files and images stay apart")
    func udpDevicesAreSeparate() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--count", "3", "--udp", "127.0.0.1:0"])
        defer { sim.stop() }
        let devices = sim.udpURIs
        #expect(devices.count == 3, "\(sim.udpEndpoints)")
        #expect(Set(sim.udpEndpoints.map(\.port)).count == 3, "three different ports: \(sim.udpEndpoints)")
        guard devices.count == 3 else { return }

        func smp(_ device: Int, _ arguments: [String], timeout: Double = 60) async throws -> ProcessResult {
            try await ProcessRunner.run(TestEnvironment.smp, ["--device", devices[device]] + arguments, timeout: timeout)
        }
        for device in 0..<3 {
            let echo = expectSuccess(try await smp(device, ["os", "echo", "device \(device)"]))
            #expect(echo.stdout.contains("device \(device)"), "\(echo)")
        }

        // A file uploaded to device 1 is on device 1 only.
        let local = directory.path("file.bin")
        try randomBytes(3000).write(to: URL(fileURLWithPath: local))
        expectSuccess(try await smp(1, ["fs", "upload", local, "/lfs1/only-on-1.bin"]))
        let stat = expectSuccess(try await smp(1, ["fs", "stat", "/lfs1/only-on-1.bin"]))
        #expect(stat.stdout.contains("3000"), "\(stat)")
        for device in [0, 2] {
            expectStatus(try await smp(device, ["fs", "stat", "/lfs1/only-on-1.bin"]), SMPExit.device)
        }

        // An image uploaded to device 2 lies in device 2's secondary slot only.
        guard TestEnvironment.hasVenv else { return }
        let image = try await makeMCUbootImage(in: directory, version: "2.0.0", bodySize: 8 * 1024)
        expectSuccess(try await smp(2, ["image", "upload", image.path], timeout: 120))
        for device in 0..<3 {
            let list = expectSuccess(try await smp(device, ["--json", "image", "list"]))
            let slots = (jsonObject(list)?["images"] as? [[String: Any]]) ?? []
            let versions = slots.compactMap { $0["version"] as? String }
            #expect(versions == (device == 2 ? ["1.0.0", "2.0.0"] : ["1.0.0"]), "device \(device): \(list)")
        }
    }

    @Test("--count 2 --pty-link DIR/tty-%d: a pty per device at the index's link, each answering")
    func ptyLinks() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--count", "2", "--pty-link", directory.path("tty-%d")])
        defer { sim.stop() }
        #expect(sim.ptyPaths == [directory.path("tty-0"), directory.path("tty-1")], "\(sim.ptyPaths)")
        for device in 0..<2 {
            let result = expectSuccess(
                try await ProcessRunner.run(
                    TestEnvironment.smp, ["--device", "serial:" + directory.path("tty-\(device)"), "os", "echo", "pty \(device)"],
                    timeout: 60))
            #expect(result.stdout.contains("pty \(device)"), "\(result)")
        }
        // Without %d the index follows a dash.
        let plain = try await SimProcess.start(["--count", "2", "--pty-link", directory.path("link")])
        defer { plain.stop() }
        #expect(plain.ptyPaths == [directory.path("link-0"), directory.path("link-1")], "\(plain.ptyPaths)")
    }

    @Test("--count with --ble, or out of range, is a usage error that says what to do")
    func usageErrors() async throws {
        try TestEnvironment.requireBinaries()
        let ble = try await ProcessRunner.run(TestEnvironment.smpSim, ["--count", "2", "--ble", "hci1"], timeout: 30)
        #expect(ble.status == 64, "\(ble)")
        #expect(ble.stderr.contains("--ble serves one device"), "\(ble)")
        let zero = try await ProcessRunner.run(TestEnvironment.smpSim, ["--count", "0", "--udp", "127.0.0.1:0"], timeout: 30)
        #expect(zero.status == 64 && zero.stderr.contains("--count must be"), "\(zero)")
        let ports = try await ProcessRunner.run(TestEnvironment.smpSim, ["--count", "10", "--udp", "127.0.0.1:65530"], timeout: 30)
        #expect(ports.status == 64 && ports.stderr.contains("port 0"), "\(ports)")
    }
}
