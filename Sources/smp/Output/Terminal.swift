#if canImport(Glibc)
import Glibc
#endif
import McuManager
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// Writing to the terminal: plain lines, errors, and a progress bar when stdout is a TTY.
enum Terminal {
    static let stdoutIsTTY = isatty(STDOUT_FILENO) == 1
    static let stderrIsTTY = isatty(STDERR_FILENO) == 1

    static func print(_ text: String) {
        writeUnbuffered(text + "\n", to: STDOUT_FILENO)
    }

    /// Writes `text` to stdout as it is, without a line break.
    static func write(_ text: String) {
        writeUnbuffered(text, to: STDOUT_FILENO)
    }

    static func error(_ text: String) {
        writeUnbuffered(text + "\n", to: STDERR_FILENO)
    }

    /// Whether `--json` is on the command line (before any `--`): then stdout holds JSON alone and
    /// stderr stays silent unless `-v` asks for details.
    static let jsonRequested = options.contains("--json")
    /// Whether `-v`, `-vv` or `--verbose` is on the command line (before any `--`).
    static let verboseRequested = !options.isDisjoint(with: ["-v", "-vv", "-vvv", "--verbose"])
    private static var options: Set<String> { Set(CommandLine.arguments.dropFirst().prefix { $0 != "--" }) }

    /// A warning on stderr; left out under `--json` without `-v`.
    static func warning(_ text: String) {
        if !jsonRequested || verboseRequested { error("warning: " + text) }
    }

    /// The log level without `-v`: warnings, or nothing under `--json`.
    static var quietLogLevel: Logger.Level { jsonRequested ? .critical : .warning }

    /// Human-readable byte count.
    static func bytes(_ n: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var value = n
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(Int(value)) B" : String(cFormat: "%.1f", value) + " " + units[unit]
    }

    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--:--" }
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(cFormat: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(cFormat: "%02d:%02d", s / 60, s % 60)
    }
}

/// `text` cut or padded with spaces to `width` characters, for columns.
func padded(_ text: String, to width: Int) -> String {
    text.count >= width ? String(text.prefix(width)) : text + String(repeating: " ", count: width - text.count)
}

/// A one-line progress bar with rate and ETA, redrawn at most 10 times a second. Silent unless stdout
/// is a terminal. The rate is taken over the last seconds (`TransferRateEstimator`); until the transfer
/// has run long enough to tell, rate and ETA show as `--`.
final class ProgressBar: @unchecked Sendable {
    private let label: String
    private let enabled: Bool
    private let lock = NIOLock()
    private var lastDraw = Date.distantPast
    private let clock = ContinuousClock()
    private let start = ContinuousClock.now
    private var rate = TransferRateEstimator()
    private var drawn = false

    init(label: String, enabled: Bool = Terminal.stdoutIsTTY) {
        self.label = label
        self.enabled = enabled
    }

    func update(done: Int, total: Int) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        rate.record(bytes: done, at: clock.now - start)
        let now = Date()
        guard done >= total || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        let bytesPerSecond = rate.bytesPerSecond
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let width = 30
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let eta = bytesPerSecond.map { $0 > 0 ? Double(total - done) / $0 : .infinity } ?? .infinity
        let percent = String(cFormat: "%3d%%", Int(fraction * 100))
        let line =
            "\r\(label) \(bar) \(percent) \(Terminal.bytes(Double(done)))/\(Terminal.bytes(Double(total))) "
            + "\(bytesPerSecond.map { Terminal.bytes($0) } ?? "--")/s ETA \(Terminal.duration(eta)) "
        writeUnbuffered(line, to: STDOUT_FILENO)
        drawn = true
    }

    /// Ends the bar's line.
    func finish() {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        if drawn { writeUnbuffered("\n", to: STDOUT_FILENO) }
        drawn = false
    }
}
