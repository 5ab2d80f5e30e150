/// Why an upgrade failed: where, and a message that says what to do.
public struct FirmwareUpgradeFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The state the upgrade was in.
    public var state: FirmwareUpgradeState
    /// What happened and what the user can do.
    public var message: String

    public init(state: FirmwareUpgradeState, message: String) {
        self.state = state
        self.message = message
    }

    public var description: String { "firmware upgrade failed (\(state)): \(message)" }
}
