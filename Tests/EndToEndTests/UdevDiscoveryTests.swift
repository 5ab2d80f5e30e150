import Foundation
import Testing

/// `smp devices`, `--device auto|usb:...` and following a board across a reset, against fake USB boards in
/// a umockdev test bed (a Nordic CDC-ACM board, a J-Link with two serial interfaces, an FTDI adapter), the
/// Nordic board's tty relayed to `smp-sim`.
@Suite(
    "udev discovery (umockdev)", .serialized,
    .enabled(if: UmockdevBed.shouldRun, Comment(rawValue: UmockdevBed.missingReason)))
struct UdevDiscoveryTests {
    typealias Bed = UmockdevBed

    static func devices(_ result: ProcessResult) -> [[String: Any]] {
        (jsonObject(result)?["devices"] as? [[String: Any]]) ?? []
    }

    static func device(_ devices: [[String: Any]], _ path: String) -> [String: Any] {
        devices.first { $0["path"] as? String == path } ?? [:]
    }

    @Test func devicesJSONReportsTheBoardsFromUdevProperties() async throws {
        let report = try await Bed.run([
            "udev_db": true, "devices": [Bed.nordic(), Bed.jlink, Bed.ftdi],
            "steps": [Bed.smp("json", ["devices", "--json"]), Bed.smp("human", ["devices"])],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let devices = Self.devices(expectSuccess(report["json"]))
        #expect(devices.map { $0["path"] as? String } == ["/dev/ttyACM0", "/dev/ttyACM1", "/dev/ttyACM2", "/dev/ttyUSB0"])
        let nordic = Self.device(devices, "/dev/ttyACM0")
        #expect(nordic["vendor_id"] as? String == "1915")
        #expect(nordic["product_id"] as? String == "520f")
        #expect(nordic["vendor"] as? String == "Nordic Semiconductor")
        #expect(nordic["product"] as? String == "nRF52840 USB CDC")
        #expect(nordic["serial"] as? String == "D1A2B3C4E5F60718")
        #expect(jsonInt(nordic["interface"]) == 0)
        #expect(nordic["driver"] as? String == "cdc_acm")
        #expect(nordic["by_id"] as? String == "/dev/serial/by-id/usb-Nordic_Semiconductor_nRF52840_USB_CDC_D1A2B3C4E5F60718-if00")
        #expect(nordic["device"] as? String == "usb:1915:520f?serial=D1A2B3C4E5F60718")
        let board = nordic["board"] as? [String: Any]
        #expect(board?["name"] as? String == "Nordic USB CDC-ACM (nRF Connect SDK)")
        #expect(board?["smp"] as? String == "likely")
        #expect(board?["follows_resets"] as? Bool == true)

        for (path, interface, vcom) in [("/dev/ttyACM1", 0, "VCOM0"), ("/dev/ttyACM2", 2, "VCOM1")] {
            let jlink = Self.device(devices, path)
            #expect(jlink["vendor_id"] as? String == "1366")
            #expect(jlink["product_id"] as? String == "1051")
            #expect(jlink["serial"] as? String == "001050234567")
            #expect(jsonInt(jlink["interface"]) == interface)
            #expect(jsonInt(jlink["interface_count"]) == 2)
            #expect(jlink["device"] as? String == "usb:1366:1051?serial=001050234567&interface=\(interface)")
            let board = jlink["board"] as? [String: Any]
            #expect((board?["name"] as? String)?.hasPrefix("SEGGER J-Link OB") == true)
            #expect(board?["kind"] as? String == "debug-probe")
            #expect((board?["role"] as? String)?.hasPrefix(vcom) == true)
            #expect(board?["follows_resets"] as? Bool == false)
        }
        let ftdi = Self.device(devices, "/dev/ttyUSB0")
        #expect(ftdi["vendor_id"] as? String == "0403")
        #expect(ftdi["serial"] as? String == "A10KXYZ9")
        #expect(ftdi["driver"] as? String == "ftdi_sio")
        #expect((ftdi["board"] as? [String: Any])?["kind"] as? String == "usb-serial-adapter")

        let human = expectSuccess(report["human"]).stdout
        #expect(human.contains("/dev/ttyACM2: SEGGER J-Link OB"))
        #expect(human.contains("interface  2 (one of 2 serial ports)"))
        #expect(human.contains("--device   usb:0403:6001?serial=A10KXYZ9"))
    }

    @Test func withoutUdevdsDatabaseSysfsAttributesAndDevSerialLinksStillTellTheBoardsApart() async throws {
        let report = try await Bed.run([
            "udev_db": false, "by_id_links": true, "devices": [Bed.nordic(), Bed.jlink, Bed.ftdi],
            "steps": [Bed.smp("json", ["devices", "--json"])],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let devices = Self.devices(expectSuccess(report["json"]))
        #expect(devices.count == 4)
        let nordic = Self.device(devices, "/dev/ttyACM0")
        #expect(nordic["vendor_id"] as? String == "1915")
        #expect(nordic["serial"] as? String == "D1A2B3C4E5F60718")
        #expect(nordic["vendor"] as? String == "Nordic Semiconductor")
        #expect(nordic["by_id"] as? String == "/dev/serial/by-id/usb-Nordic_Semiconductor_nRF52840_USB_CDC_D1A2B3C4E5F60718-if00")
        #expect(nordic["driver"] as? String == "cdc_acm")
        let vcom1 = Self.device(devices, "/dev/ttyACM2")
        #expect(jsonInt(vcom1["interface"]) == 2)
        #expect(vcom1["product"] as? String == "J-Link")
        #expect(Self.device(devices, "/dev/ttyUSB0")["driver"] as? String == "ftdi_sio")
    }

    @Test func userRulesNameTheBoards() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rules = #"{"boards": [{"usb": "1366:1051", "interface": 2, "name": "Rig 7 nRF5340 DK", "role": "VCOM1: MCUmgr", "smp": "likely"}]}"#
        try Data(rules.utf8).write(to: directory.url.appendingPathComponent("boards.json"))
        try Data("{".utf8).write(to: directory.url.appendingPathComponent("broken.json"))
        let report = try await Bed.run(
            [
                "devices": [Bed.jlink],
                "steps": [
                    Bed.smp("json", ["devices", "--json"]),
                    ["run": ["/usr/bin/env", "SMP_BOARDS=\(directory.path("broken.json"))", TestEnvironment.smp.path, "devices"], "name": "broken"],
                ],
            ], environment: ["SMP_BOARDS": directory.path("boards.json")])
        let devices = Self.devices(expectSuccess(report["json"]))
        let board = Self.device(devices, "/dev/ttyACM2")["board"] as? [String: Any]
        #expect(board?["name"] as? String == "Rig 7 nRF5340 DK")
        #expect(board?["user_rule"] as? Bool == true)
        #expect(board?["smp"] as? String == "likely")
        #expect((Self.device(devices, "/dev/ttyACM1")["board"] as? [String: Any])?["user_rule"] as? Bool == false)
        expectStatus(report["broken"], SMPExit.file)
        #expect(report["broken"].stderr.contains("broken.json: not valid JSON"))
    }

    @Test func probeFindsTheBoardServedByTheSimulator() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty"), "--buf-size", "2048", "--buf-count", "3"])
        defer { sim.stop() }
        let report = try await Bed.run([
            "devices": [Bed.nordic(relayTo: sim.ptyPath!), Bed.jlink, Bed.ftdi],
            "steps": [Bed.smp("probe", ["devices", "--probe", "--json"]), Bed.smp("human", ["devices", "--probe"])],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let devices = Self.devices(expectSuccess(report["probe"]))
        #expect(devices.count == 4)
        for device in devices {
            let probe = device["probe"] as? [String: Any]
            if device["path"] as? String == "/dev/ttyACM0" {
                #expect(probe?["answered"] as? Bool == true, "\(device)")
                #expect(jsonInt(probe?["buf_size"]) == 2048)
                #expect(jsonInt(probe?["buf_count"]) == 3)
            } else {
                #expect(probe?["answered"] as? Bool == false, "\(device)")
                #expect(probe?["result"] as? String == "no answer")
            }
        }
        let human = expectSuccess(report["human"]).stdout
        #expect(human.contains("probe      SMP (buf_size 2048, buf_count 3)"))
        #expect(human.contains("1 of 4 answered SMP"))
    }

    @Test func autoAndUSBFiltersPickTheBoardOrSayWhyNot() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty")])
        defer { sim.stop() }
        let report = try await Bed.run([
            "devices": [Bed.nordic(relayTo: sim.ptyPath!), Bed.jlink, Bed.ftdi],
            "steps": [
                Bed.smp("auto", ["--device", "auto", "-v", "os", "echo", "picked"]),
                Bed.smp("usb", ["--device", "usb:1915:520f?baud=1000000", "-v", "os", "echo", "by-id"]),
                Bed.smp("serial", ["--device", "usb:serial=D1A2B3C4E5F60718", "os", "echo", "by-serial"]),
                Bed.smp("ftdi", ["--device", "usb:0403", "-v", "--timeout", "0.5", "os", "echo", "x"]),
                Bed.smp("ambiguous", ["--device", "usb:1366", "os", "echo", "x"]),
                Bed.smp("nomatch", ["--device", "usb:2fe3:0100", "os", "echo", "x"]),
                Bed.smp("badfilter", ["--device", "usb:12345", "os", "echo", "x"]),
                // Many devices: every J-Link interface (none answers) and the Nordic board by its IDs.
                Bed.smp("all", ["--json", "--timeout", "0.5", "--device", "usb:1366?all", "--device", "usb:1915:520f", "os", "echo", "all"]),
                // auto?all: every port that answers SMP.
                Bed.smp("autoall", ["--json", "--device", "auto?all", "os", "echo", "answering"]),
                // A filter with all names many boards: not for a command that takes one.
                Bed.smp("allsingle", ["--device", "usb:1366?all", "os", "params"]),
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let auto = expectSuccess(report["auto"])
        #expect(auto.stdout == "picked\n")
        #expect(auto.stderr.contains("device: auto -> serial:/dev/ttyACM0"), "\(auto)")
        #expect(auto.stderr.contains("the only one of 4 matches that answered SMP"), "\(auto)")
        let usb = expectSuccess(report["usb"])
        #expect(usb.stdout == "by-id\n")
        #expect(usb.stderr.contains("-> serial:/dev/ttyACM0?baud=1000000"), "\(usb)")
        #expect(expectSuccess(report["serial"]).stdout == "by-serial\n")
        let ftdi = report["ftdi"]
        expectStatus(ftdi, SMPExit.timeout)
        #expect(ftdi.stderr.contains("device: usb:0403 -> serial:/dev/ttyUSB0"), "\(ftdi)")
        let ambiguous = report["ambiguous"]
        expectStatus(ambiguous, SMPExit.transport)
        #expect(ambiguous.stderr.contains("2 serial devices match and none answered SMP"), "\(ambiguous)")
        #expect(ambiguous.stderr.contains("usb:1366:1051?serial=001050234567&interface=2"), "\(ambiguous)")
        let nomatch = report["nomatch"]
        expectStatus(nomatch, SMPExit.transport)
        #expect(nomatch.stderr.contains("no serial device matches usb:2fe3:0100; found: /dev/ttyACM0"), "\(nomatch)")
        expectStatus(report["badfilter"], SMPExit.usage)
        #expect(report["badfilter"].stderr.contains("4 hex digits"))

        let all = report["all"]
        expectStatus(all, SMPExit.timeout)  // both failures are timeouts: their exit code
        let allResults = Self.fleetResults(all)
        #expect(allResults.count == 3, "\(all)")
        #expect(allResults["usb:1915:520f"]?["r"] as? String == "all", "\(all)")
        let jlinkPorts = allResults.filter { $0.key.hasPrefix("serial:/dev/") }
        #expect(jlinkPorts.count == 2, "\(all)")
        #expect(jlinkPorts.values.allSatisfy { $0["kind"] as? String == "timeout" }, "\(all)")
        let autoAll = expectSuccess(report["autoall"])
        let answering = Self.fleetResults(autoAll)
        #expect(Array(answering.keys) == ["serial:/dev/ttyACM0"], "\(autoAll)")
        #expect(answering.values.first?["r"] as? String == "answering")
        expectStatus(report["allsingle"], SMPExit.usage)
        #expect(report["allsingle"].stderr.contains("selects every matching board"), "\(report["allsingle"])")
    }

    /// The `result` lines of a multi-device run's JSON, by device.
    static func fleetResults(_ result: ProcessResult) -> [String: [String: Any]] {
        var byDevice: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                object["event"] as? String == "result", let device = object["device"] as? String
            else { continue }
            byDevice[device] = object
        }
        return byDevice
    }

    @Test func autoExplainsWhenNoBoardAnswersOrNoneIsThere() async throws {
        let report = try await Bed.run([
            "devices": [Bed.nordic(), Bed.ftdi],
            "steps": [
                Bed.smp("none-answer", ["--device", "auto", "os", "echo", "x"]),
                Bed.smp("none-answer-json", ["--json", "--device", "auto", "os", "echo", "x"]),
                ["unplug": "nordic"], ["unplug": "ftdi"],
                Bed.smp("empty", ["--device", "auto", "os", "echo", "x"]),
                Bed.smp("empty-list", ["devices", "--json"]),
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let none = report["none-answer"]
        expectStatus(none, SMPExit.transport)
        #expect(none.stderr.contains("auto: 2 serial devices match and none answered SMP"), "\(none)")
        #expect(none.stderr.contains("/dev/ttyACM0") && none.stderr.contains("/dev/ttyUSB0"))
        #expect(none.stderr.contains("[no answer]"))
        let error = jsonObject(report["none-answer-json"])?["error"] as? [String: Any]
        #expect(error?["kind"] as? String == "transport")
        let empty = report["empty"]
        expectStatus(empty, SMPExit.transport)
        #expect(empty.stderr.contains("auto: no serial devices found; connect a board"), "\(empty)")
        #expect(Self.devices(expectSuccess(report["empty-list"])).isEmpty)
    }

    @Test func watchReportsPlugAndUnplugAndTheMonitorSeesThem() async throws {
        let report = try await Bed.run([
            "devices": [Bed.nordic(), Bed.ftdi],
            "steps": [
                ["spawn": [TestEnvironment.smp.path, "devices", "--watch", "--json", "-v"], "name": "watch"],
                ["wait_for": ["name": "watch", "text": "\"added\"", "count": 2]],
                ["unplug": "nordic"],
                ["wait_for": ["name": "watch", "text": "\"removed\"", "count": 1]],
                ["plug": "nordic", "ttys": ["ttyACM5"]],
                ["wait_for": ["name": "watch", "text": "\"added\"", "count": 3]],
                ["stop": "watch"],
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "") \(report.log)")
        let watch = report["watch"]
        let events = watch.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let summary = events.map { event -> String in
            let device = event["device"] as? [String: Any]
            return "\(event["event"] as? String ?? "?") \(device?["path"] as? String ?? "?")"
        }
        #expect(summary == ["added /dev/ttyACM0", "added /dev/ttyUSB0", "removed /dev/ttyACM0", "added /dev/ttyACM5"], "\(watch)")
        #expect((events.last?["device"] as? [String: Any])?["serial"] as? String == "D1A2B3C4E5F60718")
        // The removal and the re-add came from udev's monitor, not only from rescans.
        #expect(watch.stderr.contains("udev monitor: remove"), "\(watch.stderr)")
        #expect(watch.stderr.contains("udev monitor: add /dev/ttyACM5"), "\(watch.stderr)")
    }

    @Test func waitOptionWaitsForTheBoardToBePluggedIn() async throws {
        let report = try await Bed.run([
            "devices": [Bed.nordic(plugged: false)],
            "steps": [
                ["spawn": [TestEnvironment.smp.path, "devices", "--device", "usb:1915:520f?wait=20", "--json"], "name": "wait"],
                ["sleep": 1.0],
                ["plug": "nordic"],
                ["wait_for": ["name": "wait", "text": "ttyACM0", "timeout": 15]],
                Bed.smp("gone", ["devices", "--device", "usb:1366?wait=0.5"]),
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let waited = report["wait"]
        #expect(waited.status == 0, "\(waited)")
        #expect(Self.devices(waited).first?["path"] as? String == "/dev/ttyACM0")
        expectStatus(report["gone"], SMPExit.transport)
        #expect(report["gone"].stderr.contains("no serial device matches usb:1366?wait=0.5 (waited"))
    }

    /// `staleSeconds`: how long the old tty stays in sysfs after its remove event. The kernel sends the
    /// event before it deletes the device; a flake-check run under load once took long enough between
    /// the two that smp's 1 s rescan found the old port again and took it for the board come back. 1.5 s
    /// makes sure a rescan falls in between.
    @Test(arguments: [0.0, 1.5])
    func resetFollowsTheBoardToItsNewTTYAndTheNextCommandFindsIt(staleSeconds: Double) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty")])
        defer { sim.stop() }
        let report = try await Bed.run([
            "devices": [Bed.nordic(relayTo: sim.ptyPath!), Bed.ftdi],
            "on_reset": ["device": "nordic", "ttys": ["ttyACM7"], "gone": 0.5, "stale": staleSeconds],
            "steps": [
                Bed.smp("reset", ["--device", "usb:1915:520f", "-v", "os", "reset"]),
                Bed.smp("echo", ["--device", "usb:1915:520f", "-v", "os", "echo", "after-reset"]),
                Bed.smp("list", ["devices", "--json"]),
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "") \(report.log)")
        let reset = expectSuccess(report["reset"])
        #expect(reset.stdout == "reset requested\n")
        #expect(reset.stderr.contains("device: usb:1915:520f -> serial:/dev/ttyACM0"), "\(reset)")
        #expect(reset.stderr.contains("device: back at serial:/dev/ttyACM7 after the reset"), "\(reset) \(report.log)")
        let echo = expectSuccess(report["echo"])
        #expect(echo.stdout == "after-reset\n")
        #expect(echo.stderr.contains("-> serial:/dev/ttyACM7"), "\(echo)")
        #expect(Self.devices(report["list"]).map { $0["path"] as? String } == ["/dev/ttyACM7", "/dev/ttyUSB0"])
    }
}

extension UdevDiscoveryTests {
    @Test func resetOfABoardThatStaysOnTheBusOrOfAProbeReturnsTheSamePort() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty")])
        defer { sim.stop() }
        let rules = #"{"boards": [{"usb": "1915:520f", "name": "Probe-like", "kind": "debug-probe"}]}"#
        try Data(rules.utf8).write(to: directory.url.appendingPathComponent("boards.json"))
        let report = try await Bed.run([
            "devices": [Bed.nordic(relayTo: sim.ptyPath!)],
            "steps": [
                // A board that follows resets but did not leave: after the grace period, the same port.
                Bed.smp("stays", ["--device", "usb:1915:520f", "-v", "os", "reset"]),
                // A probe's port is not followed at all.
                ["run": ["/usr/bin/env", "SMP_BOARDS=\(directory.path("boards.json"))", TestEnvironment.smp.path,
                         "--device", "usb:1915", "-v", "os", "reset"], "name": "probe"],
                ["sleep": 2.0],  // the target reboots behind the probe's port; give it time
                Bed.smp("echo", ["--device", "usb:1915:520f", "os", "echo", "same"]),
            ],
        ])
        #expect(report.error == nil, "\(report.error ?? "")")
        let stays = expectSuccess(report["stays"])
        #expect(stays.stderr.contains("device: back at serial:/dev/ttyACM0 after the reset"), "\(stays)")
        let probe = expectSuccess(report["probe"])
        #expect(!probe.stderr.contains("back at"), "\(probe)")
        #expect(expectSuccess(report["echo"]).stdout == "same\n")
    }
}

/// Where libudev finds nothing (this machine's real /sys has no USB serial ports and no /run/udev), the
/// tool still works with explicit URIs and says "no devices" cleanly.
@Suite("No udev devices")
struct NoUdevDevicesTests {
    @Test func devicesSaysNoneAndExplicitURIsStillWork() async throws {
        let list = try await runSMP(["devices"])
        expectSuccess(list)
        #expect(list.stdout == "no serial devices found\n" || list.stdout.contains("/dev/"), "\(list)")
        if list.stdout == "no serial devices found\n" {
            let json = try await runSMP(["devices", "--json"])
            #expect(String(decoding: json.stdoutData, as: UTF8.self) == "{\"devices\":[]}\n")
            let auto = try await runSMP(["--device", "auto", "os", "echo", "x"])
            expectStatus(auto, SMPExit.transport)
            #expect(auto.stderr.contains("auto: no serial devices found"))
        }
        try await withSimulator(.serial) { session in
            let echo = try await session.smp("os", "echo", "still-works")
            #expect(expectSuccess(echo).stdout == "still-works\n")
        }
    }

    @Test(arguments: [
        (["--device", "usb:1915?foo=1", "os", "echo", "x"], "unknown option \"foo\""),
        (["--device", "auto:1915", "os", "echo", "x"], "after auto"),
        (["--device", "usb:", "os", "echo", "x"], "no serial device matches usb:"),
        (["devices", "--device", "udp:127.0.0.1"], "smp devices lists serial ports"),
        (["devices", "--probe-timeout", "0"], "--probe-timeout"),
    ])
    func badFiltersAreUsageErrors(arguments: [String], expected: String) async throws {
        let result = try await runSMP(arguments)
        #expect(result.status == SMPExit.usage || (expected.hasPrefix("no serial") && result.status == SMPExit.transport), "\(result)")
        #expect(result.stderr.contains(expected), "\(result)")
    }

    @Test func anEmptyTestBedFindsNothing() async throws {
        guard UmockdevBed.shouldRun else { return }
        let report = try await UmockdevBed.run([
            "devices": [] as [Any], "steps": [UmockdevBed.smp("list", ["devices"]), UmockdevBed.smp("watch-usage", ["devices", "--watch", "--probe"])],
        ])
        #expect(expectSuccess(report["list"]).stdout == "no serial devices found\n")
        expectStatus(report["watch-usage"], SMPExit.usage)
    }
}

extension UdevDiscoveryTests {
    /// `smp dfu` on a board picked by `usb:`: the reset makes it leave the bus and come back as another
    /// tty; the upgrade follows it there, confirms the new image, and the final list shows it running.
    @Test func dfuFollowsTheBoardToItsNewTTYAcrossTheReset() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let image = try DFUPackages.image(version: (2, 3, 4), size: 16 * 1024, seed: 42)
        let path = try DFUPackages.write(image.data, "app.bin", in: directory)
        let sim = try await SimProcess.start(["--pty-link", directory.path("tty")])
        defer { sim.stop() }
        let report = try await Bed.run([
            "devices": [Bed.nordic(relayTo: sim.ptyPath!), Bed.ftdi],
            "on_reset": ["device": "nordic", "ttys": ["ttyACM3"], "gone": 0.5],
            "steps": [
                Bed.smp(
                    "dfu", ["--device", "usb:1915:520f", "-v", "--json", "dfu", path, "--mode", "test-and-confirm"],
                    timeout: 90),
                Bed.smp("list", ["--device", "usb:1915:520f", "--json", "image", "list"]),
            ],
        ], timeout: 150)
        #expect(report.error == nil, "\(report.error ?? "") \(report.log)")
        let dfu = expectSuccess(report["dfu"])
        #expect(dfu.stderr.contains("device: usb:1915:520f -> serial:/dev/ttyACM0"), "\(dfu)")
        #expect(dfu.stderr.contains("device: back at serial:/dev/ttyACM3 after the reset"), "\(dfu) \(report.log)")
        let result = dfuResult(dfu)
        #expect(result?["status"] as? String == "success", "\(dfu.stdout)")
        let list = expectSuccess(report["list"])
        let slots = try #require(
            (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])?["images"] as? [[String: Any]])
        let running = slots.first { $0["active"] as? Bool == true }
        #expect(running?["version"] as? String == "2.3.4", "\(list.stdout)")
        #expect(running?["confirmed"] as? Bool == true, "\(list.stdout)")
        #expect(running?["hash"] as? String == hex(image.hash), "\(list.stdout)")
    }
}
