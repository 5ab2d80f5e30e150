#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
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

    /// Stores `entry` for `device`, keeping at most `capacity` devices (those `seen` longest ago go first).
    func store(_ entry: Entry, for device: String, capacity: Int, seen: (Entry) -> Int?) {
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
        try? data.write(to: file, options: .atomic)
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }
}
