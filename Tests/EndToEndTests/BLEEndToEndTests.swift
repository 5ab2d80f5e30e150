import Foundation
import TestSupport
import Testing

/// `smp --device ble:...` against `smp-sim --ble hci1` through a private D-Bus with bluezoo (a fresh
/// bus and bluezoo per test: bluezoo keeps stale device and GATT objects across connections).
@Suite("smp over Bluetooth LE (smp-sim --ble, bluezoo)", .enabled(if: BLERig.isAvailable, BLERig.skipReason), .serialized)
struct BLEEndToEndTests {
    static let device = "ble:\(BLERig.peripheralAddress)"

    /// A rig, `smp-sim --ble hci1 EXTRA`, and `smp` pointed at both.
    struct Session {
        let rig: BLERig
        let sim: SimProcess
        let directory: TemporaryDirectory

        func smp(_ arguments: [String], device: String = BLEEndToEndTests.device, timeout: Double = 90) async throws -> ProcessResult {
            try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", device] + arguments, timeout: timeout, environment: rig.environment)
        }
    }

    /// - Parameter simEnvironment: added to smp-sim's environment (e.g. `SMP_SIM_DEBUG=1`: its peripheral
    ///   logs every write it takes on stderr).
    func withBLESimulator<R>(
        _ extra: [String] = [], simEnvironment: [String: String] = [:], _ body: (Session) async throws -> R
    ) async throws -> R {
        let rig = try BLERig.start()
        defer { rig.stop() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(
            ["--ble", BLERig.peripheralAdapter] + extra, environment: rig.environment.merging(simEnvironment) { _, new in new })
        defer { sim.stop() }
        #expect(sim.bleAddress == BLERig.peripheralAddress)
        return try await body(Session(rig: rig, sim: sim, directory: directory))
    }

    @Test func echoAndImageList() async throws {
        try await withBLESimulator { session in
            let echo = try await session.smp(["os", "echo", "hello over BLE"])
            expectSuccess(echo)
            #expect(echo.stdout == "hello over BLE\n")
            let list = try await session.smp(["--json", "image", "list"])
            expectSuccess(list)
            let images = jsonObject(list)?["images"] as? [[String: Any]]
            #expect(images?.first?["active"] as? Bool == true)
            #expect(images?.first?["version"] as? String == "1.0.0")
        }
    }

    struct Link: Sendable, CustomTestStringConvertible {
        var simArguments: [String]
        var uriOptions: String
        var testDescription: String { (simArguments + [uriOptions]).joined(separator: " ") }
    }

    @Test(arguments: [
        Link(simArguments: ["--ble-mtu", "247"], uriOptions: ""),
        Link(simArguments: ["--ble-mtu", "185", "--ble-no-acquire"], uriOptions: ""),
        Link(simArguments: ["--ble-mtu", "498"], uriOptions: "?acquire=off"),
    ])
    func fileUploadAndDownloadRoundTrip(_ link: Link) async throws {
        try await withBLESimulator(link.simArguments) { session in
            let payload = randomBytes(256 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let device = BLEEndToEndTests.device + link.uriOptions
            let upload = try await session.smp(["--json", "fs", "upload", local, "/lfs1/payload.bin"], device: device)
            expectSuccess(upload)
            let back = session.directory.path("back.bin")
            let download = try await session.smp(["fs", "download", "/lfs1/payload.bin", back], device: device)
            expectSuccess(download)
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    /// The requests the device receives: the connection asks `os params` once (the buffers size the
    /// writes), and the transfers on that connection go by its answer without asking again. A download
    /// keeps `buf_count - 1` requests in flight.
    @Test func transfersUseTheBuffersTheConnectionLearned() async throws {
        let log = try TemporaryDirectory()
        defer { log.remove() }
        let requests = log.path("requests.log")
        try await withBLESimulator(["--buf-size", "2475", "--buf-count", "4", "--fs-blocks", "0", "--request-log", requests]) { session in
            func take() throws -> [String] {
                let lines = try String(contentsOfFile: requests, encoding: .utf8).split(separator: "\n").map(String.init)
                guard truncate(requests, 0) == 0 else { throw E2EError("cannot empty \(requests)") }
                return lines
            }
            // A cache of this test's own: other suites' devices have the same address (and other buffers).
            func smp(_ arguments: [String]) async throws -> ProcessResult {
                try await ProcessRunner.run(
                    TestEnvironment.smp, ["--device", BLEEndToEndTests.device] + arguments, timeout: 90,
                    environment: session.rig.environment.merging(["XDG_CACHE_HOME": log.path("cache")]) { _, new in new })
            }
            let payload = randomBytes(40 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await smp(["fs", "upload", local, "/lfs1/p.bin"]))
            let upload = try take()
            #expect(upload.filter { $0 == "read 0/6" }.count == 1, "\(upload)")
            let back = session.directory.path("back.bin")
            let download = try await smp(["-v", "fs", "download", "/lfs1/p.bin", back])
            expectSuccess(download)
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
            let downloadRequests = try take()
            #expect(downloadRequests.filter { $0 == "read 0/6" }.count == 1, "\(downloadRequests)")
            #expect(downloadRequests.filter { $0 != "read 0/6" && $0 != "read 8/0" } == ["read 8/2"], "\(downloadRequests)")
            // Three requests went out before the first of them was answered.
            let lines = download.stderr.split(separator: "\n")
            var outstanding = 0
            var most = 0
            for line in lines where line.contains("fs(8) cmd 0 ") {
                if line.contains("-> read ") { outstanding += 1 } else if line.contains("<- read-response") { outstanding -= 1 }
                most = max(most, outstanding)
            }
            #expect(most == 3, "\(download.stderr.suffix(2000))")
        }
    }

    @Test(arguments: ["", "?acquire=off"])
    func firmwareUpgradeTestAndConfirmAcrossTheReset(_ options: String) async throws {
        try await withBLESimulator { session in
            let (image, hash) = try DFUPackages.image(version: (2, 1, 0), size: 48 * 1024, seed: 42)
            let path = try DFUPackages.write(image, "app.bin", in: session.directory)
            let run = try await session.smp(
                ["--json", "dfu", path, "--mode", "test-and-confirm"], device: BLEEndToEndTests.device + options, timeout: 120)
            expectSuccess(run)
            let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
            #expect(states.contains("reset"), "\(states)")
            #expect(states.contains("confirm"), "\(states)")
            #expect(dfuResult(run) != nil)
            // The new image runs, confirmed, after the reset and the reconnection over BLE.
            let list = try await session.smp(["--json", "image", "list"], device: BLEEndToEndTests.device + options)
            expectSuccess(list)
            let slots = jsonObject(list)?["images"] as? [[String: Any]] ?? []
            let active = slots.first { $0["active"] as? Bool == true }
            #expect(active?["hash"] as? String == hex(hash))
            #expect(active?["version"] as? String == "2.1.0")
            #expect(active?["confirmed"] as? Bool == true)
        }
    }

    /// Firmware-loader mode over BLE: the application stores the loader's name, resets into the loader, which
    /// comes back advertising that name (bluezoo: at the same address, one adapter being one address), the
    /// image goes up to the loader found by name, and after the reset the application is found again under
    /// its own address and runs the new image.
    /// - Parameter device: the application by address, or by name (found again by name once it advertises
    ///   its own name after the loader's).
    @Test(arguments: [BLEEndToEndTests.device, "ble:name=smp-sim"])
    func firmwareLoaderIsFoundByTheNameItWasGiven(_ device: String) async throws {
        try await withBLESimulator(["--bootloader-mode", "firmware-loader", "--swap-time", "0.2"]) { session in
            let (image, hash) = try DFUPackages.image(version: (4, 0, 0), size: 24 * 1024, seed: 11)
            let path = try DFUPackages.write(image, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "-v", "dfu", path, "--loader-name", "FL_BLE01"], device: device, timeout: 150)
            expectSuccess(run)
            #expect(jsonInt(dfuResult(run)?["bootloader_mode"]) == 7)
            let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
            #expect(states.contains("resetIntoFirmwareLoader"), "\(states)")
            #expect(run.stderr.contains("looking for the firmware loader (\"FL_BLE01\") as ble:name=FL_BLE01"), "\(run.stderr)")
            // The loader has buffers of its own (1220 B as Nordic's fw_loader sample) and no echo: its answer rc 8 to
            // the split echo probe still shows that it reassembles, so the image goes up in packets of its buffer.
            #expect(run.stderr.contains("BLE device \"FL_BLE01\" (00:00:5E:00:53:01, 0 dBm): buffers 4 x 1220 B, reassembles (asked)"), "\(run.stderr)")
            // The simulator advertised the loader's name, then the application's again.
            #expect(await session.sim.waitForLine(timeout: 30) { $0.contains("advertising FL_BLE01 (firmware loader)") } != nil)
            #expect(await session.sim.waitForLine(timeout: 30) { $0.contains("advertising smp-sim") } != nil)
            let list = try await session.smp(["--json", "image", "list"], device: device)
            expectSuccess(list)
            let slots = jsonObject(list)?["images"] as? [[String: Any]] ?? []
            let active = slots.first { $0["active"] as? Bool == true }
            #expect(active?["hash"] as? String == hex(hash), "\(slots)")
            #expect(active?["version"] as? String == "4.0.0")
        }
    }

    /// The firmware loader with a Bluetooth identity of its own (`--ble-loader-adapter hci2`): it comes back as
    /// another peripheral, at another address, and is found by the name the application stored; the
    /// application is found again at its own address afterwards.
    @Test func firmwareLoaderAtAnotherAddressIsFoundByName() async throws {
        try await withBLESimulator(
            ["--bootloader-mode", "firmware-loader", "--swap-time", "0.2", "--ble-loader-adapter", BLERig.loaderAdapter]
        ) { session in
            let (image, hash) = try DFUPackages.image(version: (4, 1, 0), size: 24 * 1024, seed: 12)
            let path = try DFUPackages.write(image, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "-v", "dfu", path, "--loader-name", "FL_BLE02"], timeout: 150)
            expectSuccess(run)
            #expect(jsonInt(dfuResult(run)?["bootloader_mode"]) == 7)
            #expect(await session.sim.waitForLine(timeout: 30) {
                $0.contains("ble \(BLERig.loaderAdapter) \(BLERig.loaderAddress) advertising FL_BLE02 (firmware loader)")
            } != nil)
            // The loader was reached at its own address, the application at the original one.
            #expect(run.stderr.contains("BLE link ble:name=FL_BLE02: \"FL_BLE02\" (\(BLERig.loaderAddress)"), "\(run.stderr)")
            let list = try await session.smp(["--json", "image", "list"])
            expectSuccess(list)
            let slots = jsonObject(list)?["images"] as? [[String: Any]] ?? []
            let active = slots.first { $0["active"] as? Bool == true }
            #expect(active?["hash"] as? String == hex(hash), "\(slots)")
        }
    }

