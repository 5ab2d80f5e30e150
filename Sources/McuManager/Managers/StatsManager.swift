#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The statistics group (2).
public struct StatsManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Names of the statistics groups.
    public func list() async throws -> [String] {
        try await client.send(StatisticsListRequest()).names
    }

    /// The counters of one statistics group.
    public func read(group name: String) async throws -> StatisticsResponse {
        try await client.send(StatisticsReadRequest(name: name))
    }
}
