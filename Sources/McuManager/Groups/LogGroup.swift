#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Log group (4), mynewt only: PROTOCOL.md 3.5. Zephyr answers rc 8.

extension McuMgrCommand {
    /// Log group commands.
    public enum Log {
        /// Show (read) log entries.
        public static let show = McuMgrCommand(0)
        /// Clear the logs.
        public static let clear = McuMgrCommand(1)
        /// Append (mynewt).
        public static let append = McuMgrCommand(2)
        /// List log modules.
        public static let moduleList = McuMgrCommand(3)
        /// List log levels.
        public static let levelList = McuMgrCommand(4)
        /// List logs.
        public static let logsList = McuMgrCommand(5)
    }
}

/// Reads log entries.
public struct LogShowRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .log }
    public static var command: McuMgrCommand { McuMgrCommand.Log.show }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "log show" }
    public typealias Response = LogShowResponse

    /// Which log (`log_name`); nil for all.
    public var logName: String?
    /// First entry index (`index`).
    public var index: Int?
    /// Earliest timestamp (`ts`).
    public var timestamp: Int64?

    /// Creates the request.
    public init(logName: String? = nil, index: Int? = nil, timestamp: Int64? = nil) {
        self.logName = logName
        self.index = index
        self.timestamp = timestamp
    }

    enum CodingKeys: String, CodingKey { case logName = "log_name", index, timestamp = "ts" }
}

/// Log entries, grouped by log.
public struct LogShowResponse: Decodable, Sendable, Hashable {
    /// One log entry.
    public struct Entry: Decodable, Sendable, Hashable {
        /// Message bytes (`msg`); CBOR when `type` is "cbor", else text.
        public var message: Data?
        /// Timestamp (`ts`).
        public var timestamp: Int64?
        /// Level (`level`).
        public var level: Int?
        /// Index (`index`).
        public var index: Int?
        /// Module (`module`).
        public var module: Int?
        /// Entry type (`type`), e.g. "cbor".
        public var type: String?

        /// The message as UTF-8 text, when it is text.
        public var text: String? { message.flatMap { String(data: $0, encoding: .utf8) } }

        enum CodingKeys: String, CodingKey {
            case message = "msg", timestamp = "ts", level, index, module, type
        }
    }

    /// One log.
    public struct Log: Decodable, Sendable, Hashable {
        /// Log name (`name`).
        public var name: String?
        /// Log type (`type`).
        public var type: Int?
        /// Entries (`entries`).
        public var entries: [Entry]?
    }

    /// Index to ask for next (`next_index`).
    public var nextIndex: Int?
    /// Logs (`logs`).
    public var logs: [Log]?

    enum CodingKeys: String, CodingKey { case nextIndex = "next_index", logs }
}

/// Clears the logs.
public struct LogClearRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .log }
    public static var command: McuMgrCommand { McuMgrCommand.Log.clear }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "log clear" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}

/// Lists log modules.
public struct LogModuleListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .log }
    public static var command: McuMgrCommand { McuMgrCommand.Log.moduleList }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "log module list" }
    public typealias Response = LogModuleListResponse
    /// Creates the request.
    public init() {}
}

/// Log modules by name (`module_map`, as the Nordic client reads it; unverified key).
public struct LogModuleListResponse: Decodable, Sendable, Hashable {
    /// Module ids by name.
    public var modules: [String: Int]?
    enum CodingKeys: String, CodingKey { case modules = "module_map" }
}

/// Lists log levels.
public struct LogLevelListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .log }
    public static var command: McuMgrCommand { McuMgrCommand.Log.levelList }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "log level list" }
    public typealias Response = LogLevelListResponse
    /// Creates the request.
    public init() {}
}

/// Log levels by name (`level_map`).
public struct LogLevelListResponse: Decodable, Sendable, Hashable {
    /// Level numbers by name.
    public var levels: [String: Int]?
    enum CodingKeys: String, CodingKey { case levels = "level_map" }
}

/// Lists the logs.
public struct LogListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .log }
    public static var command: McuMgrCommand { McuMgrCommand.Log.logsList }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "log list" }
    public typealias Response = LogListResponse
    /// Creates the request.
    public init() {}
}

/// Log names (`log_list`).
public struct LogListResponse: Decodable, Sendable, Hashable {
    /// Names; empty when missing.
    public var names: [String]
    enum CodingKeys: String, CodingKey { case names = "log_list" }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        names = try c.decodeIfPresent([String].self, forKey: .names) ?? []
    }
}
