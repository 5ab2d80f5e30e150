/// A change of public state, for the driver's event stream.
public struct FirmwareUpgradeStateChange: Sendable, Hashable {
    /// The state left.
    public var previous: FirmwareUpgradeState
    /// The state entered.
    public var current: FirmwareUpgradeState
    public init(previous: FirmwareUpgradeState, current: FirmwareUpgradeState) {
        self.previous = previous
        self.current = current
    }
}
