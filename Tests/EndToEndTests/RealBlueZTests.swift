import Foundation
import TestSupport
import Testing

/// `smp` against `smp-sim --ble` through REAL BlueZ 5.66: bluetoothd and the kernel's Bluetooth in a
/// QEMU guest with three linked virtual controllers (Scripts/ble-vm.sh: the client, the device, and the
/// device's firmware loader at another address). Runs only inside that guest
/// (`BLE_VM=1`); Scripts/test-ble-bluez.sh boots it once and runs this suite for each link
/// configuration: plain ATT at BlueZ's ATT MTU 517 (the whole suite), EATT (requests of one write), then
/// plain ATT at ATT MTUs 498, 247, 65 and 23 (the device's own; echo at the buffer size and a file round
/// trip).
@Suite("smp over Bluetooth LE on real BlueZ (Scripts/ble-vm.sh)", .enabled(if: RealBlueZ.isAvailable, RealBlueZ.skipReason), .serialized)
struct RealBlueZTests {
    /// The device: `smp-sim --ble hci1 EXTRA`, and `smp` on hci0 with a cache directory of its own.
    struct Session {
        let sim: SimProcess
        let directory: TemporaryDirectory
        var device: String {
            "ble:\(RealBlueZ.deviceAddress)?adapter=\(RealBlueZ.clientAdapter)" + (RealBlueZ.deviceMTU.map { "&mtu=\($0)" } ?? "")
        }
        var environment: [String: String] { ["XDG_CACHE_HOME": directory.path("cache")] }

        func smp(_ arguments: [String], device: String? = nil, input: Pipe? = nil, timeout: Double = 240) async throws -> ProcessResult {
            try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", device ?? self.device] + arguments, timeout: timeout, environment: environment,
                input: input)
        }

