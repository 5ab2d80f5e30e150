#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Remembers across runs whether each Bluetooth LE device reassembles requests written in pieces (the
/// one fact of a `BLEDeviceProfile` that costs a probe), with the SMP buffer size it had then: a device
/// whose `os params` answer another size (new firmware) is probed afresh. A probe that went unanswered
/// (pieces out of order on the link, as with BlueZ's EATT) is a fact of the link more than of the device
/// and is trusted for a day, then probed again. A JSON file, written atomically; unreadable or odd
/// entries are ignored.
public struct BLEDeviceMemory: Sendable, Hashable {
    /// The file: an object of device address -> {"buf": N, "reassembly": B, "unanswered": B, "seen": T}.
    public let file: URL

    public init(file: URL) { self.file = file }

    /// `$XDG_CACHE_HOME/smp/ble-devices.json` (else `~/.cache/...`); nil when `SMP_NO_CACHE` is set or
    /// there is no home.
    public static var standard: BLEDeviceMemory? {
        DeviceCacheFile<Entry>.standardFile(named: "ble-devices.json").map(BLEDeviceMemory.init(file:))
    }

    /// Devices kept; the ones seen longest ago go first.
    public static let capacity = 200

    /// How long an unanswered probe is trusted.
    public static let unansweredLifetime = 24 * 3600

    /// What was learned about `device` when its SMP buffer was `bufferSize` bytes, if known: whether
    /// requests may be written in pieces, and whether that is because pieces went unanswered.
    public func recall(_ device: String, bufferSize: Int?, now: Int? = nil) -> (reassembles: Bool, piecesArriveOutOfOrder: Bool)? {
        guard let entry = cache.entry(for: device), entry.buf == bufferSize, let reassembles = entry.reassembly else { return nil }
        let unanswered = entry.unanswered ?? false
        if unanswered, (now ?? DeviceCacheFile<Entry>.now) - (entry.seen ?? 0) > Self.unansweredLifetime { return nil }
        return (reassembles, unanswered)
    }

    /// Records what was learned about `device`. Failures to write are ignored: the memory only saves time.
    public func remember(_ profile: BLEDeviceProfile, for device: String, now: Int? = nil) {
        guard let reassembles = profile.reassembles else { return }
        cache.store(
            Entry(buf: profile.bufferSize, reassembly: reassembles, unanswered: profile.piecesArriveOutOfOrder ? true : nil, seen: now ?? DeviceCacheFile<Entry>.now),
            for: device, capacity: Self.capacity, seen: \.seen)
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or of another type reads as nil.
    private struct Entry: Codable, Sendable {
        var buf: Int?
        var reassembly: Bool?
        var unanswered: Bool?
        var seen: Int?

        init(buf: Int?, reassembly: Bool, unanswered: Bool?, seen: Int) {
            self.buf = buf
            self.reassembly = reassembly
            self.unanswered = unanswered
            self.seen = seen
        }

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            buf = try? container?.decode(Int.self, forKey: .buf)
            reassembly = try? container?.decode(Bool.self, forKey: .reassembly)
            unanswered = try? container?.decode(Bool.self, forKey: .unanswered)
            seen = try? container?.decode(Int.self, forKey: .seen)
        }
    }
}
