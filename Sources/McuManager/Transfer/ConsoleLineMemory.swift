#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Remembers the console line limits `LinkProbe` learned, per device, across runs: the next connection
/// checks them with one echo instead of probing again (and a device that takes only Zephyr's defaults
/// is not probed again at all). Each entry keeps the SMP buffer size the device had then (`os params`):
/// a port whose device answers with another one (another board on a reused `/dev/ttyACM0` or pty, new
/// firmware) is probed afresh. A JSON file, written atomically; unreadable or odd entries are ignored.
public struct ConsoleLineMemory: Sendable, Hashable {
    /// The file: an object of device name -> {"line": N, "lines": N, "bursts": N, "buf": N, "seen": T}
    /// ("bursts", the bursts per request frame, may be missing: 1).
    public let file: URL

    public init(file: URL) { self.file = file }

    /// `$XDG_CACHE_HOME/smp/console-lines.json` (else `~/.cache/...`); nil when `SMP_NO_CACHE` is set or
    /// there is no home.
    public static var standard: ConsoleLineMemory? {
        DeviceCacheFile<Entry>.standardFile(named: "console-lines.json").map(ConsoleLineMemory.init(file:))
    }

    /// What was learned for `device`, if anything.
    public func recall(_ device: String) -> LinkLimits.ConsoleLines? {
        recollection(device)?.lines
    }

    /// What was learned for `device` when it had the same SMP buffer size (nil: unknown then and now).
    public func recall(_ device: String, deviceBufferSize: Int?) -> LinkLimits.ConsoleLines? {
        guard let recollection = recollection(device), recollection.bufferSize == deviceBufferSize else { return nil }
        return recollection.lines
    }

    private func recollection(_ device: String) -> (lines: LinkLimits.ConsoleLines, bufferSize: Int?)? {
        guard let entry = cache.entry(for: device), let line = entry.line,
            let lines = entry.lines, (7...65_536).contains(line), (1...1024).contains(lines)
        else { return nil }
        let bursts = entry.bursts.flatMap { (1...64).contains($0) ? $0 : nil } ?? 1
        return (LinkLimits.ConsoleLines(length: line, count: lines, burstsPerFrame: bursts), entry.buf)
    }

    /// Devices kept; the ones seen longest ago go first.
    public static let capacity = 100

    /// Records what was learned for `device`, whose SMP buffer size was `deviceBufferSize`. Failures to
    /// write are ignored: the memory only saves time.
    public func remember(_ lines: LinkLimits.ConsoleLines, deviceBufferSize: Int? = nil, for device: String) {
        cache.store(
            Entry(
                line: lines.length, lines: lines.count, bursts: lines.burstsPerFrame > 1 ? lines.burstsPerFrame : nil,
                buf: deviceBufferSize, seen: DeviceCacheFile<Entry>.now),
            for: device, capacity: Self.capacity, seen: \.seen)
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or not an integer reads as nil.
    private struct Entry: Codable, Sendable {
        var line: Int?
        var lines: Int?
        /// Bursts per request frame, when more than one.
        var bursts: Int?
        /// The device's SMP buffer size when the lines were learned.
        var buf: Int?
        var seen: Int?

        init(line: Int, lines: Int, bursts: Int?, buf: Int?, seen: Int) {
            self.line = line
            self.lines = lines
            self.bursts = bursts
            self.buf = buf
            self.seen = seen
        }

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            line = try? container?.decode(Int.self, forKey: .line)
            lines = try? container?.decode(Int.self, forKey: .lines)
            bursts = try? container?.decode(Int.self, forKey: .bursts)
            buf = try? container?.decode(Int.self, forKey: .buf)
            seen = try? container?.decode(Int.self, forKey: .seen)
        }
    }
}