        /// A file of `size` random bytes up to /lfs1 and back, compared byte for byte; returns the upload
        /// (`uploadOptions` go before `fs upload`, e.g. `-v`).
        @discardableResult
        func fileRoundTrip(_ size: Int, uploadOptions: [String] = []) async throws -> ProcessResult {
            let payload = randomBytes(size)
            let local = directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let upload = try await smp(uploadOptions + ["fs", "upload", local, "/lfs1/payload.bin"])
            expectSuccess(upload)
            let back = directory.path("back.bin")
            expectSuccess(try await smp(["fs", "download", "/lfs1/payload.bin", back]))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
            return upload
        }
    }

    @discardableResult
    func withDevice<R>(_ extra: [String] = [], _ body: (Session) async throws -> R) async throws -> R {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let mtu = RealBlueZ.deviceMTU.map { ["--ble-mtu", "\($0)"] } ?? []
        let sim = try await SimProcess.start(["--ble", RealBlueZ.deviceAdapter] + mtu + extra, readyTimeout: 60)
        defer { sim.stop() }
        #expect(sim.bleAddress == RealBlueZ.deviceAddress)
        // Commands find a device BlueZ knows without scanning; scans on this rig miss an advertising
        // device now and then (scanShowsTheDevice... counts how often), so the tests of everything
        // else wait here until BlueZ has seen it.
        if try await RealBlueZ.scansUntilSeen() == nil {
            Issue.record("BlueZ never saw \(RealBlueZ.deviceAddress): \(await RealBlueZ.whyUnseen())")
        }
        let session = Session(sim: sim, directory: directory)
        let result = try await body(session)
        // Every connection smp made is closed when it exits: the device advertises for the next client.
        #expect(await RealBlueZ.waitUntilDisconnected(), "smp left \(RealBlueZ.deviceAddress) connected")
        return result
    }

    /// An echo whose request is exactly `size` bytes: 8-byte header, {"d": text}.
    static func echoText(requestSize size: Int) -> String {
        for head in [1, 2, 3] {
            let length = size - 8 - 3 - head
            if length >= 0, head == (length < 24 ? 1 : length < 256 ? 2 : 3) {
                return String((0..<length).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
            }
        }
        return ""
    }

    struct Buffers: Sendable, CustomTestStringConvertible {
        var size: Int
        var reassembly: Bool
        var testDescription: String { "\(size) B buffer, \(reassembly ? "reassembly" : "no reassembly")" }
        var arguments: [String] { ["--buf-size", "\(size)"] + (reassembly ? [] : ["--ble-no-reassembly"]) }
    }

    /// Zephyr's default (384), over one 512-byte write (1024), smp_svr's Bluetooth overlay (2475), and a
    /// device without reassembly whose buffer holds more than one write.
    /// The other ATT MTUs take smp_svr's buffer only; EATT the default and the overlay's (see
    /// `RealBlueZ.Suite.eatt`).
    static let echoBuffers: [Buffers] =
        switch RealBlueZ.suite {
        case .full:
            [
                Buffers(size: 384, reassembly: true), Buffers(size: 1024, reassembly: true), Buffers(size: 2475, reassembly: true),
                Buffers(size: 1024, reassembly: false),
            ]
        case .eatt: [Buffers(size: 384, reassembly: true), Buffers(size: 2475, reassembly: true)]
        case .link: [Buffers(size: 2475, reassembly: true)]
        }
    static let transferBuffers: [Buffers] =
        switch RealBlueZ.suite {
        case .full: [Buffers(size: 384, reassembly: true), Buffers(size: 2475, reassembly: true), Buffers(size: 1024, reassembly: false)]
        case .eatt: [Buffers(size: 384, reassembly: true)]
        case .link: [Buffers(size: 2475, reassembly: true)]
        }

    @Test(arguments: echoBuffers)
    func echoFillsTheBufferAndOneByteMoreIsRefusedAtOnce(_ buffers: Buffers) async throws {
        try await withDevice(buffers.arguments) { session in
            // The largest request the device takes: its buffer, or one write without reassembly or
            // over EATT (where the pieces of a request arrive out of order).
            let splits = buffers.reassembly && RealBlueZ.suite != .eatt
            let largest = splits ? buffers.size : min(buffers.size, RealBlueZ.writeLength)
            let text = Self.echoText(requestSize: largest)
            let echo = try await session.smp(["os", "echo", text])
            if RealBlueZ.suite == .eatt, largest > RealBlueZ.eattNotificationPayload, echo.status != 0 {
                // The answer takes more than one notification, and bluetoothd 5.66 spreads those over
                // its bearers, where they may overtake each other (in most runs they do not): then the
                // error says so and how to keep BlueZ to one bearer.
                #expect(echo.stderr.contains("out of order") && echo.stderr.contains("Channels = 1"), "\(echo)")
            } else {
                expectSuccess(echo)
                #expect(echo.stdout == text + "\n")
            }
            let tooLong = try await session.smp(["os", "echo", Self.echoText(requestSize: largest + 1)])
            expectStatus(tooLong, SMPExit.usage)
            #expect(tooLong.stderr.contains("\(largest + 1)-byte request"), "\(tooLong)")
            if largest == buffers.size {
                #expect(tooLong.stderr.contains("\(buffers.size)-byte SMP buffer"), "\(tooLong)")
            } else if buffers.reassembly {
                #expect(tooLong.stderr.contains("\(RealBlueZ.writeLength)-byte Bluetooth write"), "\(tooLong)")
                #expect(tooLong.stderr.contains("EATT") && tooLong.stderr.contains("Channels = 1"), "\(tooLong)")
            } else {
                #expect(tooLong.stderr.contains("\(RealBlueZ.writeLength)-byte Bluetooth write"), "\(tooLong)")
                #expect(tooLong.stderr.contains("do not reach this device whole"), "\(tooLong)")
            }
            #expect(!tooLong.stderr.contains("baud"), "\(tooLong)")
        }
    }

    @Test(arguments: transferBuffers)
    func fileRoundTrip(_ buffers: Buffers) async throws {
        try await withDevice(buffers.arguments + ["--fs-blocks", "0"]) { session in
            try await session.fileRoundTrip(RealBlueZ.suite == .link ? 16 * 1024 : 64 * 1024)
        }
    }

    /// The device's SMP buffer count (`--buf-count`, Zephyr's CONFIG_MCUMGR_TRANSPORT_NETBUF_COUNT), as
    /// `os params` reports it, sets how many requests smp keeps in flight: `buf_count - 1`, at least one.
    /// One buffer and eight, a 32 KiB file up and down.
    @Test(.enabled(if: RealBlueZ.suite == .full), arguments: [1, 8])
    func transfersKeepWhatTheDevicesBufferCountAllowsInFlight(count: Int) async throws {
        try await withDevice(["--buf-size", "2475", "--buf-count", "\(count)", "--fs-blocks", "0"]) { session in
            let upload = try await session.fileRoundTrip(32 * 1024, uploadOptions: ["-v"])
            let window = max(1, count - 1)
            #expect(upload.stderr.contains("\(window) frame\(window == 1 ? "" : "s") in flight"), "\(upload)")
            #expect(upload.stderr.contains("device buffers \(count) x 2475 B"), "\(upload)")
        }
    }

    /// A device that notifies in 20-byte pieces whatever the link carries (`--ble-notify-size 20`, as a
    /// Zephyr build that never raises its notification length): a 2.4 kB answer is some 120
    /// notifications through bluetoothd's own sockets, joined into whole answers, both ways.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func shortNotificationsAreJoined() async throws {
        try await withDevice(["--ble-notify-size", "20", "--buf-size", "2475", "--fs-blocks", "0"]) { session in
            let text = String(repeating: "notification ", count: 80)
            let echo = try await session.smp(["os", "echo", text])
            expectSuccess(echo)
            #expect(echo.stdout == text + "\n")
            try await session.fileRoundTrip(16 * 1024)
        }
    }

    /// The device drops the link in the middle of an upload (`--ble-drop-every 8`: it handled the
    /// request, disconnects through its own bluetoothd, which ends the link two seconds later, and
    /// advertises again at once, as a device whose central went out of range): the command ends with
    /// exit 69 and says the link was lost, never a bare timeout, and the same command run again
    /// connects afresh and resumes from what the device holds until the file is whole (checked by the
    /// device's SHA-256).
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func aDroppedLinkEndsTheCommandAndTheSameCommandResumes() async throws {
        try await withDevice(["--ble-drop-every", "8", "--buf-size", "2475", "--fs-blocks", "0"]) { session in
            let payload = randomBytes(32 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let first = try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"])
            expectStatus(first, SMPExit.transport)
            #expect(first.stderr.contains("Bluetooth link") && first.stderr.contains("was lost"), "\(first)")
            #expect(!first.stderr.contains("no answer within"), "\(first)")
            var finished: ProcessResult?
            var attempts = 1
            while finished == nil, attempts < 16 {
                attempts += 1
                let again = try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"])
                if again.status == 0 {
                    finished = again
                } else {
                    expectStatus(again, SMPExit.transport)
                    #expect(again.stderr.contains("was lost") && !again.stderr.contains("no answer within"), "\(again)")
                }
            }
            #expect(finished?.stdout.contains("resumed at byte") == true, "\(String(describing: finished))")
            #expect(finished?.stdout.contains("verified by SHA-256") == true, "\(String(describing: finished))")
            print("aDroppedLink: the upload took \(attempts) commands")
        }
    }

    /// A command exits without waiting the two seconds BlueZ takes to end its connection: it only asks.
    /// The next command, started at once, finds the device still connected and waits for that end
    /// instead of taking a connection about to drop (which would end it in the middle).
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func commandsBackToBackEachGetAConnectionOfTheirOwn() async throws {
        try await withDevice(["--fs-blocks", "0"]) { session in
            let first = try await session.smp(["-v", "os", "echo", "first"])
            expectSuccess(first)
            #expect(first.stderr.contains("asked BlueZ to disconnect"), "\(first)")
            let payload = randomBytes(32 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            var waited = 0
            for (index, arguments) in [["os", "echo", "second"], ["fs", "upload", local, "/lfs1/b2b.bin"], ["fs", "download", "/lfs1/b2b.bin", session.directory.path("back.bin")]].enumerated() {
                let result = try await session.smp(["-v"] + arguments)
                expectSuccess(result)
                #expect(!result.stderr.contains("was lost"), "command \(index + 2): \(result)")
                if result.stderr.contains("ending as an earlier command asked; disconnected") { waited += 1 }
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: session.directory.path("back.bin"))) == payload)
            // How many found the previous connection still ending depends on the machine's speed: said, not judged.
            print("commandsBackToBack: \(waited) of 3 commands waited for the previous command's disconnect")
        }
    }

    /// Over EATT the notifications of a 2.4 kB answer arrive out of order: the download cannot go
    /// through (open: BlueZ 5.66), but the error names the cause and the fix instead of a bare stall.
    @Test(.enabled(if: RealBlueZ.suite == .eatt))
    func eattDownloadsOfLongAnswersSayWhy() async throws {
        try await withDevice(["--buf-size", "2475", "--fs-blocks", "0"]) { session in
            let payload = randomBytes(16 * 1024)
            let local = session.directory.path("payload.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp(["fs", "upload", local, "/lfs1/payload.bin"]))
            let back = session.directory.path("back.bin")
            let download = try await session.smp(["fs", "download", "/lfs1/payload.bin", back])
            if download.status == 0 {
                // The notifications happened to arrive in order: then the file is whole.
                #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
            } else {
                #expect(download.stderr.contains("EATT") && download.stderr.contains("Channels = 1"), "\(download)")
                #expect(!FileManager.default.fileExists(atPath: back), "a failed download leaves no partial file")
            }
        }
    }

    @Test(.enabled(if: RealBlueZ.suite != .link))
    func scanShowsTheDeviceAndAScanThatSeesNothingFails() async throws {
        try await withDevice(["--ble-name", "field unit"]) { session in
            // BlueZ keeps the name the previous test's device advertised from the same address, and the
            // controller's duplicate filter holds back the new advertisement while another discovery (the
            // rig's) keeps scanning (seen: three scans in a row showed "smp-sim"): BlueZ forgets the
            // device first, and learns it again from the new advertisement.
            try await forgetBothEnds(session)
            // A scan right after another one misses the device now and then on this rig (open, issue
            // 23): the device must show in one of three.
            var listed: [String: Any]?
            var human: ProcessResult?
            for _ in 0..<3 where listed?["name"] as? String != "field unit" {
                let scan = try await ProcessRunner.run(
                    TestEnvironment.smp, ["ble", "scan", "--adapter", RealBlueZ.clientAdapter, "--json"], timeout: 120)
                let devices = (try? JSONSerialization.jsonObject(with: scan.stdoutData) as? [String: Any])?["devices"] as? [[String: Any]]
                listed = devices?.first { $0["address"] as? String == RealBlueZ.deviceAddress }
                if listed != nil { expectSuccess(scan) }
            }
            if listed == nil { Issue.record("three scans did not list the device: \(await RealBlueZ.whyUnseen())") }
            #expect(listed == nil || listed?["name"] as? String == "field unit", "\(String(describing: listed))")
            // A signal strength is real or unknown (null), never HCI's 127 "not available".
            if let rssi = jsonInt(listed?["rssi"]) { #expect((-127...20).contains(rssi)) }
            for _ in 0..<3 where human == nil {
                let scan = try await ProcessRunner.run(TestEnvironment.smp, ["ble", "scan", "--adapter", RealBlueZ.clientAdapter], timeout: 120)
                if scan.stdout.contains(RealBlueZ.deviceAddress) { human = scan }
            }
            #expect(human.map { $0.status == 0 && !$0.stdout.contains("127 dBm") } == true, "\(String(describing: human))")
        }
        // Nothing advertises to the device's own adapter.
        let nothing = try await ProcessRunner.run(
            TestEnvironment.smp, ["ble", "scan", "--adapter", RealBlueZ.deviceAdapter, "--timeout", "3"], timeout: 120)
        expectStatus(nothing, SMPExit.transport)
        #expect(nothing.stderr.contains("no device advertising the SMP service seen"), "\(nothing)")
    }

    @Test(.enabled(if: RealBlueZ.suite != .link))
    func everyGroupAnswers() async throws {
        try await withDevice { session in
            let checks: [([String], String?)] = [
                (["os", "echo", "every group"], "every group"), (["os", "params"], "buf_size"), (["os", "info"], nil),
                (["os", "tasks"], nil), (["os", "mempool"], nil), (["os", "datetime"], nil), (["os", "bootloader"], nil),
                (["image", "list"], "1.0.0"), (["stat", "list"], nil), (["stat", "read", "smp_svr_stats"], nil),
                (["settings", "write", "ble/greeting", "hello"], nil), (["settings", "read", "ble/greeting"], "hello"),
                (["settings", "delete", "ble/greeting"], nil), (["shell", "exec", "--", "kernel", "version"], nil),
                (["enum", "list"], nil),
            ]
            for (arguments, expected) in checks {
                let result = try await session.smp(arguments)
                expectSuccess(result)
                if let expected { #expect(result.stdout.contains(expected), "\(arguments): \(result)") }
            }
        }
    }

    /// Firmware that moved the SMP characteristic within its service, which keeps its handles and UUID
    /// (as an upgrade can): BlueZ 5.66 keeps its copy of that service while it keeps the device,
    /// characteristics and all (its database hash changed, yet the service's bounds and UUID did not),
    /// so the writes and the subscription go to the characteristic now at the old handles, which never
    /// answers. On a connection of its own to a device without a bond, smp notices the silence, removes
    /// the device from BlueZ (and that copy with it) and connects afresh.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func servicesThatMovedUnderBlueZsCopyAreDiscoveredAfresh() async throws {
        try await withDevice(["--ble-layout", "smp-first"]) { session in
            let echo = try await session.smp(["-v", "os", "echo", "earlier firmware"])
            expectSuccess(echo)
            #expect(echo.stderr.contains("/service0200/char0201,"), "the SMP characteristic first: \(echo)")
        }
        try await withDevice(["--ble-layout", "smp-second"]) { session in
            let echo = try await session.smp(["-v", "os", "echo", "later firmware"])
            expectSuccess(echo)
            #expect(echo.stdout.contains("later firmware"))
            #expect(echo.stderr.contains("earlier firmware") && echo.stderr.contains("afresh"), "\(echo)")
            #expect(echo.stderr.contains("/service0200/char0204,"), "the SMP characteristic second: \(echo)")
            // BlueZ's copy is right now: the next command needs no second connection.
            let again = try await session.smp(["os", "echo", "again"])
            expectSuccess(again)
            #expect(!again.stderr.contains("afresh"), "\(again)")
        }
    }

    /// Two commands at once on one device: the second finds the first's connection with the SMP
    /// notifications acquired, which BlueZ gives one program at a time. It says so and leaves them
    /// alone (a StopNotify from it would close the first command's socket; BlueZ 5.66 crashes on one
    /// after an acquisition that failed), and the first command finishes.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func aSecondCommandLeavesTheFirstsNotificationsAlone() async throws {
        // Answers come 4 s late (within the 5 s the connection waits for `os params`): the first command
        // holds the link for 8 s at least.
        try await withDevice(["--latency", "4000"]) { session in
            async let first = session.smp(["--timeout", "20", "os", "echo", "first"])
            let acquired = await waitUntil(timeout: .seconds(60), interval: .milliseconds(100)) {
                await RealBlueZ.smpNotificationsAcquired()
            }
            #expect(acquired, "the first command never acquired the SMP notifications")
            let second = try await session.smp(["--timeout", "5", "os", "echo", "second"])
            let firstResult = try await first
            expectStatus(second, SMPExit.transport)
            #expect(second.stderr.contains("another program holds the SMP notifications"), "\(second)")
            expectSuccess(firstResult)
            #expect(firstResult.stdout == "first\n", "\(firstResult)")
        }
    }

    @Test(.enabled(if: RealBlueZ.suite != .link))
    func imageUploadLandsInTheSecondSlot() async throws {
        try await withDevice(["--buf-size", "2475"]) { session in
            let (image, hash) = try DFUPackages.image(version: (1, 2, 0), size: 48 * 1024, seed: 7)
            let path = try DFUPackages.write(image, "app.bin", in: session.directory)
            expectSuccess(try await session.smp(["image", "upload", path]))
            let list = try await session.smp(["--json", "image", "list"])
            expectSuccess(list)
            let slots = jsonObject(list)?["images"] as? [[String: Any]] ?? []
            #expect(slots.contains { $0["slot"] as? Int == 1 && $0["hash"] as? String == hex(hash) }, "\(list)")
        }
    }

    @Test(.enabled(if: RealBlueZ.suite != .link))
    func firmwareUpgradeTestAndConfirmAcrossTheReset() async throws {
        try await withDevice { session in
            try await Self.upgradeAndConfirm(session, version: (2, 1, 0), size: 48 * 1024, seed: 42)
        }
    }

    /// `smp dfu --mode test-and-confirm` with an image of `size` bytes: it goes through the reset and a
    /// reconnection, and the device then runs the image, confirmed.
    static func upgradeAndConfirm(_ session: Session, version: (UInt8, UInt8, UInt16), size: Int, seed: UInt64) async throws {
        let (image, hash) = try DFUPackages.image(version: version, size: size, seed: seed)
        let path = try DFUPackages.write(image, "app.bin", in: session.directory)
        let run = try await session.smp(["--json", "dfu", path, "--mode", "test-and-confirm"], timeout: 400)
        expectSuccess(run)
        let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
        #expect(states.contains("reset") && states.contains("reconnect") && states.contains("confirm"), "\(states)")
        let list = try await session.smp(["--json", "image", "list"])
        expectSuccess(list)
        let active = (jsonObject(list)?["images"] as? [[String: Any]] ?? []).first { $0["active"] as? Bool == true }
        #expect(active?["hash"] as? String == hex(hash), "\(list)")
        #expect(active?["confirmed"] as? Bool == true, "\(list)")
    }

    /// A swap longer than BlueZ's own limits (its Connect gives up after 20 s; an unpaired device it has
    /// not seen for 30 s is removed): the device is silent for 40 s after the reset, `smp dfu` with
    /// default options keeps reconnecting and confirms the new image.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func firmwareUpgradeAcrossASwapLongerThanBlueZsTimeouts() async throws {
        try await withDevice(["--swap-time", "40"]) { session in
            try await Self.upgradeAndConfirm(session, version: (3, 0, 0), size: 16 * 1024, seed: 9)
        }
    }

    @Test(.enabled(if: RealBlueZ.suite == .full))
    func aDeviceThatStoppedReassemblingIsExplainedThenRelearned() async throws {
        // New firmware without reassembly behind an address remembered as reassembling.
        let text = Self.echoText(requestSize: 700)
        let cache = try TemporaryDirectory()
        defer { cache.remove() }
        try await withDevice(["--buf-size", "1024"]) { session in
            let echo = try await session.smp(["os", "echo", text], timeout: 240)
            expectSuccess(echo)
            try FileManager.default.copyItem(atPath: session.directory.path("cache"), toPath: cache.path("cache"))
        }
        try await withDevice(["--buf-size", "1024", "--ble-no-reassembly"]) { session in
            try? FileManager.default.removeItem(atPath: session.directory.path("cache"))
            try FileManager.default.copyItem(atPath: cache.path("cache"), toPath: session.directory.path("cache"))
            let first = try await session.smp(["os", "echo", text])
            expectStatus(first, SMPExit.device)
            #expect(first.stderr.contains("CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY"), "\(first)")
            #expect(!first.stderr.contains("baud"), "\(first)")
            // The next command knows: a request of one write goes through, a longer one is refused at once.
            let short = try await session.smp(["os", "echo", "short again"])
            expectSuccess(short)
            let again = try await session.smp(["os", "echo", text])
            expectStatus(again, SMPExit.usage)
            #expect(again.stderr.contains("do not reach this device whole"), "\(again)")
        }
    }

    /// Nordic's Firmware Loader flow on real BlueZ: the application (hci1) stores the loader's name,
    /// resets with boot_mode 1, and the loader comes back as another peripheral (hci2: another address,
    /// another name); `smp dfu` finds it by that name, uploads, resets, and the application runs the new
    /// image at its own address again. Twice: the second upgrade finds the loader under a new name at an
    /// address BlueZ already knows under another (the name it read from the loader's GAP service after
    /// connecting), as a second upgrade of the same device with a generated name does.
    @Test(.enabled(if: RealBlueZ.suite == .full && RealBlueZ.loaderAddress != nil))
    func firmwareLoaderComesBackAsAnotherPeripheralAndIsFoundByName() async throws {
        let loaderAdapter = RealBlueZ.loaderAdapter, loaderAddress = try #require(RealBlueZ.loaderAddress)
        try await withDevice(["--bootloader-mode", "firmware-loader", "--ble-loader-adapter", loaderAdapter]) { session in
            for (round, name) in ["FL_BLUEZ1", "FL_BLUEZ2"].enumerated() {
                let (image, hash) = try DFUPackages.image(version: (3, UInt8(round + 1), 0), size: 48 * 1024, seed: 23 + UInt64(round))
                let path = try DFUPackages.write(image, "app\(round).bin", in: session.directory)
                let run = try await session.smp(["--json", "-v", "dfu", path, "--loader-name", name], timeout: 400)
                expectSuccess(run)
                let result = dfuResult(run) ?? [:]
                #expect(result["status"] as? String == "success", "\(result)")
                #expect(jsonInt(result["bootloader_mode"]) == 7, "\(result)")
                #expect((result["uploaded"] as? [Any])?.count == 1, "\(result)")
                let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
                #expect(
                    states.starts(with: [
                        "requestMcuMgrParameters", "bootloaderInfo", "validate", "resetIntoFirmwareLoader", "reconnect", "upload", "reset",
                        "reconnect", "success",
                    ]), "\(states)")
                // The loader advertised on its own adapter, under the name the application stored, and smp
                // reached it there by name (BlueZ labels it with the GAP name it read after connecting:
                // here the name of the loader's adapter).
                // (The simulator prints the loader's address when it first registers it.)
                #expect(await session.sim.waitForLine(timeout: 30) { $0.contains("ble \(loaderAdapter) ") && $0.contains(" advertising \(name) (firmware loader)") } != nil)
                if round == 0 {
                    #expect(await session.sim.waitForLine(timeout: 30) { $0.contains("ble \(loaderAdapter) \(loaderAddress) advertising") } != nil)
                }
                #expect(run.stderr.contains("looking for the firmware loader (\"\(name)\") as ble:name=\(name)"), "\(run.stderr)")
                #expect(run.stderr.contains("found the firmware loader (\"\(name)\") at"), "\(run.stderr)")
                let loaderLink = run.stderr.split(separator: "\n").first { $0.contains("BLE link ble:name=\(name)") && $0.contains("characteristic") }
                #expect(loaderLink?.contains("(\(loaderAddress))") == true, "\(run.stderr)")
                // smp left neither peripheral connected (a connected device advertises to nobody).
                #expect(await RealBlueZ.waitUntilDisconnected(address: loaderAddress), "smp left the loader \(loaderAddress) connected")
                #expect(await RealBlueZ.waitUntilDisconnected(), "smp left \(RealBlueZ.deviceAddress) connected")
                // The application at its own address runs the new image from slot 0, confirmed.
                let list = try await session.smp(["--json", "image", "list"])
                expectSuccess(list)
                let active = (jsonObject(list)?["images"] as? [[String: Any]] ?? []).first { $0["active"] as? Bool == true }
                #expect(active?["hash"] as? String == hex(hash), "\(list)")
                #expect(active?["slot"] as? Int == 0 && active?["version"] as? String == "3.\(round + 1).0", "\(list)")
                #expect(active?["confirmed"] as? Bool == true, "\(list)")
            }
        }
    }

    // MARK: Pairing (the last tests of the full suite: the one that leaves pairing unanswered last)

    /// `smp` without a device option (the `ble` commands), with the session's cache.
    func smp(_ arguments: [String], _ session: Session, input: Pipe? = nil, timeout: Double = 240) async throws -> ProcessResult {
        try await ProcessRunner.run(TestEnvironment.smp, arguments, timeout: timeout, environment: session.environment, input: input)
    }

    /// Removes the bond at both ends (each adapter's device object of the other), so that the next test
    /// starts unpaired, and waits until BlueZ has seen the device again (forgetting it removed the
    /// client's device object, and this rig's scans miss an advertiser now and then).
    func forgetBothEnds(_ session: Session) async throws {
        _ = try await smp(["ble", "forget", RealBlueZ.deviceAddress, "--adapter", RealBlueZ.clientAdapter], session)
        _ = try await smp(["ble", "forget", RealBlueZ.clientAddress, "--adapter", RealBlueZ.deviceAdapter], session)
        if try await RealBlueZ.scansUntilSeen() == nil {
            Issue.record("BlueZ never saw \(RealBlueZ.deviceAddress) again: \(await RealBlueZ.whyUnseen())")
        }
    }

    /// A device that asks for an encrypted link and pairs without a passkey (Just Works, as a Zephyr
    /// device without pairing callbacks): BlueZ pairs when smp subscribes, nothing is asked, and the bond
    /// is listed.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func justWorksPairsOnFirstUse() async throws {
        try await withDevice(["--ble-security", "encrypt"]) { session in
            try await forgetBothEnds(session)
            let echo = try await session.smp(["os", "echo", "encrypted"])
            expectSuccess(echo)
            #expect(echo.stdout.contains("encrypted"))
            let bonds = try await smp(["ble", "bonds", "--adapter", RealBlueZ.clientAdapter, "--json"], session)
            expectSuccess(bonds)
            #expect(bonds.stdout.contains("\"address\":\"\(RealBlueZ.deviceAddress)\""), "\(bonds)")
            try await forgetBothEnds(session)
        }
    }

    /// Authenticated pairing by numeric comparison (a device with a display and yes/no): `smp ble pair
    /// --yes` confirms the passkey both ends show, the bond is listed, commands work, pairing again says
    /// so, and `smp ble forget` removes it (a second time: exit 1).
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func pairingByNumericComparisonListingAndForgetting() async throws {
        try await withDevice(["--ble-security", "authenticated", "--ble-io", "display-yes-no"]) { session in
            let address = RealBlueZ.deviceAddress, adapter = RealBlueZ.clientAdapter
            try await forgetBothEnds(session)
            let pair = try await smp(["ble", "pair", address, "--adapter", adapter, "--yes"], session)
            expectSuccess(pair)
            #expect(pair.stdout.contains("paired with"), "\(pair)")
            let shown = await session.sim.waitForLine { $0.contains("confirmed") }
            let words = (shown ?? "").split(separator: " ").map(String.init)
            let passkey = try #require(words.first { $0.count == 6 && $0.allSatisfy(\.isNumber) }, "\(String(describing: shown))")
            #expect(pair.stderr.contains("shows the passkey \(passkey)"), "both ends compared the same passkey: \(pair)")
            let echo = try await session.smp(["os", "echo", "authenticated"])
            expectSuccess(echo)
            let again = try await smp(["ble", "pair", address, "--adapter", adapter], session)
            expectSuccess(again)
            #expect(again.stdout.contains("paired already"), "\(again)")
            let bonds = try await smp(["ble", "bonds", "--adapter", adapter], session)
            #expect(bonds.stdout.contains(address), "\(bonds)")
            let forget = try await smp(["ble", "forget", address, "--adapter", adapter], session)
            expectSuccess(forget)
            // A second time there is no bond to remove (the rig's discovery may have re-created BlueZ's
            // record of the advertising device in between: it holds no bond either).
            let forgetAgain = try await smp(["ble", "forget", address, "--adapter", adapter], session)
            #expect(forgetAgain.status == 1, "\(forgetAgain)")
            #expect(!forgetAgain.stdout.contains("its bond"), "\(forgetAgain)")
            _ = try await smp(["ble", "forget", RealBlueZ.clientAddress, "--adapter", RealBlueZ.deviceAdapter], session)
        }
    }

    /// Authenticated pairing by passkey entry (the device shows six digits, as a Zephyr device with a
    /// display does), on first use: `smp --pair os echo` asks for the passkey on standard input, pairs,
    /// and the echo goes through in the same command.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func pairOnFirstUseWithThePasskeyTheDeviceShows() async throws {
        try await withDevice(["--ble-security", "authenticated"]) { session in
            try await forgetBothEnds(session)
            let input = Pipe()
            let command = Task { try await session.smp(["--pair", "os", "echo", "typed"], input: input) }
            let shown = await session.sim.waitForLine { $0.contains("passkey") }
            let passkey = try #require(shown?.split(separator: " ").last.map(String.init), "the device showed no passkey")
            try input.fileHandleForWriting.write(contentsOf: Data((passkey + "\n").utf8))
            try input.fileHandleForWriting.close()
            let echo = try await command.value
            expectSuccess(echo)
            #expect(echo.stdout.contains("typed"), "\(echo)")
            #expect(echo.stderr.contains("asks for the passkey"), "\(echo)")
            try await forgetBothEnds(session)
        }
    }

    /// A device that wants a passkey, and nobody to answer (no --pair; the rig's other agent is the
    /// device's own, which answers only for its adapter): BlueZ holds the subscription while it pairs.
    /// Before, smp retried and ended with "no answer on D-Bus in time ... the service may be busy or
    /// hung"; now it says at once how to pair. Runs last (the suite is serialized, in this order):
    /// afterwards this bluetoothd 5.66 resolved no device's services within 20 s until restarted, which
    /// the next configuration does.
    @Test(.enabled(if: RealBlueZ.suite == .full))
    func aDeviceThatWantsAPasskeySaysHowToPair() async throws {
        try await withDevice(["--ble-security", "authenticated"]) { session in
            try await forgetBothEnds(session)
            let first = try await session.smp(["os", "echo", "unpaired"])
            expectStatus(first, SMPExit.transport)
            #expect(first.stderr.contains("smp ble pair \(RealBlueZ.deviceAddress)") && first.stderr.contains("--pair"), "\(first)")
            #expect(first.stderr.contains("encrypted link") && !first.stderr.contains("busy or hung") && !first.stderr.contains("baud"), "\(first)")
            #expect(await RealBlueZ.knowsDevice(), "bluetoothd stopped answering")
        }
    }
}

