/// What a firmware upgrade does after the upload (the iOS library's `FirmwareUpgradeMode`).
public enum FirmwareUpgradeMode: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Upload, mark the image for permanent boot, reset, check it runs. The default.
    case confirmOnly
    /// Upload, mark for a test boot, reset, reconnect, confirm the running image.
    case testAndConfirm
    /// Upload, mark for a test boot, reset, check it runs unconfirmed (the next reset reverts it).
    case testOnly
    /// Upload only: no state write, no reset.
    case uploadOnly

    public var description: String { rawValue }
}
