#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Remembers across runs whether each Bluetooth LE device reassembles requests written in pieces (the
/// one fact of a `BLEDeviceProfile` that costs a probe), with the SMP buffer size it had then: a device
/// whose `os params` answer another size (new firmware) is probed afresh. A JSON file, written
/// atomically; unreadable or odd entries are ignored.
public struct BLEDeviceMemory: Sendable, Hashable {
    /// The file: an object of device address -> {"buf": N, "reassembly": B, "seen": T}.
    public let file: URL

    public init(file: URL) { self.file = file }

    /// `$XDG_CACHE_HOME/smp/ble-devices.json` (else `~/.cache/...`); nil when `SMP_NO_CACHE` is set or
    /// there is no home.
    public static var standard: BLEDeviceMemory? {
        DeviceCacheFile<Entry>.standardFile(named: "ble-devices.json").map(BLEDeviceMemory.init(file:))
    }

    /// Devices kept; the ones seen longest ago go first.
    public static let capacity = 200

    /// Whether `device` reassembled requests when its SMP buffer was `bufferSize` bytes, if known.
    public func reassembles(_ device: String, bufferSize: Int?) -> Bool? {
        guard let entry = cache.entries()[device], entry.buf == bufferSize else { return nil }
        return entry.reassembly
    }

    /// Records what was learned about `device`. Failures to write are ignored: the memory only saves time.
    public func remember(_ profile: BLEDeviceProfile, for device: String) {
        guard let reassembles = profile.reassembles else { return }
        cache.store(
            Entry(buf: profile.bufferSize, reassembly: reassembles, seen: DeviceCacheFile<Entry>.now),
            for: device, capacity: Self.capacity, seen: \.seen)
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or of another type reads as nil.
    private struct Entry: Codable {
        var buf: Int?
        var reassembly: Bool?
        var seen: Int?

        init(buf: Int?, reassembly: Bool, seen: Int) {
            self.buf = buf
            self.reassembly = reassembly
            self.seen = seen
        }

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            buf = try? container?.decode(Int.self, forKey: .buf)
            reassembly = try? container?.decode(Bool.self, forKey: .reassembly)
            seen = try? container?.decode(Int.self, forKey: .seen)
        }
    }
}
