#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// OS / default group (0): PROTOCOL.md 3.1.

extension McuMgrCommand {
    /// OS group commands.
    public enum OS {
        /// Echo (`d` → `r`).
        public static let echo = McuMgrCommand(0)
        /// Console echo control (mynewt).
        public static let consoleEchoControl = McuMgrCommand(1)
        /// Task statistics.
        public static let taskStatistics = McuMgrCommand(2)
        /// Memory pool statistics.
        public static let memoryPoolStatistics = McuMgrCommand(3)
        /// Date-time get (read) and set (write).
        public static let dateTime = McuMgrCommand(4)
        /// System reset.
        public static let reset = McuMgrCommand(5)
        /// MCUmgr buffer parameters.
        public static let mcuMgrParameters = McuMgrCommand(6)
        /// OS / application information.
        public static let applicationInfo = McuMgrCommand(7)
        /// Bootloader information.
        public static let bootloaderInfo = McuMgrCommand(8)
    }
}

/// Echo: the device returns the string it was sent.
public struct EchoRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.echo }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "echo" }
    public typealias Response = EchoResponse

    /// The text to echo (`d`).
    public var text: String

    /// Creates an echo request for `text`.
    public init(text: String) { self.text = text }

    enum CodingKeys: String, CodingKey { case text = "d" }
}

/// The echoed text (`r`).
public struct EchoResponse: Decodable, Sendable, Hashable {
    /// The text the device sent back.
    public var text: String
    enum CodingKeys: String, CodingKey { case text = "r" }
}

/// Console echo control (mynewt): turns the console's echo on or off. Zephyr answers rc 8.
public struct ConsoleEchoControlRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.consoleEchoControl }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "console echo control" }
    public typealias Response = McuMgrEmptyResponse

    /// 1 to enable echo, 0 to disable it (`echo`).
    public var echo: Int

    /// Creates the request.
    public init(enabled: Bool) { self.echo = enabled ? 1 : 0 }
}

/// Task statistics: one entry per thread.
public struct TaskStatisticsRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.taskStatistics }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "task statistics" }
    public typealias Response = TaskStatisticsResponse
    /// Creates the request.
    public init() {}
}

/// Task statistics, keyed by thread name (or priority/index when thread names are off).
public struct TaskStatisticsResponse: Decodable, Sendable, Hashable {
    /// One thread's statistics. Several fields are omitted by default Zephyr builds.
    public struct Task: Decodable, Sendable, Hashable {
        /// Priority (`prio`), signed by default in Zephyr.
        public var priority: Int?
        /// Thread id (`tid`).
        public var id: Int?
        /// Thread state bits (`state`).
        public var state: Int?
        /// Stack used, in 4-byte words (`stkuse`).
        public var stackUsed: Int?
        /// Stack size, in 4-byte words (`stksiz`).
        public var stackSize: Int?
        /// Context switches (`cswcnt`).
        public var contextSwitchCount: Int?
        /// Run time (`runtime`).
        public var runtime: Int?
        /// Last check-in (`last_checkin`).
        public var lastCheckin: Int?
        /// Next check-in (`next_checkin`).
        public var nextCheckin: Int?

        enum CodingKeys: String, CodingKey {
            case priority = "prio", id = "tid", state, stackUsed = "stkuse", stackSize = "stksiz"
            case contextSwitchCount = "cswcnt", runtime, lastCheckin = "last_checkin", nextCheckin = "next_checkin"
        }
    }

    /// Threads by name (`tasks`).
    public var tasks: [String: Task]
}

/// Memory pool statistics.
public struct MemoryPoolStatisticsRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.memoryPoolStatistics }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "memory pool statistics" }
    public typealias Response = MemoryPoolStatisticsResponse
    /// Creates the request.
    public init() {}
}

/// Memory pools by name. Accepts pools at the top level (Zephyr doc) or under `mpools` (mynewt).
public struct MemoryPoolStatisticsResponse: Decodable, Sendable, Hashable {
    /// One pool's statistics.
    public struct Pool: Decodable, Sendable, Hashable {
        /// Block size (`blksiz`).
        public var blockSize: Int?
        /// Number of blocks (`nblks`).
        public var blockCount: Int?
        /// Free blocks (`nfree`).
        public var freeCount: Int?
        /// Lowest number of free blocks seen (`min`).
        public var minimumFree: Int?

        enum CodingKeys: String, CodingKey {
            case blockSize = "blksiz", blockCount = "nblks", freeCount = "nfree", minimumFree = "min"
        }
    }

    /// Pools by name.
    public var pools: [String: Pool]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        if let wrapped = try container.decodeIfPresent([String: Pool].self, forKey: AnyCodingKey("mpools")) {
            pools = wrapped
            return
        }
        var pools: [String: Pool] = [:]
        for key in container.allKeys where !["rc", "err", "rsn"].contains(key.stringValue) {
            if let pool = try? container.decode(Pool.self, forKey: key) { pools[key.stringValue] = pool }
        }
        self.pools = pools
    }
}

/// Reads the device's date and time.
public struct DateTimeReadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.dateTime }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "date-time read" }
    public typealias Response = DateTimeResponse
    /// Creates the request.
    public init() {}
}

/// The device's date and time as it sent it (`datetime`, no time zone).
public struct DateTimeResponse: Decodable, Sendable, Hashable {
    /// `YYYY-MM-DDTHH:MM:SS`, optionally with milliseconds.
    public var dateTime: String
    /// The value read as UTC, nil if it does not parse.
    public var date: Date? { McuMgrDateTime.parse(dateTime) }
    enum CodingKeys: String, CodingKey { case dateTime = "datetime" }
}