    /// A firmware loader that comes up later than one scan lasts (`--boot-time 5`, scans of 2 s from the
    /// URI's `timeout`): smp looks for it again until the reconnect timeout. Before, the loader was looked
    /// for once, by the upload's first request, and the upgrade failed after that one scan (seen on real
    /// BlueZ, where BlueZ missed the loader's first advertisement now and then).
    @Test func aFirmwareLoaderSlowerThanOneScanIsLookedForUntilTheReconnectTimeout() async throws {
        try await withBLESimulator(
            ["--bootloader-mode", "firmware-loader", "--boot-time", "5", "--ble-loader-adapter", BLERig.loaderAdapter]
        ) { session in
            let (image, hash) = try DFUPackages.image(version: (4, 2, 0), size: 16 * 1024, seed: 13)
            let path = try DFUPackages.write(image, "app.bin", in: session.directory)
            let run = try await session.smp(
                ["--json", "-v", "dfu", path, "--loader-name", "FL_BLE03"], device: BLEEndToEndTests.device + "?timeout=2", timeout: 150)
            expectSuccess(run)
            #expect(run.stderr.contains("found the firmware loader (\"FL_BLE03\") at"), "\(run.stderr)")
            #expect((run.stdout + run.stderr).contains("no Bluetooth LE device name=FL_BLE03 found"), "the first scans missed it: \(run.stdout)")
            let list = try await session.smp(["--json", "image", "list"])
            expectSuccess(list)
            let active = (jsonObject(list)?["images"] as? [[String: Any]] ?? []).first { $0["active"] as? Bool == true }
            #expect(active?["hash"] as? String == hex(hash), "\(list)")
        }
    }

