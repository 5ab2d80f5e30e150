/// A small mynewt-style log (group 4): entries with index, timestamp, level, module and message.
struct DeviceLog: Sendable {
    struct Entry: Sendable {
        var index: UInt64
        /// Microseconds.
        var timestamp: UInt64
        var level: UInt64
        var module: UInt64
        var message: [UInt8]
    }

    static let name = "reboot_log"
    /// Mynewt's log level names.
    static let levels: [(String, UInt64)] = [("DEBUG", 0), ("INFO", 1), ("WARN", 2), ("ERROR", 3), ("CRITICAL", 4)]
    static let modules: [(String, UInt64)] = [("DEFAULT", 0), ("OS", 1), ("NEWTMGR", 2)]
    /// Entries kept; older ones are dropped.
    static let capacity = 64

    private(set) var entries: [Entry] = []
    private(set) var nextIndex: UInt64 = 0

    mutating func append(_ message: String, level: UInt64, at timestamp: UInt64, module: UInt64 = 1) {
        entries.append(Entry(index: nextIndex, timestamp: timestamp, level: level, module: module, message: Array(message.utf8)))
        nextIndex += 1
        if entries.count > Self.capacity { entries.removeFirst(entries.count - Self.capacity) }
    }

    mutating func clear() { entries.removeAll() }
}
