/// The public states of a firmware upgrade, named as in the iOS library, plus reconnect and the ends.
public enum FirmwareUpgradeState: String, Sendable, Hashable, CustomStringConvertible {
    /// Not started.
    case none
    /// Reading the device's SMP buffer size and count.
    case requestMcuMgrParameters
    /// Reading the bootloader name and MCUboot mode.
    case bootloaderInfo
    /// Erasing the application settings after the upload.
    case eraseAppSettings
    /// Reading the image list to skip what the device already has.
    case validate
    /// Uploading images.
    case upload
    /// Marking images for a test boot.
    case test
    /// Resetting the device.
    case reset
    /// Firmware-loader mode: storing the loader's advertising name and resetting into the loader
    /// (boot_mode 1), as the iOS library's state of the same name.
    case resetIntoFirmwareLoader
    /// Waiting for the swap after a reset, reconnecting, and reading the image list back.
    case reconnect
    /// Confirming images (before the reset in confirmOnly, after it in testAndConfirm).
    case confirm
    /// Done.
    case success
    /// Gave up; see the failure.
    case failed
    /// Cancelled by the user.
    case cancelled

    /// Whether the upgrade is over.
    public var isTerminal: Bool { self == .success || self == .failed || self == .cancelled }

    public var description: String { rawValue }
}
