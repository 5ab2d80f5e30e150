#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The Zephyr basic group (63).
public struct BasicManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Timeout for erasing the storage partition.
    public static let eraseTimeout: Duration = .seconds(75)

    /// Erases the storage partition (settings, NVS): the application's settings are lost.
    public func eraseStorage() async throws {
        _ = try await client.send(EraseStorageRequest(), timeout: Self.eraseTimeout)
    }
}