/// The guest's adapters and the link configuration Scripts/test-ble-bluez.sh set up.
enum RealBlueZ {
    static let environment = ProcessInfo.processInfo.environment
    static let isAvailable = environment["BLE_VM"] == "1" && environment["SMP_BLE_DEVICE_ADDRESS"] != nil
    static let skipReason: Comment = "needs real BlueZ: runs inside the VM of Scripts/ble-vm.sh (Scripts/test-ble-bluez.sh)"
    static let clientAdapter = environment["SMP_BLE_CLIENT_ADAPTER"] ?? "hci0"
    static let deviceAdapter = environment["SMP_BLE_DEVICE_ADAPTER"] ?? "hci1"
    static let deviceAddress = environment["SMP_BLE_DEVICE_ADDRESS"] ?? ""
    static let clientAddress = environment["SMP_BLE_CLIENT_ADDRESS"] ?? ""
    /// A third controller for a peripheral that comes back at another address (the device's firmware
    /// loader, `smp-sim --ble-loader-adapter`): nil when the guest has only two.
    static let loaderAdapter = environment["SMP_BLE_LOADER_ADAPTER"] ?? "hci2"
    static let loaderAddress = environment["SMP_BLE_LOADER_ADDRESS"]
    /// The longest notification value a BlueZ 5.66 peripheral sends in one piece over an EATT bearer
    /// (seen: a 509-byte answer arrived as 488 + 21 bytes).
    static let eattNotificationPayload = 488
    /// Which tests a link configuration runs (`SMP_BLE_SUITE`).
    enum Suite: String {
        /// Everything (plain ATT at MTU 517).
        case full
        /// BlueZ's default of ATT plus two EATT bearers on both ends. bluetoothd 5.66 sends the writes
        /// of one request over all its bearers, where a short piece overtakes a long one (seen: the
        /// reassembly probe's 1-byte tail reached the device before its 509-byte head in most runs, and
        /// an image upload in 2.4 kB requests stuck at offset 0 after a probe that passed), so smp
        /// sends single writes when the device offers EATT: echo with smp_svr's default and
        /// Bluetooth-overlay buffers, every group, image upload (overlay buffer) and dfu.
        /// The answers' notifications reorder the same way, so file round trips use the default buffer,
        /// whose answers fit one notification; a download from the overlay's buffer (2.4 kB answers)
        /// stalls, and `eattDownloadsOfLongAnswersSayWhy` checks that the error says why and how to fix it.
        case eatt
        /// An echo at smp_svr's buffer and a file round trip (the other ATT MTUs).
        case link
    }
    static let suite = Suite(rawValue: environment["SMP_BLE_SUITE"] ?? "") ?? .full
    /// The ATT MTU both bluetoothd ends offer (`ExchangeMTU`; BlueZ's default 517).
    static let attMTU = Int(environment["SMP_BLE_ATT_MTU"] ?? "") ?? 517
    /// An ATT MTU below what bluetoothd can offer (it cannot go under 48): the device's own
    /// (`smp-sim --ble-mtu`), given to smp as `mtu=` in the URI.
    static let deviceMTU = Int(environment["SMP_BLE_DEVICE_MTU"] ?? "")
    /// The longest write toward the device (a BlueZ peripheral takes at most 509 bytes).
    static var writeLength: Int { min(attMTU - 3, 509) }

