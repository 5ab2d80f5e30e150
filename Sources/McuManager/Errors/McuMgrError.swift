import McuMgrCore

/// The one public error type: what kind of failure, the device's code when it sent one, and a message
/// that says what happened and what the user can do.
public struct McuMgrError: Error, Sendable, CustomStringConvertible {
    /// Broad classes of failure; the CLI maps them to exit codes.
    public enum Kind: String, Sendable, Hashable {
        /// The link could not be opened, or failed (port vanished, socket error).
        case transport
        /// The device did not answer in time.
        case timeout
        /// The device answered with something that breaks the protocol.
        case protocolViolation
        /// The device answered with an error code.
        case device
        /// The request or its arguments were wrong.
        case usage
        /// A local file, package or image is unusable.
        case file
        /// The operation was cancelled.
        case cancelled
    }

    public var kind: Kind
    /// What happened and what to do, for a person.
    public var message: String
    /// The device's SMP-level `rc`, when it sent one.
    public var returnCode: McuMgrReturnCode?
    /// The device's group error, when it sent one.
    public var groupError: McuMgrGroupError?
    /// The device's `rsn` explanation, when it sent one.
    public var reason: String?

    public init(
        _ kind: Kind, _ message: String, returnCode: McuMgrReturnCode? = nil,
        groupError: McuMgrGroupError? = nil, reason: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.returnCode = returnCode
        self.groupError = groupError
        self.reason = reason
    }

    public var description: String { message }

    /// The error a device status stands for, for the named operation.
    public static func device(_ status: SMPResponseStatus, operation: String) -> McuMgrError? {
        switch status {
        case .success:
            return nil
        case .returnCode(let rc, let reason):
            var message = "\(operation) failed: the device answered \(rc.name) (rc \(rc.rawValue)): \(rc.meaning)"
            if let reason, !reason.isEmpty { message += " (\(reason))" }
            if let hint = rc.hint { message += "; \(hint)" }
            return McuMgrError(.device, message, returnCode: rc, reason: reason)
        case .groupError(let error):
            let group = error.group.name ?? "group \(error.group.rawValue)"
            let message = "\(operation) failed: the device answered \(group) error \(error.name) (\(error.rc))"
            return McuMgrError(.device, message, groupError: error)
        }
    }
}
