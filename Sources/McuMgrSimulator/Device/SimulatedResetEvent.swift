import McuMgrCore

/// A reboot of the simulated device, reported to the reset observer after the answer was built.
public struct SimulatedResetEvent: Sendable, Hashable {
    /// Why the device reboots.
    public enum Reason: Sendable, Hashable {
        /// OS reset command (group 0, command 5).
        case resetCommand
        /// Crash test (group 5).
        case crash
        /// `SimulatedDevice.powerCycle(now:)`.
        case powerCycle
        /// A SUIT device rebooting by itself to install a complete update.
        case update
    }

    public var reason: Reason
    /// `boot_mode` of the reset command (0 normal, 1 bootloader), when sent.
    public var bootMode: UInt64?
    /// Whether the bootloader moved image data during this reboot (swap, revert, overwrite copy, SUIT
    /// installation), which takes the configured swap time.
    public var swapped: Bool
    /// When the device actually goes down (the reset delay after the answer); links drop here.
    public var rebootAt: SMPInstant
    /// The device answers nothing until this instant (reset delay + boot time + swap time).
    public var rebootingUntil: SMPInstant
    /// How many resets the device has had, this one included.
    public var resetCount: Int
    /// What runs after this reboot.
    public var runMode: SimulatedRunMode
}
