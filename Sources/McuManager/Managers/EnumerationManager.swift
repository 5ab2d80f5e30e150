#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The enumeration group (10): which groups the device supports.
public struct EnumerationManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Number of supported groups.
    public func count() async throws -> Int {
        try await client.send(EnumerationCountRequest()).count
    }

    /// The supported groups.
    public func list() async throws -> [McuMgrGroup] {
        try await client.send(EnumerationListRequest()).groups
    }

    /// The group at `index` (0-based) and whether it is the last one.
    public func single(index: Int) async throws -> EnumerationSingleResponse {
        try await client.send(EnumerationSingleRequest(index: index))
    }

    /// Names and handler counts of `groups` (nil = all); needs `_ENUM_DETAILS`.
    public func details(groups: [McuMgrGroup]? = nil) async throws -> [EnumerationDetailsResponse.Details] {
        try await client.send(EnumerationDetailsRequest(groups: groups)).groups
    }
}
