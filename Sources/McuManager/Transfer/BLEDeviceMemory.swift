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
/// and is trusted for a day, then probed again. It also keeps when this tool last asked BlueZ to
/// disconnect each device (`noteDisconnectRequested`): BlueZ disconnects two seconds after it is asked, and
/// a command that exits without waiting for that tells the next one to wait instead of taking the
/// connection that is about to end. A JSON file, written atomically; unreadable or odd entries are
/// ignored.
public struct BLEDeviceMemory: Sendable, Hashable {
    /// The file: an object of device address -> {"buf": N, "reassembly": B, "unanswered": B, "seen": T,
    /// "disconnect": T} (T: seconds since 1970; "disconnect" with a fraction).
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
        cache.modify(device, capacity: Self.capacity, seen: \.seen) { stored in
            var entry = stored ?? Entry()
            entry.buf = profile.bufferSize
            entry.reassembly = reassembles
            entry.unanswered = profile.piecesArriveOutOfOrder ? true : nil
            entry.seen = now ?? DeviceCacheFile<Entry>.now
            stored = entry
        }
    }

    /// Records that BlueZ was asked to disconnect `device` at `time` (seconds since 1970), without
    /// waiting for it to happen. Failures to write are ignored.
    public func noteDisconnectRequested(_ device: String, at time: Double? = nil) {
        let time = time ?? Date().timeIntervalSince1970
        cache.modify(device, capacity: Self.capacity, seen: \.seen) { stored in
            var entry = stored ?? Entry()
            entry.disconnect = time
            entry.seen = max(entry.seen ?? 0, Int(time))
            stored = entry
        }
    }

    /// When BlueZ was last asked to disconnect `device` (seconds since 1970), if that was recorded.
    public func disconnectRequested(_ device: String) -> Double? {
        cache.entry(for: device)?.disconnect
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or of another type reads as nil.
    private struct Entry: Codable, Sendable {
        var buf: Int?
        var reassembly: Bool?
        var unanswered: Bool?
        var seen: Int?
        var disconnect: Double?

        init() {}

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            buf = try? container?.decode(Int.self, forKey: .buf)
            reassembly = try? container?.decode(Bool.self, forKey: .reassembly)
            unanswered = try? container?.decode(Bool.self, forKey: .unanswered)
            seen = try? container?.decode(Int.self, forKey: .seen)
            disconnect = try? container?.decode(Double.self, forKey: .disconnect)
        }
    }
}
