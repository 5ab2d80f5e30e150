#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

/// The live view of a multi-device run. On a terminal: one line per device, redrawn in place (state,
/// progress bar, result). Otherwise: a line per device and change of state, prefixed with the device's
/// name. With --json: one object per event and line, each with a "device" key.
final class FleetView: @unchecked Sendable {
    private enum Mode {
        case json
        case board(columns: Int)
        case lines
    }

    private struct Row {
        var state = "waiting"
        var bytes: Int?
        var total: Int?
        var progressStart: ContinuousClock.Instant?
        var finished: (error: McuMgrError?, duration: Duration)?
        var lastPercentStep = -1
    }

    private let names: [String]
    private let verbose: Bool
    private let mode: Mode
    private let lock = NIOLock()
    private let clock = ContinuousClock()
    private let start = ContinuousClock.now
    private var rows: [Row]
    private let dfuViews: [DFUView]
    private var drawnLines = 0
    private var lastDraw: ContinuousClock.Instant?
    private let nameWidth: Int

    /// Firmware-upgrade events of a device are shown as `smp dfu` shows them, with the device's name.
    init(names: [String], json: Bool, verbose: Bool) {
        self.names = names
        self.verbose = verbose
        let size = Self.terminalSize()
        if json {
            mode = .json
        } else if Terminal.stdoutIsTTY, names.count + 2 <= size.rows {
            mode = .board(columns: size.columns)
        } else {
            mode = .lines
        }
        rows = Array(repeating: Row(), count: names.count)
        nameWidth = min(40, names.map(\.count).max() ?? 0)
        let plain: Bool
        if case .lines = mode { plain = true } else { plain = false }
        dfuViews = names.map { DFUView(json: json, verbose: verbose, prefix: "[\($0)] ", tty: plain ? false : Terminal.stdoutIsTTY) }
    }

    private var elapsed: Double { ((clock.now - start).seconds * 1000).rounded() / 1000 }

    /// Announces the run.
    func begin(parallel: Int) {
        lock.withLock {
            switch mode {
            case .json:
                Terminal.print(JSONRendering.render(.textMap([
                    "event": "devices", "devices": .array(names.map { .text($0) }), "max_parallel": .int(parallel),
                ])))
            case .board:
                Terminal.print("\(names.count) devices, \(parallel) at a time")
                draw(force: true)
            case .lines:
                Terminal.print("\(names.count) devices, \(parallel) at a time")
            }
        }
    }

    /// Shows one event.
    func show(_ event: McuMgrFleetEvent) {
        lock.withLock {
            let index = event.index
            switch mode {
            case .json: showJSON(event)
            case .lines: showLine(event)
            case .board:
                update(&rows[index], event.kind)
                var force = false
                if case .finished = event.kind { force = true }
                draw(force: force)
            }
        }
    }

    /// Leaves the board's last state on the screen.
    func end() {
        lock.withLock {
            if case .board = mode { draw(force: true) }
        }
    }

    // MARK: JSON

    private func showJSON(_ event: McuMgrFleetEvent) {
        let device = CBORMapEntry(key: "device", value: .text(event.device))
        let t = CBORMapEntry(key: "t", value: .double(elapsed))
        let item: CBOR?
        switch event.kind {
        case .started:
            item = .map([.init(key: "event", value: "begin"), device, t])
        case .progress(let bytes, let total):
            item = .map([
                .init(key: "event", value: "progress"), device, .init(key: "bytes", value: .int(bytes)),
                .init(key: "total", value: .int(total)), t,
            ])
        case .log(let entry):
            if (entry.level == .debug || entry.level == .trace) && !verbose { return }
            item = .map([
                .init(key: "event", value: "log"), device, .init(key: "level", value: .text(entry.level.rawValue)),
                .init(key: "message", value: .text(entry.message)), t,
            ])
        case .upgrade(let upgradeEvent):
            switch upgradeEvent {
            case .completed, .failed, .cancelled: return  // the device's result line says it
            default: break
            }
            guard case .map(var entries)? = dfuViews[event.index].jsonItem(upgradeEvent) else { return }
            entries.insert(device, at: min(1, entries.count))
            item = .map(entries)
        case .finished(let error, let duration):
            // The device's whole result comes at the end, in the devices' order.
            var entries: [CBORMapEntry] = [
                .init(key: "event", value: "finished"), device,
                .init(key: "status", value: .text(error == nil ? "success" : error!.kind == .cancelled ? "cancelled" : "failed")),
            ]
            if let error { entries.append(.init(key: "kind", value: .text(error.kind.rawValue))) }
            entries.append(.init(key: "device_seconds", value: .double((duration.seconds * 1000).rounded() / 1000)))
            entries.append(t)
            item = .map(entries)
        }
        if let item { Terminal.print(JSONRendering.render(item)) }
    }

