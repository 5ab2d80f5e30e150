#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Enumeration group (10): PROTOCOL.md 3.8.

extension McuMgrCommand {
    /// Enumeration group commands.
    public enum Enumeration {
        /// Number of groups.
        public static let count = McuMgrCommand(0)
        /// List of group ids.
        public static let list = McuMgrCommand(1)
        /// One group by index.
        public static let single = McuMgrCommand(2)
        /// Group details.
        public static let details = McuMgrCommand(3)
    }
}

/// Asks how many groups the device supports.
public struct EnumerationCountRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .enumeration }
    public static var command: McuMgrCommand { McuMgrCommand.Enumeration.count }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "enumeration count" }
    public typealias Response = EnumerationCountResponse
    /// Creates the request.
    public init() {}
}

/// Number of groups (`count`).
public struct EnumerationCountResponse: Decodable, Sendable, Hashable {
    /// Group count.
    public var count: Int
}

/// Lists the supported group ids.
public struct EnumerationListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .enumeration }
    public static var command: McuMgrCommand { McuMgrCommand.Enumeration.list }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "enumeration list" }
    public typealias Response = EnumerationListResponse
    /// Creates the request.
    public init() {}
}

/// Group ids (`groups`).
public struct EnumerationListResponse: Decodable, Sendable, Hashable {
    /// Raw group ids.
    public var groupIDs: [UInt16]
    /// The ids as groups.
    public var groups: [McuMgrGroup] { groupIDs.map(McuMgrGroup.init(rawValue:)) }
    enum CodingKeys: String, CodingKey { case groupIDs = "groups" }
}

/// Asks for the group at an index.
public struct EnumerationSingleRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .enumeration }
    public static var command: McuMgrCommand { McuMgrCommand.Enumeration.single }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "enumeration single" }
    public typealias Response = EnumerationSingleResponse

    /// 0-based index (`index`).
    public var index: Int?

    /// Creates the request.
    public init(index: Int? = nil) { self.index = index }
}

/// The group at the index, and whether it is the last.
public struct EnumerationSingleResponse: Decodable, Sendable, Hashable {
    /// Raw group id (`group`).
    public var groupID: UInt16
    /// Whether this is the last group (`end`, only sent when true).
    public var end: Bool?
    /// The group.
    public var group: McuMgrGroup { McuMgrGroup(rawValue: groupID) }
    /// Whether this is the last group.
    public var isLast: Bool { end ?? false }
    enum CodingKeys: String, CodingKey { case groupID = "group", end }
}

/// Asks for details of some or all groups.
public struct EnumerationDetailsRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .enumeration }
    public static var command: McuMgrCommand { McuMgrCommand.Enumeration.details }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "enumeration details" }
    public typealias Response = EnumerationDetailsResponse

    /// Group ids to describe (`groups`); nil for all.
    public var groups: [UInt16]?

    /// Creates the request.
    public init(groups: [McuMgrGroup]? = nil) { self.groups = groups?.map(\.rawValue) }
}

/// Group details (`groups`).
public struct EnumerationDetailsResponse: Decodable, Sendable, Hashable {
    /// One group's details.
    public struct Details: Decodable, Sendable, Hashable {
        /// Raw group id (`group`).
        public var groupID: UInt16
        /// Name (`name`).
        public var name: String?
        /// Number of command handlers (`handlers`).
        public var handlers: Int?
        /// The group.
        public var group: McuMgrGroup { McuMgrGroup(rawValue: groupID) }
        enum CodingKeys: String, CodingKey { case groupID = "group", name, handlers }
    }

    /// Details per group.
    public var groups: [Details]
}