    @Test func clientsUsingSocketsAndDBusTakeTurns() async throws {
        // Each smp run connects afresh; the two ways to write and be notified must not disturb each other.
        try await withBLESimulator { session in
            for (index, options) in ["", "?acquire=off", "", "?acquire=off", "?acquire=off", ""].enumerated() {
                let echo = try await session.smp(["--timeout", "5", "os", "echo", "turn \(index)"], device: BLEEndToEndTests.device + options)
                expectSuccess(echo)
                #expect(echo.stdout == "turn \(index)\n")
            }
        }
    }

    @Test func scanListsTheSimulatorWithNameAndRSSI() async throws {
        try await withBLESimulator(["--ble-name", "bench board"]) { session in
            let scan = try await ProcessRunner.run(
                TestEnvironment.smp, ["ble", "scan", "--timeout", "2", "--json"], timeout: 30, environment: session.rig.environment)
            expectSuccess(scan)
            let devices = jsonObject(scan)?["devices"] as? [[String: Any]]
            let sim = devices?.first { $0["address"] as? String == BLERig.peripheralAddress }
            #expect(sim?["name"] as? String == "bench board")
            #expect(sim?["rssi"] != nil && !(sim?["rssi"] is NSNull))
            #expect(sim?["uri"] as? String == BLEEndToEndTests.device)
            let human = try await ProcessRunner.run(
                TestEnvironment.smp, ["ble", "scan", "--timeout", "1"], timeout: 30, environment: session.rig.environment)
            expectSuccess(human)
            #expect(human.stdout.contains("\(BLERig.peripheralAddress)"))
            #expect(human.stdout.contains("bench board"))
            // And the name works as a device.
            let byName = try await session.smp(["os", "echo", "by name"], device: "ble:name=bench%20board")
            expectSuccess(byName)
            #expect(byName.stdout == "by name\n")
        }
    }

