/// The settings the firmware-upgrade state machine needs. Pure values; transfer tuning
/// (alignment, reassembly size) belongs to the runtime.
public struct FirmwareUpgradeConfiguration: Sendable, Hashable {
    /// What to do after the upload.
    public var upgradeMode: FirmwareUpgradeMode
    /// Use this bootloader mode instead of asking the device; nil asks (bootloader info).
    public var bootloaderMode: BootloaderModeKind?
    /// Erase the application settings (Zephyr basic group) after the upload. Failures are tolerated.
    public var eraseAppSettings: Bool
    /// How long the device needs after a reset to swap images before it answers (not for Direct-XIP).
    public var estimatedSwapTime: Duration
    /// Least wait after a reset before reconnecting (the device reboots ~250 ms after answering).
    public var resetDelay: Duration
    /// How long to keep trying to reach the device after the wait, before failing.
    public var reconnectTimeout: Duration
    /// Pause between reconnect or image-list attempts while the device is not back yet.
    public var retryInterval: Duration
    /// Upload requests in flight; nil derives it from the device's buffer count (count − 1).
    public var pipelineDepth: Int?
    /// Resends of a request that failed with a retriable error before giving up.
    public var maximumRetries: Int

    public init(
        upgradeMode: FirmwareUpgradeMode = .confirmOnly, bootloaderMode: BootloaderModeKind? = nil,
        eraseAppSettings: Bool = false, estimatedSwapTime: Duration = .zero,
        resetDelay: Duration = .seconds(1), reconnectTimeout: Duration = .seconds(60),
        retryInterval: Duration = .seconds(1), pipelineDepth: Int? = nil, maximumRetries: Int = 3
    ) {
        self.upgradeMode = upgradeMode
        self.bootloaderMode = bootloaderMode
        self.eraseAppSettings = eraseAppSettings
        self.estimatedSwapTime = estimatedSwapTime
        self.resetDelay = resetDelay
        self.reconnectTimeout = reconnectTimeout
        self.retryInterval = retryInterval
        self.pipelineDepth = pipelineDepth
        self.maximumRetries = maximumRetries
    }
}
