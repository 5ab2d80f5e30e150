import McuMgrCore

/// How a `SimulatedDevice` is built and behaves. Defaults model a Zephyr `smp_svr` sample with MCUboot
/// in swap-using-scratch mode, SMP v1 and v2, and a LittleFS mount at `/lfs1` of four 4 KiB blocks (as the
/// sample's native_sim builds in ../shared/firmware).
public struct SimulatorConfiguration: Sendable {
    /// Which SMP versions the server understands (PROTOCOL.md 1.3).
    public enum ProtocolSupport: Sendable, Hashable {
        /// A v2-aware Zephyr with the original protocol enabled (the default).
        case v1AndV2
        /// A pre-v2 server: the version bits are reserved and ignored; every answer is v1 with `rc`.
        case v1Only
        /// A v2 Zephyr with `CONFIG_MCUMGR_SMP_SUPPORT_ORIGINAL_PROTOCOL=n`: v1 requests get `rc 12`.
        case v2Only
    }

    /// `buf_size`: the largest SMP packet (header included) the device receives or sends. Longer requests
    /// are dropped silently; responses never exceed it.
    public var bufferSize: Int = 2048
    /// `buf_count`: SMP buffers shared by requests and responses.
    public var bufferCount: Int = 4
    /// The groups the build has, in the order it registers them (enumeration lists them so); nil = every
    /// group the simulator serves, by id. Requests to other groups get `rc 8`.
    public var enabledGroups: [UInt16]? = nil
    /// Commands the build lacks (group → command ids): `rc 8`, as for unknown commands.
    public var disabledCommands: [UInt16: Set<UInt8>] = [:]
    public var protocolSupport: ProtocolSupport = .v1AndV2
    /// Emit maps and arrays with indefinite lengths (`0xBF…0xFF`) like non-canonical zcbor.
    public var indefiniteLengthMaps: Bool = false
    /// Add `"rc": 0` to successful responses (`CONFIG_MCUMGR_SMP_LEGACY_RC_BEHAVIOUR`).
    public var legacyReturnCode: Bool = false

    // Identity (OS info, bootloader info, shell).
    /// Node name (`n`): network host name or Bluetooth name.
    public var hostname: String = "zephyr-sim"
    /// Hardware platform (`i`): `board[@revision]`.
    public var boardName: String = "nrf52840dk/nrf52840"
    /// Kernel version (`v`) and the version the shell's `kernel version` prints.
    public var kernelVersion: String = "3.7.0"
    /// Kernel release (`r`): the build version.
    public var kernelRelease: String = "v3.7.0-sim"
    /// Build date and time (`b`).
    public var buildDateTime: String = "Jan  1 2026 00:00:00"
    /// Machine (`m`).
    public var machine: String = "arm"
    /// Processor (`p`).
    public var processor: String = "cortex-m4"
    /// The bootloader: MCUboot's mode and options. Decides how test, confirm, reset and upload behave and
    /// what bootloader info reports. Ignored when `suit` is set.
    public var bootloader: SimulatedBootloader = SimulatedBootloader()
    /// A SUIT device (nRF54H style, PROTOCOL.md 3.11) instead of an MCUboot one: group 66, the image
    /// group's SUIT view, `rc` in every answer, bootloader info "SUIT". Nil = MCUboot.
    public var suit: SimulatedSUITConfiguration? = nil

