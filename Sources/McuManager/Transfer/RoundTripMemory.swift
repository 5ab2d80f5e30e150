#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Remembers each device's measured round trip across runs, as Linux's TCP keeps one per destination:
/// a new connection's first requests are then resent after the device's own timeout (smoothed round trip
/// + 4 x variation) instead of the transport's cautious `initialRetransmit`, which on a lossy link made a
/// lost first request cost each short command a quarter of a second. Entries older than a day are ignored
/// (the path to a device changes); the session refines the value with its own samples from the first
/// answer on. A JSON file, written atomically; unreadable or odd entries are ignored. A client uses it
/// when its configuration says so (`McuMgrClient.Configuration.roundTripMemory`).
public struct RoundTripMemory: Sendable, Hashable {
    /// The file: an object of device name -> {"srtt_us": N, "rttvar_us": N, "seen": UNIX seconds}.
    public let file: URL

    public init(file: URL) { self.file = file }

    /// `$XDG_CACHE_HOME/smp/round-trips.json` (else `~/.cache/...`); nil when `SMP_NO_CACHE` is set or
    /// there is no home.
    public static var standard: RoundTripMemory? {
        DeviceCacheFile<Entry>.standardFile(named: "round-trips.json").map(RoundTripMemory.init(file:))
    }

    /// Devices kept; the ones seen longest ago go first. A rig's fleet of boards fits (about 80 bytes each).
    public static let capacity = 1024
    /// How long an entry stays valid.
    public static let lifetime: Duration = .seconds(24 * 3600)

    /// The round trip measured for `device` within `lifetime`, if any.
    public func recall(_ device: String) -> SMPRoundTrip? {
        guard let entry = cache.entry(for: device), let srtt = entry.srtt_us, let rttvar = entry.rttvar_us,
            let seen = entry.seen, (0...10_000_000).contains(srtt), (0...10_000_000).contains(rttvar),
            Int64(DeviceCacheFile<Entry>.now - seen) < Self.lifetime.components.seconds
        else { return nil }
        return SMPRoundTrip(smoothed: .microseconds(srtt), variation: .microseconds(rttvar))
    }

    /// Records what a connection measured. Failures to write are ignored: the memory only saves time.
    /// An entry written within the last hour that the new values are close to (smoothed round trip within
    /// an eighth, variation within a quarter, or 0.5 ms) is kept as it is: most commands end without a
    /// write, which is most of what the memory costs a short command.
    public func remember(_ roundTrip: SMPRoundTrip, for device: String, now: Int? = nil) {
        let now = now ?? DeviceCacheFile<Entry>.now
        let srtt = Int(roundTrip.smoothed.microseconds)
        let rttvar = Int(roundTrip.variation.microseconds)
        if let old = cache.entry(for: device), let oldSRTT = old.srtt_us, let oldVariation = old.rttvar_us,
            let seen = old.seen, (0..<3600).contains(now - seen),
            abs(oldSRTT - srtt) <= max(oldSRTT / 8, 500), abs(oldVariation - rttvar) <= max(oldVariation / 4, 500)
        {
            return
        }
        let entry = Entry(
            srtt_us: srtt, rttvar_us: rttvar, seen: now)
        cache.store(entry, for: device, capacity: Self.capacity, lifetime: Self.lifetime, seen: \.seen)
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or not an integer reads as nil.
    struct Entry: Codable, Sendable {
        var srtt_us: Int?
        var rttvar_us: Int?
        var seen: Int?

        init(srtt_us: Int, rttvar_us: Int, seen: Int) {
            self.srtt_us = srtt_us
            self.rttvar_us = rttvar_us
            self.seen = seen
        }

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            srtt_us = try? container?.decode(Int.self, forKey: .srtt_us)
            rttvar_us = try? container?.decode(Int.self, forKey: .rttvar_us)
            seen = try? container?.decode(Int.self, forKey: .seen)
        }
    }
}

extension Duration {
    /// Whole microseconds.
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}
