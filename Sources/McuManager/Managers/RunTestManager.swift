#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The run group (7), mynewt only: on-device tests.
public struct RunTestManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Runs the test `name` (all tests when nil), tagging its log with `token`.
    public func test(name: String? = nil, token: String? = nil) async throws {
        _ = try await client.send(RunTestRequest(testName: name, token: token))
    }

    /// Names of the tests.
    public func list() async throws -> [String] {
        try await client.send(RunTestListRequest()).names
    }
}
