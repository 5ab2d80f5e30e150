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

/// How a device is reset.
public enum FirmwareUpgradeResetMode: Sendable, Hashable {
    /// Normal reboot into the application.
    case normal
    /// Reboot into the bootloader / firmware loader (`boot_mode` 1).
    case bootloader
}

/// What a successful upgrade did.
public struct FirmwareUpgradeSummary: Sendable, Hashable {
    /// The mode requested.
    public var mode: FirmwareUpgradeMode
    /// The bootloader mode used (from the device or the configuration).
    public var bootloaderMode: BootloaderMode
    /// Images uploaded, by image number, in order.
    public var uploadedImages: [Int]
    /// Images not uploaded because the device already had them (running or in a slot).
    public var skippedImages: [Int]
    /// Whether the device was reset to install the images.
    public var didReset: Bool
    /// Facts worth telling the user (e.g. "testOnly behaves like confirm on overwrite-only").
    public var notes: [String]
    /// Whether the device was in MCUboot's serial recovery: the images went to their primary slot (slot 0),
    /// without test or confirm.
    public var serialRecovery: Bool = false
    /// Single-application MCUboot (upgraded through serial recovery): what was checked to know the device
    /// runs the new images, in words — what recovery listed in slot 0 after the upload, and how the
    /// application answered after the reset (a Zephyr single-app application has no image group, so it
    /// cannot report its hash). Nil for the other bootloader modes, where the image list says it all.
    public var verified: String?

    public init(
        mode: FirmwareUpgradeMode, bootloaderMode: BootloaderMode, uploadedImages: [Int] = [],
        skippedImages: [Int] = [], didReset: Bool = false, notes: [String] = []
    ) {
        self.mode = mode
        self.bootloaderMode = bootloaderMode
        self.uploadedImages = uploadedImages
        self.skippedImages = skippedImages
        self.didReset = didReset
        self.notes = notes
    }
}

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
