import ArgumentParser
import Dispatch
import Foundation
import McuManager
import McuMgrCore
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

            Modes: confirm-only (default: confirm before the reset), test-and-confirm (test boot, then \
            confirm once it runs), test-only (test boot; the next reset reverts it), upload-only (no state \
            change, no reset).

            Bootloader modes (default: asked from the device): swap-scratch, overwrite, swap-move, \
            swap-offset, direct-xip, direct-xip-revert, ram-load, firmware-loader, single-slot, or a number.

            --json prints one JSON object per line: {"event":"state"|"progress"|"log"|"result"|...}.
            """)

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The firmware package: a signed MCUboot image (.bin), a dfu_application.zip, or a SUIT envelope (.suit).")
    var package: String

    @Option(help: ArgumentHelp("confirm-only, test-and-confirm, test-only or upload-only.", valueName: "mode"))
    var mode: String = "confirm-only"

    @Option(help: "Upload chunks in flight at once (default: the device's buf_count - 1).")
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
        try await CommandRunner.run(global) { context in try await upgrade(context) }
    }

    private func upgrade(_ context: CommandContext) async throws {
        let package = try McuMgrPackage(url: try LocalFiles.readable(self.package))
        var resourceData: [String: Data] = [:]
        for resource in resources {
            let parts = resource.split(separator: "=", maxSplits: 1).map(String.init)
            let url = try LocalFiles.readable(parts[1])
            do {
                resourceData[parts[0]] = try Data(contentsOf: url)
            } catch {
                throw McuMgrError(.file, "cannot read \(parts[1]): \(error.localizedDescription)")
            }
        }
        let configuration = FirmwareUpgradeConfiguration(
            upgradeMode: try Self.parseMode(mode),
            bootloaderMode: try bootloaderMode.map(Self.parseBootloaderMode),
            eraseAppSettings: eraseSettings,
            estimatedSwapTime: .milliseconds(Int64(swapTime * 1000)),
            reconnectTimeout: .milliseconds(Int64(reconnectTimeout * 1000)),
            pipelineDepth: pipeline,
            byteAlignment: alignment,
            reassemblyBufferSize: reassemblyBuffer,
            performReset: !noReset)
        let view = DFUView(json: context.json, verbose: global.verbose)
        view.describe(package: package)
        // A board picked by a discovery filter (usb:..., auto) is followed across its resets, even when it
        // comes back under another tty name; other devices are reopened at the same path or address.
        let follower = await ResetFollowing.prepare(context)
        let reconnection = follower.map { followingReconnection($0, context) } ?? Self.reconnection(for: context.uri)
        let manager = FirmwareUpgradeManager(client: context.client, reconnection: reconnection)
        do {
            _ = try await Self.run(
                manager, images: package.images, configuration: configuration, resources: resourceData, view: view)
        } catch {
            await follower?.stop()
            throw error
        }
        await follower?.stop()
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

    /// Runs an upgrade with the live view; SIGINT cancels it (exit 130; a new run resumes the upload).
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
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        interrupt.setEventHandler { manager.cancel() }
        interrupt.resume()
        defer {
            interrupt.cancel()
            signal(SIGINT, SIG_DFL)
        }
        do {
            let result = try await manager.upgrade(images: images, configuration: configuration, resources: resources)
            await printer.value
            return result
        } catch {
            await printer.value
            throw error
        }
    }

    static func reconnection(for uri: McuMgrDeviceURI) -> FirmwareUpgradeReconnection {
        switch uri.scheme {
        case .serial: return .reopen(waitingForPath: uri.target)
        default: return .reopen
        }
    }

    static func parseMode(_ text: String) throws -> FirmwareUpgradeMode {
        switch text.lowercased().replacingOccurrences(of: "_", with: "-") {
        case "confirm-only", "confirmonly", "confirm": return .confirmOnly
        case "test-and-confirm", "testandconfirm": return .testAndConfirm
        case "test-only", "testonly", "test": return .testOnly
        case "upload-only", "uploadonly", "upload": return .uploadOnly
        default:
            throw ValidationError("--mode \(text): use confirm-only, test-and-confirm, test-only or upload-only")
        }
    }

    static let bootloaderModeNames: [(String, BootloaderModeKind)] = [
        ("single-slot", .singleApplicationSlot), ("swap-scratch", .swapUsingScratch), ("overwrite", .overwriteOnly),
        ("swap-move", .swapUsingMove), ("direct-xip", .directXIPWithoutRevert),
        ("direct-xip-revert", .directXIPWithRevert), ("ram-load", .ramLoad), ("firmware-loader", .firmwareLoader),
        ("single-slot-ram-load", .singleSlotRAMLoad), ("swap-offset", .swapUsingOffset),
    ]

    static func parseBootloaderMode(_ text: String) throws -> BootloaderModeKind {
        let key = text.lowercased().replacingOccurrences(of: "_", with: "-")
        if let number = Int(key), (-1...255).contains(number) { return BootloaderModeKind(rawValue: number) }
        let aliases = ["swap-using-scratch": "swap-scratch", "overwrite-only": "overwrite", "swap-using-move": "swap-move",
                       "swap-using-offset": "swap-offset", "directxip": "direct-xip", "directxip-revert": "direct-xip-revert",
                       "single-app": "single-slot", "single-application": "single-slot"]
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

/// The live view of an upgrade: a state line and a progress bar on a terminal, plain lines otherwise,
/// one JSON object per event with --json.
final class DFUView: @unchecked Sendable {
    let json: Bool
    let verbose: Bool
    private let tty = Terminal.stdoutIsTTY
    private let lock = NSLock()
    private let start = Date()
    private var bar: ProgressBar?
    private var barImage: (Int, String)?
    private var lastPlainPercent = -1

    init(json: Bool, verbose: Bool) {
        self.json = json
        self.verbose = verbose
    }

    private var elapsed: Double { Date().timeIntervalSince(start) }

    func describe(package: McuMgrPackage) {
        if json {
            Terminal.print(JSONRendering.render(.textMap([
                "event": "package", "name": .text(package.name), "file": .text(package.fileName),
                "format": .text(package.format.rawValue),
                "images": .array(package.images.map(Self.item)),
            ])))
            return
        }
        line("package \(package.fileName): \(package.images.count) file(s), \(Terminal.bytes(Double(package.totalSize)))")
        for image in package.images {
            var text = "  image \(image.image)"
            if let slot = image.slot { text += " (slot \(slot) build)" }
            text += ": \(image.fileName), \(Terminal.bytes(Double(image.size)))"
            if let version = image.version { text += ", version \(version)" }
            text += ", \(image.contentType == .mcubootImage ? "hash" : "digest") \(image.hashHex)"
            line(text)
        }
    }

    func show(_ event: FirmwareUpgradeEvent) {
        lock.lock()
        defer { lock.unlock() }
        if json {
            if let item = jsonItem(event) { Terminal.print(JSONRendering.render(item)) }
            return
        }
        switch event {
        case .started(_, let configuration):
            var text = "upgrade: mode \(DFUCommand.modeName(configuration.upgradeMode))"
            if let mode = configuration.bootloaderMode { text += ", bootloader mode \(mode) (given)" }
            if !configuration.performReset { text += ", no reset" }
            line(text)
        case .stateChanged(_, let to):
            endBar()
            guard !to.isTerminal else { return }
            line("» \(Self.stateText(to))")
        case .uploadProgress(let p):
            if tty {
                if barImage == nil || barImage! != (p.image, p.fileName) {
                    endBar()
                    bar = ProgressBar(label: "  image \(p.image)", enabled: true)
                    barImage = (p.image, p.fileName)
                    lastPlainPercent = -1
                }
                bar?.update(done: p.bytesSent, total: p.imageSize)
            } else {
                let percent = p.imageSize > 0 ? p.bytesSent * 100 / p.imageSize : 100
                let step = percent / 25 * 25
                if barImage == nil || barImage! != (p.image, p.fileName) {
                    barImage = (p.image, p.fileName)
                    lastPlainPercent = -1
                }
                if step > lastPlainPercent, step > 0 {
                    lastPlainPercent = step
                    line("  image \(p.image): \(percent)% \(Terminal.bytes(Double(p.bytesSent)))/\(Terminal.bytes(Double(p.imageSize)))"
                        + " at \(Terminal.bytes(p.bytesPerSecond))/s")
                }
            }
        case .log(let entry):
            switch entry.level {
            case .trace, .debug:
                if verbose { endBar(); Terminal.error("  \(entry.message)") }
            case .info, .notice:
                endBar()
                line("  \(entry.message)")
            default:
                endBar()
                line("  warning: \(entry.message)")
            }
        case .paused(let state): endBar(); line("paused (\(state))")
        case .resumed(let state): line("resumed (\(state))")
        case .completed(let result):
            endBar()
            line("done: " + Self.summaryText(result))
            if !result.finalImages.isEmpty {
                line("device images:")
                for slot in result.finalImages { line("  " + Self.slotText(slot)) }
            }
        case .failed(let state, _):
            endBar()
            line("failed in state \(state)")
        case .cancelled(let state):
            endBar()
            line("cancelled in state \(state); run the same command again to resume the upload")
        }
    }

    private func line(_ text: String) { Terminal.print(text) }

    private func endBar() {
        bar?.finish()
        bar = nil
        barImage = nil
    }

    static func stateText(_ state: FirmwareUpgradeState) -> String {
        switch state {
        case .none: "not started"
        case .requestMcuMgrParameters: "reading the device's buffer sizes"
        case .bootloaderInfo: "asking the bootloader mode"
        case .eraseAppSettings: "erasing the application settings"
        case .validate: "checking the device's images"
        case .upload: "uploading"
        case .test: "marking for a test boot"
        case .reset: "resetting"
        case .reconnect: "waiting for the device to come back"
        case .confirm: "confirming"
        case .success: "success"
        case .failed: "failed"
        case .cancelled: "cancelled"
        }
    }

    static func summaryText(_ result: FirmwareUpgradeResult) -> String {
        let s = result.summary
        var parts: [String] = []
        parts.append(s.uploadedImages.isEmpty ? "nothing uploaded" : "uploaded image(s) \(s.uploadedImages.map(String.init).joined(separator: ", "))")
        if !s.skippedImages.isEmpty { parts.append("skipped \(s.skippedImages.map(String.init).joined(separator: ", ")) (already on the device)") }
        let resumed = result.images.filter { $0.resumedFrom > 0 }
        for image in resumed { parts.append("image \(image.image) resumed at offset \(image.resumedFrom)") }
        parts.append("bootloader \(s.bootloaderMode)")
        if s.didReset { parts.append("reset") }
        parts.append(String(format: "%.1f s", result.duration.seconds))
        if result.bytesSent > 0, result.uploadDuration.seconds > 0 {
            parts.append("\(Terminal.bytes(Double(result.bytesSent)/result.uploadDuration.seconds))/s upload")
        }
        return parts.joined(separator: ", ")
    }

    static func slotText(_ slot: McuMgrImageStateResponse.ImageSlot) -> String {
        var flags: [String] = []
        if slot.active { flags.append("active") }
        if slot.confirmed { flags.append("confirmed") }
        if slot.pending { flags.append("pending") }
        if slot.permanent { flags.append("permanent") }
        var text = "image \(slot.image) slot \(slot.slot): version \(slot.version)"
        if !flags.isEmpty { text += " " + flags.joined(separator: " ") }
        if let hash = slot.hash { text += " hash \(JSONRendering.hex(Array(hash)).prefix(16))…" }
        return text
    }

    // MARK: JSON

    private func jsonItem(_ event: FirmwareUpgradeEvent) -> CBOR? {
        let t = CBOR.double((elapsed * 1000).rounded() / 1000)
        switch event {
        case .started(_, let c):
            var map: [CBORMapEntry] = [
                .init(key: "event", value: "started"), .init(key: "mode", value: .text(DFUCommand.modeName(c.upgradeMode))),
                .init(key: "reset", value: .bool(c.performReset)),
                .init(key: "swap_time", value: .double(c.estimatedSwapTime.seconds)),
                .init(key: "t", value: t),
            ]
            if let mode = c.bootloaderMode { map.append(.init(key: "bootloader_mode", value: .int(mode.rawValue))) }
            return .map(map)
        case .stateChanged(let from, let to):
            return .textMap(["event": "state", "from": .text(from.rawValue), "to": .text(to.rawValue), "t": t])
        case .uploadProgress(let p):
            return .textMap([
                "event": "progress", "image": .int(p.image), "file": .text(p.fileName), "bytes": .int(p.bytesSent),
                "total": .int(p.imageSize), "all_bytes": .int(p.totalBytesSent), "all_total": .int(p.totalSize),
                "rate": .double(p.bytesPerSecond.rounded()), "t": t,
            ])
        case .log(let entry):
            if (entry.level == .debug || entry.level == .trace) && !verbose { return nil }
            return .textMap(["event": "log", "level": .text(entry.level.rawValue), "message": .text(entry.message), "t": t])
        case .paused(let state):
            return .textMap(["event": "paused", "state": .text(state.rawValue), "t": t])
        case .resumed(let state):
            return .textMap(["event": "resumed", "state": .text(state.rawValue), "t": t])
        case .completed(let result):
            return resultItem(result, t: t)
        case .failed(let state, let error):
            return .textMap([
                "event": "result", "status": "failed", "state": .text(state.rawValue), "kind": .text(error.kind.rawValue),
                "message": .text(error.message), "t": t,
            ])
        case .cancelled(let state):
            return .textMap(["event": "result", "status": "cancelled", "state": .text(state.rawValue), "t": t])
        }
    }

    private func resultItem(_ result: FirmwareUpgradeResult, t: CBOR) -> CBOR {
        let s = result.summary
        return .textMap([
            "event": "result", "status": "success", "mode": .text(DFUCommand.modeName(s.mode)),
            "bootloader_mode": .int(s.bootloaderMode.rawValue), "bootloader_mode_name": .text(s.bootloaderMode.description),
            "reset": .bool(s.didReset),
            "uploaded": .array(s.uploadedImages.map { .int($0) }), "skipped": .array(s.skippedImages.map { .int($0) }),
            "images": .array(result.images.map { image in
                .textMap([
                    "image": .int(image.image), "slot": image.slot.map { .int($0) } ?? .null, "file": .text(image.fileName),
                    "type": .text(image.contentType.rawValue), "hash": .bytes(Array(image.hash)), "len": .int(image.size),
                    "version": image.version.map { .text($0) } ?? .null, "uploaded": .bool(image.uploaded),
                    "resumed_from": .int(image.resumedFrom), "bytes_sent": .int(image.bytesSent),
                    "upload_seconds": .double(image.uploadDuration.seconds),
                ])
            }),
            "final_images": .array(result.finalImages.map(Self.slotItem)),
            "notes": .array(s.notes.map { .text($0) }),
            "bytes_sent": .int(result.bytesSent),
            "seconds": .double(result.duration.seconds), "upload_seconds": .double(result.uploadDuration.seconds),
            "reconnect_seconds": .double(result.reconnectDuration.seconds), "t": t,
        ])
    }

    static func slotItem(_ slot: McuMgrImageStateResponse.ImageSlot) -> CBOR {
        .textMap([
            "image": .int(slot.image), "slot": .int(slot.slot), "version": .text(slot.version),
            "hash": slot.hash.map { .bytes(Array($0)) } ?? .null, "bootable": .bool(slot.bootable),
            "pending": .bool(slot.pending), "confirmed": .bool(slot.confirmed), "active": .bool(slot.active),
            "permanent": .bool(slot.permanent),
        ])
    }

    static func item(_ image: McuMgrPackage.Image) -> CBOR {
        .textMap([
            "image": .int(image.image), "slot": image.slot.map { .int($0) } ?? .null, "file": .text(image.fileName),
            "type": .text(image.contentType.rawValue), "len": .int(image.size),
            "version": image.version.map { .text($0) } ?? .null, "hash": .bytes(Array(image.hash)),
        ])
    }
}
