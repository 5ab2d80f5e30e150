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
