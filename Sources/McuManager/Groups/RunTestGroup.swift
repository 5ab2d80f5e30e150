#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Run group (7), mynewt only: PROTOCOL.md 3.5.

extension McuMgrCommand {
    /// Run (test) group commands.
    public enum Run {
        /// Run a test (or all).
        public static let test = McuMgrCommand(0)
        /// List tests.
        public static let list = McuMgrCommand(1)
    }
}

/// Runs one test, or all tests when `testName` is nil.
public struct RunTestRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .run }
    public static var command: McuMgrCommand { McuMgrCommand.Run.test }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "run test" }
    public typealias Response = McuMgrEmptyResponse
    /// Every copy the device gets runs the tests again.
    public static var isIdempotent: Bool { false }

    /// Test name (`testname`).
    public var testName: String?
    /// Token echoed in the test log (`token`).
    public var token: String?

    /// Creates the request.
    public init(testName: String? = nil, token: String? = nil) {
        self.testName = testName
        self.token = token
    }

    enum CodingKeys: String, CodingKey { case testName = "testname", token }
}

/// Lists the tests.
public struct RunTestListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .run }
    public static var command: McuMgrCommand { McuMgrCommand.Run.list }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "run list" }
    public typealias Response = RunTestListResponse
    /// Creates the request.
    public init() {}
}

/// Test names (`run_list`, mynewt; empty when missing).
public struct RunTestListResponse: Decodable, Sendable, Hashable {
    /// Test names.
    public var names: [String]
    enum CodingKeys: String, CodingKey { case names = "run_list" }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        names = try c.decodeIfPresent([String].self, forKey: .names) ?? []
    }
}
