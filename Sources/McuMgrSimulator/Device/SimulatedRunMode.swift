import McuMgrCore

/// What a simulated device is running.
public enum SimulatedRunMode: Sendable, Hashable, CustomStringConvertible {
    /// The Zephyr application (every group).
    case application
    /// MCUboot serial recovery (PROTOCOL.md 3.12): a few commands, uploads to the primary slot.
    case serialRecovery
    /// The NCS firmware loader image (slot 1), which writes the application slot.
    case firmwareLoader

    public var description: String {
        switch self {
        case .application: "application"
        case .serialRecovery: "serial recovery"
        case .firmwareLoader: "firmware loader"
        }
    }
}