/// Sets the device's date and time.
public struct DateTimeWriteRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.dateTime }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "date-time write" }
    public typealias Response = McuMgrEmptyResponse

    /// `yyyy-MM-ddTHH:mm:ss` in UTC (`datetime`).
    public var dateTime: String

    /// Creates the request for `date`, formatted in UTC.
    public init(date: Date) { self.dateTime = McuMgrDateTime.format(date) }
    /// Creates the request with a ready-made string.
    public init(dateTime: String) { self.dateTime = dateTime }

    enum CodingKeys: String, CodingKey { case dateTime = "datetime" }
}

/// The date-time text format the OS group uses (UTC, no zone).
public enum McuMgrDateTime {
    /// Formats `date` as `yyyy-MM-ddTHH:mm:ss` in UTC.
    public static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func pad(_ v: Int?, _ n: Int) -> String {
            let s = String(v ?? 0)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))T\(pad(c.hour, 2)):\(pad(c.minute, 2)):\(pad(c.second, 2))"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.mmm][zone]` as UTC (a zone is ignored, as the device does).
    public static func parse(_ text: String) -> Date? {
        let chars = Array(text.utf8)
        guard chars.count >= 19 else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for i in range {
                guard chars[i] >= 48, chars[i] <= 57 else { return nil }
                value = value * 10 + Int(chars[i] - 48)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { return nil }
        var nanosecond = 0
        if chars.count > 20, chars[19] == UInt8(ascii: ".") {
            var digits = 0
            var i = 20
            var fraction = 0
            while i < chars.count, chars[i] >= 48, chars[i] <= 57, digits < 9 {
                fraction = fraction * 10 + Int(chars[i] - 48)
                digits += 1
                i += 1
            }
            for _ in digits..<9 { fraction *= 10 }
            nanosecond = fraction
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        let components = DateComponents(
            year: year, month: month, day: day, hour: hour, minute: minute, second: second, nanosecond: nanosecond)
        return calendar.date(from: components)
    }
}

/// System reset. The device answers, then reboots after about 250 ms.
public struct ResetRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.reset }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "reset" }
    public typealias Response = McuMgrEmptyResponse

    /// Reset even if an application hook refuses (`force`, boolean); omitted when false.
    public var force: Bool?
    /// Boot mode (`boot_mode`): 0 normal, 1 bootloader / firmware loader; omitted when nil.
    public var bootMode: Int?

    /// Creates the request.
    public init(force: Bool = false, bootMode: Int? = nil) {
        self.force = force ? true : nil
        self.bootMode = bootMode
    }

    enum CodingKeys: String, CodingKey { case force, bootMode = "boot_mode" }
}

/// MCUmgr buffer parameters.
public struct McuMgrParametersRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.mcuMgrParameters }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "MCUmgr parameters" }
    public typealias Response = McuMgrParametersResponse
    /// Creates the request.
    public init() {}
}

/// The device's SMP buffers.
public struct McuMgrParametersResponse: Decodable, Sendable, Hashable {
    /// Size of one SMP buffer, 8-byte header included (`buf_size`).
    public var bufferSize: Int
    /// Number of buffers shared by requests and responses (`buf_count`).
    public var bufferCount: Int

    /// Creates a value (for tests and simulators).
    public init(bufferSize: Int, bufferCount: Int) {
        self.bufferSize = bufferSize
        self.bufferCount = bufferCount
    }

    enum CodingKeys: String, CodingKey { case bufferSize = "buf_size", bufferCount = "buf_count" }
}

/// OS / application information (`uname`-like).
public struct ApplicationInfoRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.applicationInfo }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "application info" }
    public typealias Response = ApplicationInfoResponse

    /// Format letters (`format`): `s n r v b m p i o`, or `a` for all; nil means `s`.
    public var format: String?

    /// Creates the request.
    public init(format: String? = nil) { self.format = format }
}

/// The information text (`output`).
public struct ApplicationInfoResponse: Decodable, Sendable, Hashable {
    /// Requested fields joined by spaces.
    public var output: String
}

/// Bootloader information.
public struct BootloaderInfoRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .os }
    public static var command: McuMgrCommand { McuMgrCommand.OS.bootloaderInfo }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "bootloader info" }
    public typealias Response = BootloaderInfoResponse

    /// The query (`query`): nil for the bootloader name, `"mode"`, or `"active_b0_slot"` (NCS).
    public var query: String?

    /// Creates the request.
    public init(query: String? = nil) { self.query = query }
}

/// Bootloader information; which keys are present depends on the query.
public struct BootloaderInfoResponse: Decodable, Sendable, Hashable {
    /// Bootloader name (`bootloader`), e.g. "MCUboot" or "SUIT".
    public var bootloader: String?
    /// MCUboot mode (`mode`).
    public var mode: BootloaderMode?
    /// Downgrade prevention is on (`no-downgrade`).
    public var noDowngrade: Bool?
    /// Active NSIB slot (`active`), for the `active_b0_slot` query.
    public var activeSlot: Int?

    enum CodingKeys: String, CodingKey {
        case bootloader, mode, noDowngrade = "no-downgrade", activeSlot = "active"
    }
}

/// A coding key for any string, for maps with names chosen by the device.
struct AnyCodingKey: CodingKey, Hashable {
    var stringValue: String
    var intValue: Int?
    init(_ string: String) { self.stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}