    // Images.
    /// Version of the initial image in every primary slot.
    public var appVersion: McuMgrImageVersion = McuMgrImageVersion(major: 1, minor: 0, revision: 0)
    /// Number of updatable images (`CONFIG_UPDATEABLE_IMAGE_NUMBER`), each with two slots.
    public var imageCount: Int = 1
    /// Size of every image slot in bytes; larger uploads fail with IMG err 30.
    public var imageSlotSize: Int = 0x76000
    /// Body size of the initial images.
    public var initialImageBodySize: Int = 2048
    /// Start with no application (an empty primary slot): MCUboot stays in serial recovery (as the shared
    /// mps2_an385 MCUboot does when QEMU loads no app), until an uploaded image boots after a reset.
    public var startsWithoutApplication: Bool = false
    /// Slot info reports `max_image_size` per image (`CONFIG_MCUMGR_GRP_IMG_TOO_LARGE_SYSBUILD` or
    /// `_BOOTLOADER_INFO`); the shared QEMU builds have neither.
    public var slotInfoMaxImageSize: Bool = true
    /// Flash address of image 0's primary slot; the other slots follow at `imageSlotSize` intervals
    /// (image 0 slot 1, image 1 slot 0, ...). Direct-XIP checks a ROM-fixed image's load address against it.
    public var imageSlotBaseAddress: UInt32 = 0x0000_C000
    /// The image group answers state writes (test, confirm). Off: `rc 8` to every one, as the shared
    /// mps2_an385 app under MCUboot RAM load answers (measured). Generic `ramLoad` keeps state writes for
    /// now (the firmware-upgrade flow confirms in RAM-load mode); the real RAM-load build suggests it has none.
    public var imageStateWrite: Bool = true
    /// `CONFIG_IMG_ENABLE_IMAGE_CHECK`: an upload whose `sha` matches what the slot already holds is
    /// answered at once, and the last chunk's answer carries `match`. The shared QEMU builds have neither.
    public var imageCheck: Bool = true
    /// Check the SHA-256 TLV of a completed upload against header and body (IMG err 24 on mismatch).
    public var verifyUploadedImageHash: Bool = true
    /// Allow confirming the primary slot of a non-active image
    /// (`CONFIG_MCUMGR_GRP_IMG_ALLOW_CONFIRM_NON_ACTIVE_IMAGE_ANY`); otherwise IMG err 32.
    public var allowConfirmNonActiveImageAny: Bool = false
    /// Allow erasing a secondary slot marked for test or permanent before the reset
    /// (`CONFIG_MCUMGR_GRP_IMG_ALLOW_ERASE_PENDING`, default y in Zephyr's img_mgmt Kconfig); a slot a
    /// revert would boot stays refused (IMG err 9). Off: pending slots are refused too.
    public var allowErasePending: Bool = true

    // Reset.
    /// Time between answering a reset and the reboot (`CONFIG_MCUMGR_GRP_OS_RESET_MS`).
    public var resetDelay: Duration = .milliseconds(250)
    /// Extra boot time when MCUboot swaps images; front ends stay silent for it. Zero by default.
    public var swapTime: Duration = .zero
    /// Time the device needs to boot after the reset before it answers again.
    public var bootTime: Duration = .milliseconds(50)

    // Clock.
    /// Unix time (seconds) the RTC shows at first boot; nil = the host's wall clock.
    public var initialUnixTime: Int64? = nil

    // File system.
    /// The mount point; paths must start with it (Zephyr's smp_svr sample mounts LittleFS at `/lfs1`).
    public var mountPoint: String = "/lfs1"
    /// Files present at start (absolute paths under `mountPoint`).
    public var initialFiles: [String: [UInt8]] = [
        "/lfs1/settings.txt": Array("boot_count=1\nname=zephyr-sim\n".utf8),
        "/lfs1/hello.txt": Array("Hello from the simulated device!\n".utf8),
    ]
    /// LittleFS block size in bytes.
    public var fileSystemBlockSize: Int = 4096
    /// LittleFS blocks (two go to the root directory); a write beyond the free blocks fails with FS err
    /// 10 (FILE_WRITE_FAILED). Nil = unlimited. The default 4 x 4 KiB is the shared native_sim builds'
    /// file system: one file of up to 8188 bytes, or two of up to 4096.
    public var fileSystemBlockCount: Int? = 4
    /// The file system lies on the storage partition that the Zephyr basic group's erase wipes (smp_svr's
    /// layout): after that erase every file operation under the mount point fails with FS err 1 (UNKNOWN)
    /// until the next reset, which mounts an empty file system (Zephyr's LittleFS formats a partition it
    /// cannot mount). Measured on the shared mps2_an385 app.
    public var fileSystemOnStoragePartition: Bool = false
    /// A file left open by an upload or download is closed (and committed) after this much idle time
    /// (`CONFIG_MCUMGR_GRP_FS_FILE_AUTOMATIC_IDLE_CLOSE_TIME`; between 3 and 4.5 s measured on
    /// native_sim_udp 4.4.0).
    public var fileIdleCloseTime: Duration = .seconds(4)
    /// Largest file-download chunk (`CONFIG_MCUMGR_GRP_FS_DL_CHUNK_SIZE`); nil = Zephyr's default,
    /// `bufferSize` - 44 (2004 bytes at buf_size 2048, measured on native_sim_udp 4.4.0).
    public var downloadChunkSize: Int? = nil

