import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

/// The live view of an upgrade: a state line and a progress bar on a terminal, plain lines otherwise,
/// one JSON object per event with --json.
final class DFUView: @unchecked Sendable {
    let json: Bool
    let verbose: Bool
    /// Put before every line (a device's name in a multi-device run).
    let prefix: String
    private let tty: Bool
    private let lock = NIOLock()
    private let start = Date()
    private var bar: ProgressBar?
    private var barImage: (Int, String)?
    private var lastPlainPercent = -1

    init(json: Bool, verbose: Bool, prefix: String = "", tty: Bool = Terminal.stdoutIsTTY) {
        self.json = json
        self.verbose = verbose
        self.prefix = prefix
        self.tty = tty
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
            if let mode = configuration.bootloaderMode { text += ", bootloader mode \(mode.detailedName) (given)" }
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
                        + (p.bytesPerSecond.map { " at \(Terminal.bytes($0))/s" } ?? ""))
                }
            }
        case .log(let entry):
            switch entry.level {
            case .trace, .debug:
                if verbose { endBar(); Terminal.error("\(prefix)  \(entry.message)") }
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
            if let verified = result.summary.verified { line("verified: \(verified)") }
            if !result.finalImages.isEmpty {
                // A single-app application has no image list: what is shown is what serial recovery listed.
                let fromRecovery = result.summary.serialRecovery && !result.finalImages.contains { $0.active }
                line(fromRecovery ? "MCUboot's serial recovery listed, before the reset:" : "device images:")
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

    private func line(_ text: String) { Terminal.print(prefix + text) }

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
        case .resetIntoFirmwareLoader: "resetting into the firmware loader"
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
        parts.append(s.serialRecovery ? "MCUboot serial recovery (slot 0)" : "bootloader \(s.bootloaderMode.detailedName)")
        if s.didReset { parts.append("reset") }
        parts.append(String(cFormat: "%.1f s", result.duration.seconds))
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

    /// The JSON object of `event`; nil for what is not shown (debug logs without -v).
    func jsonItem(_ event: FirmwareUpgradeEvent) -> CBOR? {
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
                "rate": p.bytesPerSecond.map { .double($0.rounded()) } ?? .null, "t": t,
            ])
        case .log(let entry):
            if (entry.level == .debug || entry.level == .trace) && !verbose { return nil }
            return .textMap(["event": "log", "level": .text(entry.level.rawValue), "message": .text(entry.message), "t": t])
        case .paused(let state):
            return .textMap(["event": "paused", "state": .text(state.rawValue), "t": t])
        case .resumed(let state):
            return .textMap(["event": "resumed", "state": .text(state.rawValue), "t": t])
        case .completed(let result):
            return Self.resultItem(result, t: t)
        case .failed(let state, let error):
            return .textMap([
                "event": "result", "status": "failed", "state": .text(state.rawValue), "kind": .text(error.kind.rawValue),
                "message": .text(error.message), "t": t,
            ])
        case .cancelled(let state):
            return .textMap(["event": "result", "status": "cancelled", "state": .text(state.rawValue), "t": t])
        }
    }

    static func resultItem(_ result: FirmwareUpgradeResult, t: CBOR) -> CBOR {
        let s = result.summary
        return .textMap([
            "event": "result", "status": "success", "mode": .text(DFUCommand.modeName(s.mode)),
            "bootloader_mode": .int(s.bootloaderMode.rawValue), "bootloader_mode_name": .text(s.bootloaderMode.detailedName),
            "reset": .bool(s.didReset), "serial_recovery": .bool(s.serialRecovery),
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
            "verified": s.verified.map { .text($0) } ?? .null,
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
