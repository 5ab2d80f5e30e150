/// How a firmware upgrade runs (the iOS library's `FirmwareUpgradeConfiguration`). Pure values; the
/// state machine reads the flow settings, the runtime (McuManager's `FirmwareUpgradeManager`) also the
/// transfer tuning (`byteAlignment`, `reassemblyBufferSize`).
public struct FirmwareUpgradeConfiguration: Sendable, Hashable {
    /// What to do after the upload.
    public var upgradeMode: FirmwareUpgradeMode
    /// Use this bootloader mode instead of asking the device; nil asks (bootloader info).
    public var bootloaderMode: BootloaderMode?
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
    /// Upload requests in flight, within what the device's buffers take over the link; nil derives it from
    /// the device's buffer count (`LinkLimits.window`: count − 1, count / 2 over UDP).
    public var pipelineDepth: Int?
    /// Resends of a request that failed with a retriable error before giving up.
    public var maximumRetries: Int
    /// Upload chunk lengths (except the last) are rounded down to a multiple of this (1, 2, 4, 8, 16;
    /// NCS ≤ 1.7 needed 4 for pipelining). Used by the runtime.
    public var byteAlignment: Int
    /// The SMP message size the device can reassemble; nil takes its `buf_size` (MCUmgr parameters).
    /// Upload chunks fill messages of this size. Used by the runtime.
    public var reassemblyBufferSize: Int?
    /// Reset the device to install the images. When false the upgrade ends after the upload and the
    /// test/confirm state writes: the device installs the images on its next reset.
    public var performReset: Bool
    /// Firmware-loader mode (MCUboot mode 7): the name the loader should advertise over Bluetooth LE. When
    /// set, the application is asked to store it before the reset into the loader: settings write of
    /// `fw_loader/adv_name` (the UTF-8 bytes) and a settings save, as Nordic's iOS and Android libraries do
    /// (iOS `SettingsManager.setFirmwareLoaderAdvertisingName`, Android `Reset` task; the key is the one
    /// sdk-nrf-bm's settings handler takes, doc/nrf-bm/app_dev/dfu/dfu_name.rst). The driver then looks for
    /// the loader under this name. Nil: nothing is written (over serial or UDP the loader answers on the
    /// same port and needs no name).
    public var firmwareLoaderName: String?

    public init(
        upgradeMode: FirmwareUpgradeMode = .confirmOnly, bootloaderMode: BootloaderMode? = nil,
        eraseAppSettings: Bool = false, estimatedSwapTime: Duration = .zero,
        resetDelay: Duration = .seconds(1), reconnectTimeout: Duration = .seconds(60),
        retryInterval: Duration = .seconds(1), pipelineDepth: Int? = nil, maximumRetries: Int = 3,
        byteAlignment: Int = 1, reassemblyBufferSize: Int? = nil, performReset: Bool = true,
        firmwareLoaderName: String? = nil
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
        self.byteAlignment = max(1, byteAlignment)
        self.reassemblyBufferSize = reassemblyBufferSize
        self.performReset = performReset
        self.firmwareLoaderName = firmwareLoaderName
    }
}