    // Statistics.
    /// The statistics groups, in the order `stat list` gives them (from smp_svr_stats, smp, ble,
    /// flash_sim_stats, flash_sim_thresholds); nil = smp_svr_stats, smp, ble.
    public var statisticsGroups: [String]? = nil

    // Settings.
    /// Settings present (saved) at start.
    public var initialSettings: [String: [UInt8]] = [
        "app/name": Array("zephyr-sim".utf8),
        "app/boot_count": [1, 0, 0, 0],
    ]
    /// Largest value the settings read returns (`CONFIG_MCUMGR_GRP_SETTINGS_VALUE_LEN`).
    public var settingsValueLimit: Int = 256
    /// Longest settings key (`CONFIG_MCUMGR_GRP_SETTINGS_NAME_LEN`); longer → settings err 2.
    public var settingsNameLimit: Int = 64
    /// The settings subtrees with a registered handler (the part before the first `/`); nil = any key is
    /// accepted. Reading or writing a key under another root is ROOT_KEY_NOT_FOUND (settings err 5) and
    /// deleting one KEY_NOT_FOUND (3), as on native_sim_udp 4.4.0, which registers none.
    public var settingsRoots: Set<String>? = nil
    /// `settings save` fails with SAVE_FAILED (settings err 8), as on native_sim_udp 4.4.0.
    public var settingsSaveFails: Bool = false

    public init() {}

    /// MCUboot mode number reported by bootloader info `query: "mode"` (`bootloader.mode`); setting a number
    /// MCUboot does not define here is ignored.
    public var bootloaderMode: Int {
        get { bootloader.mode.rawValue }
        set { if let mode = SimulatedBootloader.Mode(rawValue: newValue) { bootloader.mode = mode } }
    }

    /// Report `"no-downgrade": true` with the bootloader mode (`bootloader.noDowngrade`).
    public var noDowngrade: Bool {
        get { bootloader.noDowngrade }
        set { bootloader.noDowngrade = newValue }
    }

    /// The flash address of an image slot (`slot` 0 = primary, 1 = secondary), as a Direct-XIP build for
    /// that slot carries it in `ih_load_addr` with the ROM-fixed flag.
    public func slotAddress(image: Int, slot: Int) -> UInt32 {
        imageSlotBaseAddress &+ UInt32(truncatingIfNeeded: (image * 2 + slot) * imageSlotSize)
    }

    /// Convenience for `protocolSupport == .v1Only`: a pre-v2 server.
    public var v1Only: Bool {
        get { protocolSupport == .v1Only }
        set { protocolSupport = newValue ? .v1Only : .v1AndV2 }
    }

    /// Whether the build serves a group and command (before the operation is checked).
    func serves(group: UInt16, command: UInt8) -> Bool {
        if let enabledGroups, !enabledGroups.contains(group) { return false }
        return !(disabledCommands[group]?.contains(command) ?? false)
    }
}