    // MARK: Lines

    private func showLine(_ event: McuMgrFleetEvent) {
        let name = event.device
        switch event.kind {
        case .started:
            Terminal.print("[\(name)] started")
        case .progress(let bytes, let total):
            let percent = total > 0 ? bytes * 100 / total : 100
            let step = percent / 25 * 25
            if step > rows[event.index].lastPercentStep, step > 0 {
                rows[event.index].lastPercentStep = step
                Terminal.print("[\(name)] \(percent)% \(Terminal.bytes(Double(bytes)))/\(Terminal.bytes(Double(total)))")
            }
        case .log(let entry):
            if (entry.level == .debug || entry.level == .trace) && !verbose { return }
            Terminal.print("[\(name)] \(entry.message)")
        case .upgrade(let upgradeEvent):
            dfuViews[event.index].show(upgradeEvent)
        case .finished(let error, let duration):
            let time = String(cFormat: "%.1f s", duration.seconds)
            if let error {
                Terminal.print("[\(name)] \(error.kind == .cancelled ? "cancelled" : "FAILED") after \(time): \(error.message)")
            } else {
                Terminal.print("[\(name)] ok (\(time))")
            }
        }
    }

    // MARK: Board

    private func update(_ row: inout Row, _ kind: McuMgrFleetEvent.Kind) {
        switch kind {
        case .started:
            row.state = "connecting"
        case .progress(let bytes, let total):
            if row.progressStart == nil { row.progressStart = clock.now }
            row.state = "uploading"
            row.bytes = bytes
            row.total = total
        case .log:
            break
        case .upgrade(let event):
            switch event {
            case .stateChanged(_, let to):
                if !to.isTerminal { row.state = DFUView.stateText(to) }
                if to != .upload { row.bytes = nil }
            case .uploadProgress(let p):
                if row.progressStart == nil { row.progressStart = clock.now }
                row.bytes = p.totalBytesSent
                row.total = p.totalSize
            case .paused: row.state = "paused"
            default: break
            }
        case .finished(let error, let duration):
            row.finished = (error, duration)
        }
    }

    private func draw(force: Bool) {
        guard case .board(let columns) = mode else { return }
        let now = clock.now
        if !force, let lastDraw, now - lastDraw < .milliseconds(100) { return }
        lastDraw = now
        var out = drawnLines > 0 ? "\u{1B}[\(drawnLines)A" : ""
        for (name, row) in zip(names, rows) {
            out += "\r\u{1B}[2K" + String(rowText(name, row).prefix(max(20, columns - 1))) + "\n"
        }
        drawnLines = rows.count
        Terminal.write(out)
    }

    private func rowText(_ name: String, _ row: Row) -> String {
        let head = padded(name, to: nameWidth) + "  "
        if let (error, duration) = row.finished {
            let time = String(cFormat: "%.1f s", duration.seconds)
            guard let error else { return head + "ok      \(time)" }
            return head + (error.kind == .cancelled ? "cancelled " : "FAILED  ") + "\(time)  \(error.message)"
        }
        var text = head + padded(row.state, to: 36)
        if let bytes = row.bytes, let total = row.total, total > 0 {
            let fraction = min(1, Double(bytes) / Double(total))
            let width = 20
            let filled = Int(fraction * Double(width))
            text += " " + String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            text += String(cFormat: " %3d%% ", Int(fraction * 100))
                + "\(Terminal.bytes(Double(bytes)))/\(Terminal.bytes(Double(total)))"
            if let started = row.progressStart {
                let seconds = (clock.now - started).seconds
                if seconds >= 1 { text += " \(Terminal.bytes(Double(bytes) / seconds))/s" }
            }
        }
        return text
    }

    /// Rows and columns of the terminal on stdout ($LINES/$COLUMNS, else 24 x 80, when it cannot tell).
    private static func terminalSize() -> (rows: Int, columns: Int) {
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0, size.ws_col > 0 {
            return (Int(size.ws_row), Int(size.ws_col))
        }
        let environment = ProcessInfo.processInfo.environment
        return (environment["LINES"].flatMap(Int.init) ?? 24, environment["COLUMNS"].flatMap(Int.init) ?? 80)
    }
}
