/// One entry of the device's image list (image group, state read), as the state machine sees it.
/// Missing flags are false (frugal lists encode only true flags).
public struct DeviceImageSlot: Sendable, Hashable {
    /// Image number (absent on single-image devices → 0).
    public var image: Int
    /// Slot within the image: 0 primary, 1 secondary.
    public var slot: Int
    /// Version string, `major.minor.revision[.build]`.
    public var version: String
    /// The image hash (SHA-256 TLV); empty when the device did not send one.
    public var hash: [UInt8]
    /// Currently running.
    public var active: Bool
    /// Confirmed image.
    public var confirmed: Bool
    /// Scheduled for the next boot (test or permanent).
    public var pending: Bool
    /// Will remain after the next boot.
    public var permanent: Bool
    /// Not flagged non-bootable.
    public var bootable: Bool

    public init(
        image: Int = 0, slot: Int, version: String = "", hash: [UInt8], active: Bool = false,
        confirmed: Bool = false, pending: Bool = false, permanent: Bool = false, bootable: Bool = true
    ) {
        self.image = image
        self.slot = slot
        self.version = version
        self.hash = hash
        self.active = active
        self.confirmed = confirmed
        self.pending = pending
        self.permanent = permanent
        self.bootable = bootable
    }
}
