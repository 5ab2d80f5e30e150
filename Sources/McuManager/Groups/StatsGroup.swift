#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Statistics group (2): PROTOCOL.md 3.3.

extension McuMgrCommand {
    /// Statistics group commands.
    public enum Stats {
        /// Read one statistics group.
        public static let read = McuMgrCommand(0)
        /// List statistics groups.
        public static let list = McuMgrCommand(1)
    }
}

/// Reads one statistics group.
public struct StatisticsReadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .stats }
    public static var command: McuMgrCommand { McuMgrCommand.Stats.read }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "statistics read" }
    public typealias Response = StatisticsResponse

    /// The statistics group's name (`name`).
    public var name: String

    /// Creates the request.
    public init(name: String) { self.name = name }
}

/// One statistics group's counters.
public struct StatisticsResponse: Decodable, Sendable, Hashable {
    /// The group's name (`name`).
    public var name: String?
    /// Group (`group`), sent by some devices.
    public var group: String?
    /// Counters by name (`fields`).
    public var fields: [String: UInt64]

    enum CodingKeys: String, CodingKey { case name, group, fields }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        group = try c.decodeIfPresent(String.self, forKey: .group)
        fields = try c.decodeIfPresent([String: UInt64].self, forKey: .fields) ?? [:]
    }
}

/// Lists the statistics groups.
public struct StatisticsListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .stats }
    public static var command: McuMgrCommand { McuMgrCommand.Stats.list }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "statistics list" }
    public typealias Response = StatisticsListResponse
    /// Creates the request.
    public init() {}
}

/// The statistics group names.
public struct StatisticsListResponse: Decodable, Sendable, Hashable {
    /// Names (`stat_list`); empty when missing.
    public var names: [String]

    enum CodingKeys: String, CodingKey { case names = "stat_list" }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        names = try c.decodeIfPresent([String].self, forKey: .names) ?? []
    }
}
