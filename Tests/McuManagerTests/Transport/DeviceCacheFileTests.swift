import Foundation
import Testing

@testable import McuManager

/// Device caches written by `smp` processes side by side keep every process's entries.
@Suite struct DeviceCacheFileTests {
    struct Entry: Codable, Sendable, Equatable {
        var value: Int
        var seen: Int?
    }

    /// A write waits for the lock another process holds, and then changes the file as that process left
    /// it: the entry the other process wrote meanwhile survives.
    @Test func aWriteWaitsForAnotherProcesssWriteAndKeepsItsEntry() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DeviceCacheFile<Entry>(file: directory.appendingPathComponent("smp/cache.json"), lockWait: .seconds(3600))
        cache.store(Entry(value: 1, seen: 1), for: "first", capacity: 10, seen: \.seen)

        // The other process: holds the lock (flock locks belong to an open file, so a second open in this
        // process stands for another process), and writes its entry while this one's write waits.
        let other = CrossProcessLock(path: cache.lockPath, wait: .zero)
        let writer = Task.detached { cache.modify("mine", capacity: 10, seen: \.seen) { $0 = Entry(value: 3, seen: 3) } }
        let theirs = #"{"first": {"value": 1, "seen": 1}, "theirs": {"value": 2, "seen": 2}}"#
        try Data(theirs.utf8).write(to: cache.file, options: .atomic)
        other.release()
        await writer.value

        let entries = cache.entries()
        #expect(entries["first"] == Entry(value: 1, seen: 1))
        #expect(entries["theirs"] == Entry(value: 2, seen: 2))
        #expect(entries["mine"] == Entry(value: 3, seen: 3))
    }

    /// A lock that is never released (a process stopped while writing) delays a write by at most the wait.
    @Test func aLockHeldForeverDoesNotStopTheWrite() throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DeviceCacheFile<Entry>(file: directory.appendingPathComponent("smp/cache.json"), lockWait: .zero)
        try FileManager.default.createDirectory(at: cache.file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let stuck = CrossProcessLock(path: cache.lockPath, wait: .zero)
        defer { stuck.release() }
        cache.modify("mine", capacity: 10, seen: \.seen) { $0 = Entry(value: 3, seen: 3) }
        #expect(cache.entries()["mine"] == Entry(value: 3, seen: 3))
    }

    /// A write changes the file as it is on disk, not as this process decoded it last: a file rewritten
    /// with the same inode, size and modification time (a replacement within one clock tick at a reused
    /// inode) passes for the decoded copy, and the write must still keep what it holds.
    @Test func aWriteReadsTheFileEvenWhenItsDecodedCopyLooksCurrent() throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DeviceCacheFile<Entry>(file: directory.appendingPathComponent("smp/cache.json"))
        cache.store(Entry(value: 1, seen: 1), for: "a", capacity: 10, seen: \.seen)
        var before = stat()
        #expect(stat(cache.file.path, &before) == 0)
        // The other writer: the same length, in place, with the modification time put back.
        let written = try String(contentsOf: cache.file, encoding: .utf8)
        let theirs = written.replacingOccurrences(of: "\"value\" : 1", with: "\"value\" : 7")
        #expect(theirs != written && theirs.utf8.count == written.utf8.count)
        let handle = try FileHandle(forWritingTo: cache.file)
        try handle.write(contentsOf: Data(theirs.utf8))
        var times = [before.st_atim, before.st_mtim]
        #expect(futimens(handle.fileDescriptor, &times) == 0)
        try handle.close()
        #expect(cache.entry(for: "a") == Entry(value: 1, seen: 1), "a lookup may take the decoded copy")

        cache.modify("b", capacity: 10, seen: \.seen) { $0 = Entry(value: 2, seen: 2) }
        #expect(cache.entries(fresh: true)["a"] == Entry(value: 7, seen: 1), "the other writer's value survives")
        #expect(cache.entries(fresh: true)["b"] == Entry(value: 2, seen: 2))
    }

    /// `modify` sees the stored entry and may remove it.
    @Test func modifyChangesOrRemovesTheStoredEntry() throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = DeviceCacheFile<Entry>(file: directory.appendingPathComponent("smp/cache.json"))
        cache.modify("a", capacity: 10, seen: \.seen) { #expect($0 == nil); $0 = Entry(value: 1, seen: 1) }
        cache.modify("a", capacity: 10, seen: \.seen) { $0?.value += 1 }
        #expect(cache.entry(for: "a") == Entry(value: 2, seen: 1))
        cache.modify("a", capacity: 10, seen: \.seen) { $0 = nil }
        #expect(cache.entry(for: "a") == nil)
    }
}
