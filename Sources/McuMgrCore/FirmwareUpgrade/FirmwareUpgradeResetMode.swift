/// How a device is reset.
public enum FirmwareUpgradeResetMode: Sendable, Hashable {
    /// Normal reboot into the application.
    case normal
    /// Reboot into the bootloader / firmware loader (`boot_mode` 1).
    case bootloader
}
