import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore
import McuMgrBLE
import McuMgrDiscovery

#if canImport(Glibc)
import Glibc
#endif

/// `smp dfu PACKAGE`: a whole firmware upgrade.
struct DFUCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dfu",
        abstract: "Upgrade the device's firmware from a package (.bin, dfu_application.zip, .suit).",
        discussion: """
            Reads the device's buffers and bootloader mode, skips images the device already has, uploads \
            (pipelined; an interrupted upload resumes from the device's offset when run again), marks the \
            images for test or confirm, resets, waits for the swap, reconnects (a serial port that vanishes \
            is reopened when it comes back), checks that the device runs the new images, and confirms them \
            (test-and-confirm).

            Slots: an application's upload goes to the secondary slot (slot 1 of image 0; the inactive \
            slot for Direct-XIP and RAM load), and MCUboot swaps it in on the reset. A device in MCUboot's \
            serial recovery (no application runs: it reports no bootloader info and an empty image list) \
            takes the image in slot 0, the primary slot, and has no test or confirm: smp uploads, resets, \
            and checks that the application then runs the uploaded image. With firmware-loader it first \
            resets into the loader, uploads to slot 0, and resets.

            Firmware loader (bootloader mode 7, nRF Connect SDK's MCUboot firmware updater mode): the \
            application cannot write its own slot, so smp asks it to store the name its loader is to \
            advertise (settings fw_loader/adv_name, then save; --loader-name, over Bluetooth LE a fresh \
            FL_xxxxxx name when not given), resets it with boot_mode 1, finds the loader within \
            --reconnect-timeout, uploads the image to slot 0, resets, and checks that the application \
            comes back running the uploaded hash. Over serial and UDP the loader answers on the same port. \
            Over Bluetooth LE it is another peripheral: smp looks for it by its advertised name (it may \
            have another address), and for the application again by its address or name.

            Single-application MCUboot (bootloader mode 0, single-app): the application has no image group \
            (Zephyr builds none in this mode), so smp resets it into MCUboot's serial recovery (os reset, \
            boot_mode 1; the application needs CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE), uploads to slot 0, \
            reads recovery's image list to check slot 0 holds the uploaded hash, resets, and checks that \
            the application answers again (it cannot report its hash; recovery would answer the image \
            list). smp takes this path when the device reports mode 0 and has no image list, or when \
            given --bootloader-mode single-app. There is no test boot: the new image is permanent.

            Modes: confirm-only (default: confirm before the reset), test-and-confirm (test boot, then \
            confirm once it runs), test-only (test boot; the next reset reverts it), upload-only (no state \
            change, no reset).

            Bootloader modes (default: asked from the device): swap-scratch, overwrite, swap-move, \
            swap-offset, direct-xip, direct-xip-revert, ram-load, firmware-loader, single-app (also \
            single-slot), single-slot-ram-load, or a number.

            --json prints one JSON object per line: {"event":"state"|"progress"|"log"|"result"|...}.

            Many devices: give --device several times, --devices FILE (one URI or filter per line; blank \
            lines and # comments are left out; - reads standard input), or a discovery filter with all \
            (usb:2fe3?all: every matching board; auto?all: every port that answers SMP). Each device gets \
            its own link, session, progress and result; at most --max-parallel of them (default: all, at \
            most 64) are worked on at once, and a board that goes silent or vanishes fails on its own \
            --timeout without holding up the others. On a terminal one line per device is redrawn; \
            otherwise every line starts with [DEVICE]. At the end a table (device, result, time, detail) \
            goes to stdout and each failed device with its reason to stderr. With --json every event \
            carries "device", then one {"event":"result","device":...} per device and a \
            {"event":"summary",...}. --junit FILE writes a JUnit XML report (testsuite "smp dfu", one \
            testcase per device, a failure's type is its kind). Exit status: 0 when every device \
            succeeded; the failures' exit code when they all share one (e.g. 75: all timed out); else 1; \
            130 when interrupted. image upload, fs upload, os echo and os reset take many devices the same \
            way; the other commands take one. Given one --device (no --devices file, no filter with all), \
            smp dfu works and prints as it always has.
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var fleet: FleetOptions

    @Argument(help: "The firmware package: a signed MCUboot image (.bin), a dfu_application.zip, or a SUIT envelope (.suit).")
    var package: String

    @Option(help: ArgumentHelp("confirm-only, test-and-confirm, test-only or upload-only.", valueName: "mode"))
    var mode: String = "confirm-only"

    @Option(help: "Upload chunks in flight at once, at most what the device's buffers take (default: buf_count - 1, over UDP buf_count / 2).")
    var pipeline: Int?

    @Option(help: "Round chunk sizes down to a multiple of this (1, 2, 4, 8, 16).")
    var alignment: Int = 1

    @Flag(help: "Erase the application's settings (Zephyr basic group) after the upload.")
    var eraseSettings = false

    @Option(help: ArgumentHelp("Seconds the device needs after the reset to swap images before it answers.", valueName: "seconds"))
    var swapTime: Double = 0

    @Flag(help: "Do not reset: upload and mark the images; the device installs them on its next reset.")
    var noReset = false

    @Option(help: ArgumentHelp("Use this bootloader mode instead of asking the device.", valueName: "mode"))
    var bootloaderMode: String?

    @Option(help: ArgumentHelp("Seconds to keep trying to reach the device after the reset.", valueName: "seconds"))
    var reconnectTimeout: Double = 60

    @Option(help: ArgumentHelp("The SMP message size the device reassembles (default: its buf_size).", valueName: "bytes"))
    var reassemblyBuffer: Int?

    @Option(
        name: .customLong("resource"),
        help: ArgumentHelp("A SUIT resource the device may ask for, as NAME=PATH (repeatable).", valueName: "name=path"))
    var resources: [String] = []

    @Option(help: ArgumentHelp(
        "Firmware-loader mode: the name the loader advertises over Bluetooth LE, stored by the application (fw_loader/adv_name) before the reset into it and looked for afterwards (default over BLE: a fresh FL_xxxxxx). Keep it short: loaders store few bytes (one nRF Connect SDK Bare Metal revision 15).",
        valueName: "name"))
    var loaderName: String?

    @Flag(help: "Show the package and what it holds, without a device.")
    var dryRun = false

    func validate() throws {
        _ = try Self.parseMode(mode)
        if let bootloaderMode { _ = try Self.parseBootloaderMode(bootloaderMode) }
        if let pipeline, !(1...32).contains(pipeline) { throw ValidationError("--pipeline must be 1...32") }
        guard [1, 2, 4, 8, 16].contains(alignment) else { throw ValidationError("--alignment must be 1, 2, 4, 8 or 16") }
        guard swapTime >= 0, swapTime <= 3600 else { throw ValidationError("--swap-time must be 0...3600 seconds") }
        guard reconnectTimeout > 0, reconnectTimeout <= 3600 else {
            throw ValidationError("--reconnect-timeout must be between 0 and 3600 seconds")
        }
        if let reassemblyBuffer, !(64...65535).contains(reassemblyBuffer) {
            throw ValidationError("--reassembly-buffer must be 64...65535 bytes")
        }
        if let loaderName, !(1...29).contains(loaderName.utf8.count) {
            // A legacy advertisement's name field holds at most 29 bytes (31 less the length and type bytes);
            // what a loader stores varies (sdk-nrf-bm's subsys/settings/src/ble_name_v2.c kept 15 bytes, its later
            // subsys/storage/ble_rmem BLE_RMEM_MAX_NAME_SIZE), so only the advertisement's bound is checked here.
            throw ValidationError("--loader-name must be 1...29 bytes (it goes into the loader's advertisement)")
        }
        for resource in resources where !resource.contains("=") {
            throw ValidationError("--resource \(resource): give NAME=PATH, e.g. --resource app.bin=build/app.bin")
        }
    }

    func run() async throws {
        if dryRun {
            do {
                let package = try McuMgrPackage(url: try LocalFiles.readable(self.package))
                DFUView(json: global.json, verbose: global.verbose).describe(package: package)
            } catch let error as McuMgrError {
                CommandRunner.report(error, json: global.json)
                throw ExitCode(ExitStatus.code(for: error.kind))
            }
            return
        }
        let texts = try DeviceList.textsOrExit(global)
        if DeviceList.isFleet(global, texts: texts) {
            try await upgradeFleet()
            return
        }
        try await FleetRunner.runSingle(command: "smp dfu", global: global, options: fleet) { context in
            try await upgrade(context)
        }
    }

    /// The SUIT resources named with --resource, read.
    private func resourceData() throws -> [String: Data] {
        var resourceData: [String: Data] = [:]
        for resource in resources {
            let parts = resource.split(separator: "=", maxSplits: 1).map(String.init)
            let url = try LocalFiles.readable(parts[1])
            do {
                resourceData[parts[0]] = try Data(contentsOf: url)
            } catch {
                throw McuMgrError(.file, "cannot read \(parts[1]): \(describeFileError(error))")
            }
        }
        return resourceData
    }

    private func upgradeConfiguration(loaderName: String? = nil) throws -> FirmwareUpgradeConfiguration {
        FirmwareUpgradeConfiguration(
            upgradeMode: try Self.parseMode(mode),
            bootloaderMode: try bootloaderMode.map(Self.parseBootloaderMode),
            eraseAppSettings: eraseSettings,
            estimatedSwapTime: .milliseconds(Int64(swapTime * 1000)),
            reconnectTimeout: .milliseconds(Int64(reconnectTimeout * 1000)),
            pipelineDepth: pipeline,
            byteAlignment: alignment,
            reassemblyBufferSize: reassemblyBuffer,
            performReset: !noReset,
            firmwareLoaderName: loaderName ?? self.loaderName)
    }

    /// The name a firmware loader reached over Bluetooth LE is asked to advertise when --loader-name is not
    /// given. Nordic's iOS library makes one from the time of day (FL_ and hours, minutes, seconds); random
    /// digits keep two devices upgraded in the same second apart.
    static func generatedLoaderName() -> String {
        let digits = Array("0123456789ABCDEF")
        return "FL_" + String((0..<6).map { _ in digits[Int.random(in: 0..<16)] })
    }

    /// The upgrade of many devices at once (`McuMgrFleet.upgrade`), each with its own session.
    private func upgradeFleet() async throws {
        let package: McuMgrPackage
        let resources: [String: Data]
        let configuration: FirmwareUpgradeConfiguration
        do {
            package = try McuMgrPackage(url: try LocalFiles.readable(self.package))
            resources = try resourceData()
            configuration = try upgradeConfiguration()
        } catch let error as McuMgrError {
            CommandRunner.report(error, json: global.json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        }
        let upload = global.uploadConfiguration()
        let options = FirmwareUpgradeManager.Options(firstChunkTimeout: upload.firstChunkTimeout, chunkTimeout: upload.chunkTimeout)
        let json = global.json
        let verbose = global.verbose
        try await FleetRunner.run(
            command: "smp dfu", global: global, options: fleet, resets: true,
            before: { DFUView(json: json, verbose: verbose).describe(package: package) },
            work: { fleet, _ in
                await fleet.upgrade(images: package.images, configuration: configuration, options: options, resources: resources)
            },
            outcome: { result in
                var fields: [CBORMapEntry] = []
                if case .map(let entries) = DFUView.resultItem(result, t: .null) {
                    fields = entries.filter { !["event", "status", "t"].contains($0.key.string ?? "") }
                }
                var summary = DFUView.summaryText(result)
                if let active = result.finalImages.first(where: { $0.active && $0.image == 0 }) {
                    summary += ", runs \(active.version)"
                }
                return FleetOutcome(summary: summary, fields: fields)
            })
    }

    private func upgrade(_ context: CommandContext) async throws {
        let package = try McuMgrPackage(url: try LocalFiles.readable(self.package))
        let resourceData = try resourceData()
        let bluetooth = context.client.transport as? McuMgrBleTransport
        let configuration = try upgradeConfiguration(loaderName: bluetooth != nil && loaderName == nil ? Self.generatedLoaderName() : nil)
        let view = DFUView(json: context.json, verbose: global.verbose)
        view.describe(package: package)
        // A board picked by a discovery filter (usb:..., auto) is followed across its resets, even when it
        // comes back under another tty name; other devices are reopened at the same path or address.
        let follower = await ResetFollowing.prepare(context)
        let reconnection =
            follower.map { followingReconnection($0, context) }
            ?? bluetooth.map { Self.bluetoothReconnection(original: $0, verbose: global.verbose) }
            ?? Self.reconnection(for: context.uri)
        // --timeout, when given, is the longest wait for every chunk, the first (erase) one included.
        let upload = global.uploadConfiguration()
        let manager = FirmwareUpgradeManager(
            client: context.client, reconnection: reconnection,
            options: FirmwareUpgradeManager.Options(firstChunkTimeout: upload.firstChunkTimeout, chunkTimeout: upload.chunkTimeout))
        do {
            _ = try await Self.run(
                manager, images: package.images, configuration: configuration, resources: resourceData, view: view)
        } catch {
            await Self.closeReplacedClient(of: manager, context)
            await follower?.stop()
            throw error
        }
        await Self.closeReplacedClient(of: manager, context)
        await follower?.stop()
    }

    /// Closes the manager's client when it is not the command's own (which `CommandRunner` closes): an
    /// upgrade that ended on the firmware loader's link (another Bluetooth LE peripheral) would leave
    /// that device connected, and a connected device does not advertise to the next command.
    static func closeReplacedClient(of manager: FirmwareUpgradeManager, _ context: CommandContext) async {
        let current = await manager.client
        if current !== context.client { await current.close() }
    }

    /// Reopens the followed board wherever it came back, with the same serial options.
    private func followingReconnection(_ follower: DeviceFollower, _ context: CommandContext) -> FirmwareUpgradeReconnection {
        let options = context.uri.options
        let verbose = global.verbose
        let timeout = Duration.milliseconds(Int64(reconnectTimeout * 1000))
        let logger = DiscoveryOptions.logger(verbose: verbose)
        return .factory {
            let device = try await follower.reconnected(within: timeout)
            if verbose { Terminal.error("device: back at serial:\(device.path) after the reset") }
            return try DeviceResolver.transport(
                for: McuMgrDeviceURI(scheme: .serial, target: device.path, options: options), logger: logger)
        }
    }

    /// Runs an upgrade with the live view; cancelling the task (SIGINT/SIGTERM, see `Interruption`)
    /// cancels the upgrade (exit 130; a new run resumes the upload).
    static func run(
        _ manager: FirmwareUpgradeManager, images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration,
        resources: [String: Data] = [:], view: DFUView
    ) async throws -> FirmwareUpgradeResult {
        let events = manager.events()
        let printer = Task {
            for await event in events {
                view.show(event)
                switch event {
                case .completed, .failed, .cancelled: return
                default: continue
                }
            }
        }
        do {
            let result = try await withTaskCancellationHandler {
                try await manager.upgrade(images: images, configuration: configuration, resources: resources)
            } onCancel: {
                manager.cancel()
            }
            await printer.value
            return result
        } catch {
            await printer.value
            throw error
        }
    }

    /// Bluetooth LE: the application is reconnected by the address or name it was reached by; a firmware
    /// loader is another peripheral (the nRF Connect SDK loader is a separate image with its own Bluetooth
    /// identity, often another address), found by the name the application stored for it.
    static func bluetoothReconnection(original: McuMgrBleTransport, verbose: Bool) -> FirmwareUpgradeReconnection {
        let logger = DiscoveryOptions.logger(verbose: verbose)
        return FirmwareUpgradeReconnection(targeting: { previous, target in
            let wanted: McuMgrBleTransport.Configuration.Target
            switch target {
            case .application:
                wanted = original.configuration.target
            case .firmwareLoader(let name?):
                wanted = .name(name)
            case .firmwareLoader(nil):
                throw McuMgrError(
                    .usage, "the device reset into its firmware loader, which is another Bluetooth LE peripheral: give the name it advertises with --loader-name")
            }
            if let ble = previous as? McuMgrBleTransport, ble.configuration.target == wanted { return previous }
            if wanted == original.configuration.target { return original }
            if verbose { Terminal.error("device: looking for \(target) as ble:\(wanted)") }
            var configuration = original.configuration
            configuration.target = wanted
            let transport = McuMgrBleTransport(
                configuration: configuration, logger: logger, deviceMemory: original.deviceMemory, pairing: original.pairing)
            // Found here, while the upgrade waits for it: a loader that boots or starts advertising later
            // than one scan (or whose first advertisement BlueZ missed) is looked for again until the
            // reconnect timeout, instead of failing the upload's first request.
            let found = try await transport.locate()
            if verbose { Terminal.error("device: found \(target) at \(found.label)") }
            return transport
        })
    }

    static func reconnection(for uri: McuMgrDeviceURI) -> FirmwareUpgradeReconnection {
        switch uri.scheme {
        case .serial: return .reopen(waitingForPath: uri.target)
        default: return .reopen
        }
    }

    static func parseMode(_ text: String) throws -> FirmwareUpgradeMode {
        switch text.lowercased().replacing("_", with: "-") {
        case "confirm-only", "confirmonly", "confirm": return .confirmOnly
        case "test-and-confirm", "testandconfirm": return .testAndConfirm
        case "test-only", "testonly", "test": return .testOnly
        case "upload-only", "uploadonly", "upload": return .uploadOnly
        default:
            throw ValidationError("--mode \(text): use confirm-only, test-and-confirm, test-only or upload-only")
        }
    }

    static let bootloaderModeNames: [(String, BootloaderMode)] = [
        ("single-app", .singleApplication), ("swap-scratch", .swapUsingScratch), ("overwrite", .overwrite),
        ("swap-move", .swapWithoutScratch), ("direct-xip", .directXIPWithoutRevert),
        ("direct-xip-revert", .directXIPWithRevert), ("ram-load", .ramLoad), ("firmware-loader", .firmwareLoader),
        ("single-slot-ram-load", .singleSlotRAMLoad), ("swap-offset", .swapUsingOffset),
    ]

    static func parseBootloaderMode(_ text: String) throws -> BootloaderMode {
        let key = text.lowercased().replacing("_", with: "-")
        if let number = Int(key), (-1...255).contains(number) { return BootloaderMode(rawValue: number) }
        let aliases = ["swap-using-scratch": "swap-scratch", "overwrite-only": "overwrite", "swap-using-move": "swap-move",
                       "swap-using-offset": "swap-offset", "directxip": "direct-xip", "directxip-revert": "direct-xip-revert",
                       "single-slot": "single-app", "single-application": "single-app"]
        let name = aliases[key] ?? key
        if let mode = bootloaderModeNames.first(where: { $0.0 == name })?.1 { return mode }
        throw ValidationError(
            "--bootloader-mode \(text): use \(bootloaderModeNames.map(\.0).joined(separator: ", ")), or a number")
    }

    static func modeName(_ mode: FirmwareUpgradeMode) -> String {
        switch mode {
        case .confirmOnly: "confirm-only"
        case .testAndConfirm: "test-and-confirm"
        case .testOnly: "test-only"
        case .uploadOnly: "upload-only"
        }
    }
}
