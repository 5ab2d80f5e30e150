#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Remembers each device's SMP buffers (`os params`: `buf_size`, `buf_count`) across runs, which of
/// its file uploads are unfinished, and the file hash type it answers (a device without SHA-256 is asked
/// for CRC-32 at once: one round trip, not three; a refusal finds its types again), so that a known device's transfers cost only their chunks and one
/// verification (the round-trip budget in the "Transfers" section of the FirmwareUpgrade article):
/// - an upload to a known device sends no `os params`: the remembered buffers size the chunks and the
///   window. The device's answer to the first chunk, which goes alone and is as large as a chunk gets,
///   proves the buffer size again; a first chunk that goes unanswered or is refused for its size
///   (`rc` 2 ENOMEM, 7 EMSGSIZE, 9 ECORRUPT: other firmware behind the same address) makes the upload
///   forget the entry, ask the device and start again;
/// - a file upload records the remote path as unfinished before its first chunk and clears it when it
///   has been verified. On a known device the resume check (close, status, hash of what the device holds:
///   three round trips) runs only for a path recorded as unfinished; a device that is not known (no entry,
///   or older than `lifetime`) is checked as before.
/// Entries older than `lifetime` are ignored (new firmware, another board on a reused address). A JSON
/// file, written atomically; unreadable or odd entries are ignored. Transfers use it when their client's
/// configuration says so (`McuMgrClient.Configuration.parametersMemory`).
public struct DeviceParametersMemory: Sendable, Hashable {
    /// The file: an object of device name -> {"buf": N, "count": N, "uploads": {PATH: BYTES}, "hash": TYPE, "seen": T}.
    public let file: URL

    public init(file: URL) { self.file = file }

    /// `$XDG_CACHE_HOME/smp/device-params.json` (else `~/.cache/...`); nil when `SMP_NO_CACHE` is set or
    /// there is no home.
    public static var standard: DeviceParametersMemory? {
        DeviceCacheFile<Entry>.standardFile(named: "device-params.json").map(DeviceParametersMemory.init(file:))
    }

    /// Devices kept; the ones seen longest ago go first.
    public static let capacity = 1024
    /// How long an entry stays valid (as `RoundTripMemory`'s).
    public static let lifetime: Duration = .seconds(24 * 3600)

    /// The device's buffers, as remembered.
    public struct Parameters: Sendable, Hashable {
        /// `buf_size`: the largest SMP packet the device takes, header included.
        public var bufferSize: Int
        /// `buf_count`.
        public var bufferCount: Int
        public init(bufferSize: Int, bufferCount: Int) {
            self.bufferSize = bufferSize
            self.bufferCount = bufferCount
        }
    }

    /// Whether `device` has an entry within `lifetime` (it was seen by a transfer lately).
    public func knows(_ device: String, now: Int? = nil) -> Bool { entry(device, now: now) != nil }

    /// The buffers remembered for `device`, if any within `lifetime`.
    public func recall(_ device: String, now: Int? = nil) -> Parameters? {
        guard let entry = entry(device, now: now), let buf = entry.buf, let count = entry.count,
            (SMPHeader.size + 1...65_535).contains(buf), (1...64).contains(count)
        else { return nil }
        return Parameters(bufferSize: buf, bufferCount: count)
    }

    /// Records `device`'s buffers (keeps its unfinished uploads). Failures to write are ignored.
    public func remember(_ parameters: Parameters, for device: String, now: Int? = nil) {
        update(device, now: now) {
            $0.buf = parameters.bufferSize
            $0.count = parameters.bufferCount
        }
    }

    /// Forgets `device`'s buffers (its answers no longer fit them); keeps its unfinished uploads.
    public func forgetParameters(of device: String) {
        guard cache.entry(for: device) != nil else { return }
        cache.modify(device, capacity: Self.capacity, lifetime: Self.lifetime, seen: \.seen) {
            $0?.buf = nil
            $0?.count = nil
        }
    }

    /// The hash type (`sha256` or `crc32`) `device` answered a file hash with, if remembered.
    public func recallHashType(of device: String, now: Int? = nil) -> String? {
        guard let type = entry(device, now: now)?.hash, type == "sha256" || type == "crc32" else { return nil }
        return type
    }

    /// Records the hash type `device` answered with (nil forgets it).
    public func rememberHashType(_ type: String?, for device: String, now: Int? = nil) {
        update(device, now: now) { $0.hash = type }
    }

    /// Whether an upload of `path` to `device` was begun and not finished.
    public func hasUnfinishedUpload(of path: String, to device: String, now: Int? = nil) -> Bool {
        entry(device, now: now)?.uploads?[path] != nil
    }

    /// Records that an upload of `bytes` to `path` begins (before its first chunk).
    public func beginUpload(of path: String, bytes: Int, to device: String, now: Int? = nil) {
        update(device, now: now) {
            var uploads = $0.uploads ?? [:]
            uploads[path] = bytes
            // A device keeps few files: past 16 paths never finished, only this one is kept (the others
            // are then sent whole, as to a device seen for the first time).
            if uploads.count > 16 { uploads = [path: bytes] }
            $0.uploads = uploads
        }
    }

    /// Records that the upload of `path` finished (verified, or the device's copy checked).
    public func finishUpload(of path: String, to device: String, now: Int? = nil) {
        guard hasUnfinishedUpload(of: path, to: device, now: now) || !knows(device, now: now) else { return }
        update(device, now: now) {
            $0.uploads?[path] = nil
            if $0.uploads?.isEmpty == true { $0.uploads = nil }
        }
    }

    private func entry(_ device: String, now: Int?) -> Entry? {
        Self.current(cache.entry(for: device), now: now)
    }

    /// `entry` unless it was seen longer than `lifetime` ago.
    private static func current(_ entry: Entry?, now: Int?) -> Entry? {
        guard let entry, let seen = entry.seen,
            Int64((now ?? DeviceCacheFile<Entry>.now) - seen) < lifetime.components.seconds
        else { return nil }
        return entry
    }

    /// Changes `device`'s entry as the file holds it when written (other `smp` processes may have
    /// changed it since this one read it).
    private func update(_ device: String, now: Int?, _ change: (inout Entry) -> Void) {
        cache.modify(device, capacity: Self.capacity, lifetime: Self.lifetime, seen: \.seen) { stored in
            var entry = Self.current(stored, now: now) ?? Entry()
            change(&entry)
            entry.seen = now ?? DeviceCacheFile<Entry>.now
            stored = entry
        }
    }

    private var cache: DeviceCacheFile<Entry> { DeviceCacheFile(file: file) }

    /// One device's entry; a field that is missing or of another type reads as nil.
    struct Entry: Codable, Sendable {
        var buf: Int?
        var count: Int?
        var uploads: [String: Int]?
        /// The file hash type the device answered with.
        var hash: String?
        var seen: Int?

        init() {}

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            buf = try? container?.decode(Int.self, forKey: .buf)
            count = try? container?.decode(Int.self, forKey: .count)
            uploads = try? container?.decode([String: Int].self, forKey: .uploads)
            hash = try? container?.decode(String.self, forKey: .hash)
            seen = try? container?.decode(Int.self, forKey: .seen)
        }
    }
}
