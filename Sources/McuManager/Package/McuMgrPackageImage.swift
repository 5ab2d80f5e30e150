extension McuMgrPackage {
    /// One file of a package to send to the device, as the iOS library's `ImageManager.Image`: the
    /// core's ``FirmwareUpgradeImage``, which the firmware-upgrade state machine plans with.
    public typealias Image = FirmwareUpgradeImage
}
