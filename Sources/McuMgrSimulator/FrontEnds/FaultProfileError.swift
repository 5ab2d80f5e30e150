import McuMgrCore

/// A fault option that cannot be parsed; the message says what to write instead.
public struct FaultProfileError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