    /// `smp ble forget` on a device BlueZ knows without a bond (any discovery re-creates its record): the
    /// record goes, but nothing was forgotten, and the exit status says so; then the device is not known.
    @Test func forgettingADeviceWithoutABondSaysSoAndExits1() async throws {
        try await withBLESimulator { session in
            expectSuccess(try await session.smp(["os", "echo", "known now"]))
            let forget = try await ProcessRunner.run(
                TestEnvironment.smp, ["ble", "forget", BLERig.peripheralAddress, "--adapter", BLERig.centralAdapter], timeout: 30,
                environment: session.rig.environment)
            #expect(forget.status == 1, "\(forget)")
            #expect(forget.stdout.contains("was not paired with this adapter"), "\(forget)")
            #expect(!forget.stdout.contains("its bond"), "\(forget)")
            let again = try await ProcessRunner.run(
                TestEnvironment.smp, ["ble", "forget", BLERig.peripheralAddress, "--adapter", BLERig.centralAdapter, "--json"],
                timeout: 30, environment: session.rig.environment)
            #expect(again.status == 1, "\(again)")
            #expect(jsonObject(again)?["removed"] as? Bool == false, "\(again)")
            #expect(jsonObject(again)?["bond"] as? Bool == false, "\(again)")
        }
    }

    @Test func resetThenTheNextCommandReconnects() async throws {
        try await withBLESimulator { session in
            expectSuccess(try await session.smp(["os", "reset"]))
            // No pause: the next connection retries while the device reboots (the URI's timeout).
            let echo = try await session.smp(["os", "echo", "back again"])
            expectSuccess(echo)
            #expect(echo.stdout == "back again\n")
        }
    }

    @Test func linkLostMidRequestFailsAtOnce() async throws {
        // The device would answer only after 60 s; it vanishes once it has taken the request (its log
        // shows the write), so the request is in flight however slow the machine is.
        try await withBLESimulator(["--latency", "60000"], simEnvironment: ["SMP_SIM_DEBUG": "1"]) { session in
            async let result = session.smp(["--timeout", "120", "os", "echo", "never answered"], timeout: 240)
            let taken = await waitUntil { session.sim.stderrText.contains("write of ") }
            #expect(taken, "smp-sim never took the request: \(session.sim.stderrText.suffix(2000))")
            let killed = Date()
            session.sim.kill9()
            let finished = try await result
            // Failed with the link (a timeout would exit 75 and say so), and long before the 120 s timeout.
            expectStatus(finished, SMPExit.transport)
            #expect(finished.stderr.contains("lost"), "\(finished)")
            #expect(Date().timeIntervalSince(killed) < 60, "the request must fail with the link, not time out")
        }
    }

    @Test func aDeviceThatStopsAnsweringIsExplainedForBluetooth() async throws {
        // A device that answers the connection's `os params` and then nothing: the link is up and the
        // writes go through, and nothing comes back on the SMP characteristic. (A device silent from the
        // start gets a second connection first, after smp removed it from BlueZ in case BlueZ held the
        // services of earlier firmware: RealBlueZTests. bluezoo does not resolve the services of a
        // device it removed and found again.) reassembly=off: no reassembly probe, which would take the
        // one answer.
        try await withBLESimulator(["--faults", "silent-after=1"]) { session in
            let result = try await session.smp(
                ["--timeout", "2", "os", "echo", "lost"], device: BLEEndToEndTests.device + "?reassembly=off")
            expectStatus(result, SMPExit.timeout)
            #expect(result.stderr.contains("did not answer"), "\(result)")
            #expect(result.stderr.contains("no notification came back on the SMP characteristic"), "\(result)")
            #expect(result.stderr.contains("`smp ble forget \(BLERig.peripheralAddress)`"), "\(result)")
            #expect(!result.stderr.contains("baud") && !result.stderr.contains("device URI is right"), "\(result)")
        }
    }

