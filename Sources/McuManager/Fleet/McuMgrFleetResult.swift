#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// How one device of a ``McuMgrFleet`` run ended.
public struct McuMgrFleetResult<Value: Sendable>: Sendable {
    /// The device's name (``McuMgrFleet/Device/name``).
    public var device: String
    /// The device's position in ``McuMgrFleet/devices`` (results come in this order).
    public var index: Int
    /// What the operation returned, or why it failed (`.cancelled` for a device the run's cancellation
    /// stopped or never started).
    public var result: Result<Value, McuMgrError>
    /// From the device's turn to its end (the wait for a free place not counted).
    public var duration: Duration
    /// The bytes the device confirmed last (its transfer's progress; the upgrade's bytes sent).
    public var bytesSent: Int

    /// Creates a result.
    public init(device: String, index: Int, result: Result<Value, McuMgrError>, duration: Duration, bytesSent: Int) {
        self.device = device
        self.index = index
        self.result = result
        self.duration = duration
        self.bytesSent = bytesSent
    }

    /// Whether the operation succeeded on this device.
    public var succeeded: Bool {
        if case .success = result { return true }
        return false
    }

    /// The operation's value, when it succeeded.
    public var value: Value? { try? result.get() }

    /// Why the device failed; nil when it succeeded.
    public var error: McuMgrError? {
        if case .failure(let error) = result { return error }
        return nil
    }
}
