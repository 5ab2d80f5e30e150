#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The crash group (5), mynewt only: makes the device crash on purpose.
public struct CrashManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Triggers a crash of the given kind. The device may not answer before it crashes.
    public func test(_ type: CrashTest) async throws {
        _ = try await client.send(CrashTestRequest(type: type))
    }
}
