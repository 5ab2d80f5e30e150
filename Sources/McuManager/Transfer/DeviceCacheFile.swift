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
///
/// A command looks entries up several times (a round trip at the start, whether it changed at the end;
/// a device's buffers, its hash type, an unfinished upload), and a rig's file of a thousand devices takes
/// milliseconds to decode: the decoded file is kept in the process and decoded again only when the file
/// changed (another process wrote it: a `stat` tells).
struct DeviceCacheFile<Entry: Codable & Sendable>: Sendable, Hashable {
    let file: URL
    /// How long a write waits for another process's write to the same file before it goes ahead anyway
    /// (a process stopped while holding the lock must not stop every later `smp`; the cache only saves
    /// time, so a lost update costs at most a probe or a resume check).
    var lockWait: Duration = .seconds(2)

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

    /// The entry for `device`, if any.
    func entry(for device: String) -> Entry? { entries()[device] }

    /// - Parameter fresh: read the file even when the decoded copy of this process looks current. A
    ///   write always reads it: the copy is known by the file's inode, size and modification time, and a
    ///   file that another process (or a lookup racing a write here) replaced within one tick of the
    ///   kernel's clock, at an inode just freed and of the same size, passes for the copy, so that a write
    ///   based on it would drop what the newer file holds (the likely way a device's remembered buffers
    ///   were lost once under CI load, so that its next upload asked `os params` again).
    func entries(fresh: Bool = false) -> [String: Entry] {
        let identity = FileIdentity(path: file.path)
        if !fresh, let identity, let kept = decodedFiles.withLock({ $0[file.path] }), kept.identity == identity,
            let entries = kept.entries as? [String: Entry]
        {
            return entries
        }
        guard let data = try? Data(contentsOf: file),
            let object = try? JSONDecoder().decode([String: Entry].self, from: data)
        else { return [:] }
        // Kept only when the file did not change while it was read (else the next look reads it again).
        if let identity, FileIdentity(path: file.path) == identity {
            decodedFiles.withLock { $0[file.path] = DecodedFile(identity: identity, entries: object) }
        }
        return object
    }

    /// Serializes the read-modify-write of `store` within the process: many devices of one run (`McuMgrFleet`)
    /// finish at once, and without it each would keep only its own entry.
    private static var writeLock: LockedState<Void> { deviceCacheWriteLock }

    /// Stores `entry` for `device`, keeping at most `capacity` devices (those `seen` longest ago go first)
    /// and, with a `lifetime`, none seen longer than that before `entry` (they would be ignored anyway).
    func store(_ entry: Entry, for device: String, capacity: Int, lifetime: Duration? = nil, seen: (Entry) -> Int?) {
        modify(device, capacity: capacity, lifetime: lifetime, seen: seen) { $0 = entry }
    }

    /// Changes `device`'s entry (nil: none; set it to nil to remove it) as the file holds it at the time of
    /// the write, not as it was read before: `smp` processes running side by side (a rig's boards, a
    /// script's parallel jobs) each keep what the others wrote. Serialized within the process and, by an
    /// advisory lock on a file beside the cache, across processes. Kept and dropped entries as for `store`.
    func modify(
        _ device: String, capacity: Int, lifetime: Duration? = nil, seen: (Entry) -> Int?, _ change: (inout Entry?) -> Void
    ) {
        Self.writeLock.withLock { _ in
            try? FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let lock = CrossProcessLock(path: lockPath, wait: lockWait)
            defer { lock.release() }
            var all = entries(fresh: true)
            var entry = all[device]
            change(&entry)
            all[device] = entry
            if let lifetime, let newest = entry.flatMap(seen) {
                let oldest = newest - Int(lifetime.components.seconds)
                all = all.filter { (seen($0.value) ?? 0) >= oldest }
            }
            if all.count > capacity {
                let oldest = all.sorted { (seen($0.value) ?? 0) < (seen($1.value) ?? 0) }
                for (key, _) in oldest.prefix(all.count - capacity) { all[key] = nil }
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            guard let data = try? encoder.encode(all) else { return }
            guard Self.replace(file, with: data), let identity = FileIdentity(path: file.path) else { return }
            decodedFiles.withLock { $0[file.path] = DecodedFile(identity: identity, entries: all) }
        }
    }

    /// The lock file beside the cache (`.NAME.lock`).
    var lockPath: String {
        file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).lock").path
    }

    /// Writes `data` to a temporary file beside `file` and renames it over `file`: readers see the old
    /// file or the new one, never a part. Without the fsync of Foundation's atomic write (0.5 ms at the
    /// end of every command on a tmpfs, more on a disk): a cache that a crash empties reads as empty.
    /// - Returns: whether `file` now holds `data`.
    @discardableResult
    private static func replace(_ file: URL, with data: Data) -> Bool {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(getpid()).tmp").path
        guard let descriptor = try? SystemCall.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o644)
        else { return false }
        let written = (try? data.withUnsafeBytes { try SystemCall.writeAll(descriptor, $0) }) != nil
        SystemCall.close(descriptor)
        guard written, rename(temporary, file.path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }

    static var now: Int { Int(Date().timeIntervalSince1970) }
}

/// An exclusive flock(2) on a file, taken without blocking and retried until `wait` has passed; after
/// that (or when the lock file cannot be opened) the holder goes on unlocked. Released by `release()`
/// (closing the descriptor), or by the process's end.
struct CrossProcessLock {
    private let descriptor: Int32?

    init(path: String, wait: Duration) {
        guard let descriptor = try? SystemCall.open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o644) else {
            self.descriptor = nil
            return
        }
        self.descriptor = descriptor
        let clock = ContinuousClock()
        let deadline = clock.now + wait
        var pause = Duration.microseconds(200)
        while true {
            do {
                if try SystemCall.unlessItWouldBlock("flock", { flock(descriptor, LOCK_EX | LOCK_NB) }) != nil { return }
            } catch {
                return  // A file system without locks: unlocked.
            }
            guard clock.now < deadline else { return }
            var interval = timespec(tv_sec: 0, tv_nsec: Int(pause.components.attoseconds / 1_000_000_000))
            _ = nanosleep(&interval, nil)
            pause = min(pause * 2, .milliseconds(20))
        }
    }

    func release() {
        if let descriptor { SystemCall.close(descriptor) }
    }
}

/// The lock of every `DeviceCacheFile` write in this process.
private let deviceCacheWriteLock = LockedState<Void>(())

/// The cache files decoded in this process, by path.
private let decodedFiles = LockedState<[String: DecodedFile]>([:])

/// A decoded cache file and the version of the file it came from.
private struct DecodedFile: Sendable {
    var identity: FileIdentity
    /// `[String: Entry]` of the file's `DeviceCacheFile<Entry>`.
    var entries: any Sendable
}

/// Which version of a file is on disk: a replacement (written beside and renamed over it) has another
/// inode, and a change in place another size or modification time.
private struct FileIdentity: Sendable, Hashable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: timespec

    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = status.st_mtim
    }

    static func == (a: FileIdentity, b: FileIdentity) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size
            && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(inode)
        hasher.combine(size)
    }
}