    @Test func unknownAddressListsTheDevicesSeen() async throws {
        try await withBLESimulator { session in
            let result = try await session.smp(["os", "echo", "x"], device: "ble:00:00:5E:00:53:99?timeout=1.5")
            expectStatus(result, SMPExit.transport)
            #expect(result.stderr.contains("no Bluetooth LE device 00:00:5E:00:53:99"), "\(result)")
            #expect(result.stderr.contains("seen: \"smp-sim\" (\(BLERig.peripheralAddress)"), "\(result)")
        }
    }

    @Test func missingAdapterAndBadURIs() async throws {
        try await withBLESimulator { session in
            let noAdapter = try await session.smp(["os", "echo", "x"], device: BLEEndToEndTests.device + "?adapter=hci9")
            expectStatus(noAdapter, SMPExit.transport)
            #expect(noAdapter.stderr.contains("no Bluetooth adapter hci9; adapters: hci0"), "\(noAdapter)")
            let bad = try await session.smp(["os", "echo", "x"], device: "ble:12:34")
            expectStatus(bad, SMPExit.usage)
            #expect(bad.stderr.contains("not a Bluetooth address"), "\(bad)")
            let badOption = try await session.smp(["os", "echo", "x"], device: BLEEndToEndTests.device + "?colour=blue")
            expectStatus(badOption, SMPExit.usage)
        }
    }

    @Test func withoutBlueZTheToolSaysSo() async throws {
        try await BLERig.with(bluez: false) { rig in
            let result = try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", BLEEndToEndTests.device, "os", "echo", "x"], timeout: 30,
                environment: rig.environment)
            expectStatus(result, SMPExit.transport)
            #expect(result.stderr.contains("BlueZ (org.bluez) is not on the system bus"), "\(result)")
            let sim = try? await SimProcess.start(["--ble", "hci1"], readyTimeout: 10, environment: rig.environment)
            #expect(sim == nil, "smp-sim --ble must fail without BlueZ")
            sim?.stop()
        }
    }

    @Test func simulatorRefusesAMissingAdapter() async throws {
        try await BLERig.with { rig in
            do {
                let sim = try await SimProcess.start(["--ble", "hci9"], readyTimeout: 10, environment: rig.environment)
                sim.stop()
                Issue.record("smp-sim --ble hci9 must fail")
            } catch {
                #expect("\(error)".contains("no Bluetooth adapter hci9"), "\(error)")
            }
        }
    }

    /// A peripheral that sends short notifications (`--ble-notify-size`): every answer is joined from
    /// many, with the request split over writes the other way.
    @Test func shortNotificationsAreJoined() async throws {
        try await withBLESimulator(["--ble-notify-size", "20", "--buf-size", "2475", "--fs-blocks", "0"]) { session in
            let text = String(repeating: "notification ", count: 80)
            let echo = try await session.smp(["os", "echo", text])
            expectSuccess(echo)
            #expect(echo.stdout == text + "\n")
            let payload = randomBytes(16 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"]))
            let back = session.directory.path("back.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/payload.bin", back]))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    /// The link drops in the middle of an upload (`--ble-drop-every`: the device handled the request
    /// and keeps running): the command ends at once with exit 69 and says the link was lost, and the
    /// same command run again reconnects and resumes from what the device holds until the file is
    /// whole (checked by the device's SHA-256).
    @Test func aDroppedLinkEndsTheCommandAndTheSameCommandResumes() async throws {
        try await withBLESimulator(["--ble-drop-every", "20", "--fs-blocks", "0"]) { session in
            let local = session.directory.path("payload.bin")
            try randomBytes(48 * 1024).write(to: URL(fileURLWithPath: local))
            let first = try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"])
            expectStatus(first, SMPExit.transport)
            #expect(first.stderr.contains("Bluetooth link") && first.stderr.contains("was lost"), "\(first)")
            var finished: ProcessResult?
            for _ in 0..<16 where finished == nil {
                let again = try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"])
                if again.status == 0 {
                    finished = again
                } else {
                    expectStatus(again, SMPExit.transport)
                }
            }
            #expect(finished?.stdout.contains("resumed at byte") == true, "\(String(describing: finished))")
            #expect(finished?.stdout.contains("verified by SHA-256") == true, "\(String(describing: finished))")
        }
    }
}