    /// Scans (`smp ble scan`, its default time) until the device is seen; the number of scans it took,
    /// nil when five saw nothing.
    static func scansUntilSeen() async throws -> Int? {
        if await knowsDevice() { return 0 }
        for attempt in 1...5 {
            if attempt == 3 {
                // The rig's virtual controllers report an advertiser only when a scan starts, and a scan
                // that joins the rig's running discovery does not start one (seen once in CI: a device
                // BlueZ had just forgotten stayed unseen for five scans): stop the kernel's discovery, so
                // that the next scan starts it afresh.
                _ = try? await ProcessRunner.run(URL(fileURLWithPath: "/usr/bin/btmgmt"), ["--index", String(clientAdapter.dropFirst(3)), "stop-find"], timeout: 30)
            }
            if attempt == 4 {
                // The guest's Linux 6.1 can leave the client's scan off for good: two HCI commands of a
                // scan restart that ran beside a pairing timed out (-110: "Opcode 0x2005 failed", then
                // "0x200b", in the guest's kernel log; seen under a load on every core, while btmon showed
                // both answered at once), and later scans saw nothing. A power cycle resets the
                // controller's and the kernel's scan state.
                print("rig: \(clientAdapter) saw no \(deviceAddress) in 3 scans; powering it off and on")
                await powerCycle(clientAdapter)
            }
            let scan = try await ProcessRunner.run(TestEnvironment.smp, ["ble", "scan", "--adapter", clientAdapter], timeout: 120)
            if scan.stdout.contains(deviceAddress) { return attempt }
        }
        return nil
    }

