#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Crash group (5), mynewt only: PROTOCOL.md 3.5.

extension McuMgrCommand {
    /// Crash group commands.
    public enum Crash {
        /// Trigger a crash.
        public static let test = McuMgrCommand(0)
    }
}

/// The kind of crash to trigger. Open set of names.
public struct CrashTest: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Division by zero.
    public static let divideByZero = Self(rawValue: "div0")
    /// Jump to address 0.
    public static let jumpToZero = Self(rawValue: "jump0")
    /// Dereference address 0.
    public static let referenceZero = Self(rawValue: "ref0")
    /// Failed assertion.
    public static let assert = Self(rawValue: "assert")
    /// Watchdog reset.
    public static let watchdog = Self(rawValue: "wdog")

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }

    public var description: String { rawValue }
}

/// Makes the device crash in the given way (test builds only).
public struct CrashTestRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .crash }
    public static var command: McuMgrCommand { McuMgrCommand.Crash.test }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "crash test" }
    public typealias Response = McuMgrEmptyResponse
    /// The device faults before it answers and reboots: a copy sent for the missing answer would crash
    /// it again once it is back.
    public static var isIdempotent: Bool { false }

    /// The crash type (`t`).
    public var type: CrashTest

    /// Creates the request.
    public init(type: CrashTest) { self.type = type }

    enum CodingKeys: String, CodingKey { case type = "t" }
}
