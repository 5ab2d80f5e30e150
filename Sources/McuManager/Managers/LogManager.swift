#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The log group (4), mynewt only; Zephyr answers rc 8.
public struct LogManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Log entries from `logName` (nil = all) starting at `index` / `timestamp`.
    public func show(logName: String? = nil, index: Int? = nil, timestamp: Int64? = nil) async throws -> LogShowResponse {
        try await client.send(LogShowRequest(logName: logName, index: index, timestamp: timestamp))
    }

    /// Clears the logs.
    public func clear() async throws {
        _ = try await client.send(LogClearRequest())
    }

    /// Log module ids by name.
    public func moduleList() async throws -> [String: Int] {
        try await client.send(LogModuleListRequest()).modules ?? [:]
    }

    /// Log level numbers by name.
    public func levelList() async throws -> [String: Int] {
        try await client.send(LogLevelListRequest()).levels ?? [:]
    }

    /// Names of the logs.
    public func logsList() async throws -> [String] {
        try await client.send(LogListRequest()).names
    }
}