    /// Powers `adapter` off and on through bluetoothd, and waits (30 s at most) until it is on again.
    static func powerCycle(_ adapter: String) async {
        func setPowered(_ on: Bool) async {
            _ = try? await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/dbus-send"),
                ["--system", "--print-reply", "--dest=org.bluez", "/org/bluez/\(adapter)", "org.freedesktop.DBus.Properties.Set",
                 "string:org.bluez.Adapter1", "string:Powered", "variant:boolean:\(on)"], timeout: 30)
        }
        await setPowered(false)
        await setPowered(true)
        for _ in 0..<300 {
            let powered = try? await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/dbus-send"),
                ["--system", "--print-reply=literal", "--dest=org.bluez", "/org/bluez/\(adapter)", "org.freedesktop.DBus.Properties.Get",
                 "string:org.bluez.Adapter1", "string:Powered"], timeout: 10)
            if powered?.stdout.contains("true") == true { return }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// What each end says when the client does not see the device (for the failure's message): whether
    /// the client's adapter is discovering, which connections each controller holds, and whether the
    /// device's adapter advertises (its advertising instances, and BlueZ's count of active ones).
    static func whyUnseen() async -> String {
        func run(_ tool: String, _ arguments: [String]) async -> String {
            guard let result = try? await ProcessRunner.run(URL(fileURLWithPath: tool), arguments, timeout: 30) else { return "(did not run)" }
            return (result.stdout + result.stderr).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: "; ")
        }
        func property(_ adapter: String, _ interface: String, _ name: String) async -> String {
            await run("/usr/bin/dbus-send", ["--system", "--print-reply=literal", "--dest=org.bluez", "/org/bluez/\(adapter)",
                "org.freedesktop.DBus.Properties.Get", "string:\(interface)", "string:\(name)"])
        }
        let client = String(clientAdapter.dropFirst(3)), device = String(deviceAdapter.dropFirst(3))
        return [
            "client \(clientAdapter) Discovering: \(await property(clientAdapter, "org.bluez.Adapter1", "Discovering"))",
            "client connections: \(await run("/usr/bin/btmgmt", ["--index", client, "con"]))",
            "device connections: \(await run("/usr/bin/btmgmt", ["--index", device, "con"]))",
            "device \(deviceAdapter) ActiveInstances: \(await property(deviceAdapter, "org.bluez.LEAdvertisingManager1", "ActiveInstances"))",
            "device advertising: \(await run("/usr/bin/btmgmt", ["--index", device, "advinfo"]))",
        ].joined(separator: " | ")
    }

    /// The device's object (or that of another address) on the client's adapter.
    static func devicePath(_ address: String = deviceAddress) -> String {
        "/org/bluez/\(clientAdapter)/dev_\(address.replacingOccurrences(of: ":", with: "_"))"
    }

    /// A property of the device's object as `dbus-send` prints it; the run fails when BlueZ has no such device.
    static func deviceProperty(_ name: String, address: String = deviceAddress) async -> ProcessResult? {
        try? await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/dbus-send"),
            ["--system", "--print-reply=literal", "--dest=org.bluez", devicePath(address), "org.freedesktop.DBus.Properties.Get",
             "string:org.bluez.Device1", "string:\(name)"], timeout: 10)
    }

    /// Whether a program holds the device's SMP notifications through AcquireNotify (`NotifyAcquired` of
    /// the SMP characteristic under the device's object on the client's adapter).
    static func smpNotificationsAcquired() async -> Bool {
        guard
            let result = try? await ProcessRunner.run(
                URL(fileURLWithPath: "/usr/bin/busctl"),
                ["--system", "--json=short", "call", "org.bluez", "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"],
                timeout: 10),
            let reply = try? JSONSerialization.jsonObject(with: result.stdoutData) as? [String: Any],
            let objects = (reply["data"] as? [Any])?.first as? [String: Any]
        else { return false }
        let prefix = devicePath() + "/"
        return objects.contains { path, interfaces in
            guard path.hasPrefix(prefix),
                let characteristic = (interfaces as? [String: Any])?["org.bluez.GattCharacteristic1"] as? [String: Any]
            else { return false }
            let uuid = (characteristic["UUID"] as? [String: Any])?["data"] as? String
            let acquired = (characteristic["NotifyAcquired"] as? [String: Any])?["data"] as? Bool
            return uuid?.lowercased() == "da2e7828-fbce-4e01-ae9e-261174997c48" && acquired == true
        }
    }

    /// Whether BlueZ on the client's adapter has the device (then a command connects without scanning).
    static func knowsDevice() async -> Bool { await deviceProperty("Address")?.status == 0 }

    /// Waits until BlueZ on the client's adapter reports the device disconnected (30 s at most).
    static func waitUntilDisconnected(address: String = deviceAddress) async -> Bool {
        for _ in 0..<300 {
            let result = await deviceProperty("Connected", address: address)
            // Gone (BlueZ removed it) or Connected false.
            if let result, result.status != 0 || result.stdout.contains("false") { return true }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return false
    }
}
