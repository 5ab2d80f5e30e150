#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A JSON object of device name -> entry in a file under `$XDG_CACHE_HOME/smp` (what `ConsoleLineMemory`
/// and `RoundTripMemory` keep between runs). Written atomically; an unreadable file reads as empty, and
/// failures to write are ignored: the cache only saves time.
struct DeviceCacheFile<Entry: Codable>: Sendable, Hashable {
    let file: URL

    /// `$XDG_CACHE_HOME/smp/NAME` (else `~/.cache/smp/NAME`); nil when `SMP_NO_CACHE` is set or there is
    /// no home.
    static func standardFile(named name: String) -> URL? {
        let environment = ProcessInfo.processInfo.environment
        if let off = environment["SMP_NO_CACHE"], !off.isEmpty { return nil }
        let base: URL
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            base = URL(fileURLWithPath: cache)
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            base = URL(fileURLWithPath: home).appendingPathComponent(".cache")
        } else {
            return nil
        }
        return base.appendingPathComponent("smp").appendingPathComponent(name)
    }

    func entries() -> [String: Entry] {
        guard let data = try? Data(contentsOf: file),
            let object = try? JSONDecoder().decode([String: Entry].self, from: data)
        else { return [:] }
        return object
    }

    /// Serializes the read-modify-write of `store` within the process: many devices of one run (`McuMgrFleet`)
    /// finish at once, and without it each would keep only its own entry.
    private static var writeLock: LockedState<Void> { deviceCacheWriteLock }

    /// Stores `entry` for `device`, keeping at most `capacity` devices (those `seen` longest ago go first).
    func store(_ entry: Entry, for device: String, capacity: Int, seen: (Entry) -> Int?) {
        Self.writeLock.withLock { _ in storeLocked(entry, for: device, capacity: capacity, seen: seen) }
    }

    private func storeLocked(_ entry: Entry, for device: String, capacity: Int, seen: (Entry) -> Int?) {
        var all = entries()
        all[device] = entry
        if all.count > capacity {
            let oldest = all.sorted { (seen($0.value) ?? 0) < (seen($1.value) ?? 0) }
            for (key, _) in oldest.prefix(all.count - capacity) { all[key] = nil }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        guard let data = try? encoder.encode(all) else { return }
        try? FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        Self.replace(file, with: data)
    }

    /// Writes `data` to a temporary file beside `file` and renames it over `file`: readers see the old
    /// file or the new one, never a part. Without the fsync of Foundation's atomic write (0.5 ms at the
    /// end of every command on a tmpfs, more on a disk): a cache that a crash empties reads as empty.
    private static func replace(_ file: URL, with data: Data) {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(getpid()).tmp").path
        guard let descriptor = try? SystemCall.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o644)
        else { return }
        let written = (try? data.withUnsafeBytes { try SystemCall.writeAll(descriptor, $0) }) != nil
        SystemCall.close(descriptor)
        if !written || rename(temporary, file.path) != 0 { unlink(temporary) }
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }
}

/// The lock of every `DeviceCacheFile` write in this process.
private let deviceCacheWriteLock = LockedState<Void>(())
