/// The bootloader a simulated device runs: MCUboot in one of its modes, with the options that change what
/// SMP clients see (PROTOCOL.md 3.1, 3.2, 3.12). A SUIT device is configured with
/// `SimulatorConfiguration.suit` instead.
public struct SimulatedBootloader: Sendable, Hashable {
    /// MCUboot's mode of operation. Raw values are MCUboot's `enum mcuboot_mode`
    /// (boot/bootutil/include/bootutil/boot_status.h), which Zephyr's bootloader info reports as `mode`.
    public enum Mode: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// 0: one application slot; updates go through serial recovery (reset with `boot_mode` 1).
        case singleApplication = 0
        /// 1: swap using a scratch area: test → swap on reset → revert unless confirmed.
        case swapUsingScratch = 1
        /// 2: overwrite (upgrade) only: test or confirm copy the secondary slot over the primary on reset,
        /// permanently; the secondary slot is empty afterwards; no revert.
        case overwriteOnly = 2
        /// 3: swap without scratch (swap using move): swap semantics.
        case swapUsingMove = 3
        /// 4: Direct-XIP without revert: both slots run in place; the higher version boots; no state write.
        case directXIP = 4
        /// 5: Direct-XIP with revert: test marks the inactive slot, it boots once unconfirmed, a second
        /// reset without confirm erases it and boots the other slot.
        case directXIPWithRevert = 5
        /// 6: RAM load: the higher version is copied to RAM and runs; no revert.
        case ramLoad = 6
        /// 7: firmware loader (NCS): the application runs from slot 0; reset with `boot_mode` 1 runs a
        /// separate loader image (slot 1) that writes the application slot.
        case firmwareLoader = 7
        /// 9: swap using offset: swap semantics. (8 is single-slot RAM load, not modelled.)
        case swapUsingOffset = 9

        /// The name `smp-sim --bootloader-mode` and `sim:?mode=` take.
        public var name: String {
            switch self {
            case .singleApplication: "single-app"
            case .swapUsingScratch: "swap-scratch"
            case .overwriteOnly: "overwrite"
            case .swapUsingMove: "swap-move"
            case .directXIP: "direct-xip"
            case .directXIPWithRevert: "direct-xip-revert"
            case .ramLoad: "ram-load"
            case .firmwareLoader: "firmware-loader"
            case .swapUsingOffset: "swap-offset"
            }
        }

        /// A mode by its name (`swap-scratch`, ...) or its number (`1`, ...); nil if unknown.
        public init?(name: String) {
            let lowered = name.lowercased()
            if let mode = Self.allCases.first(where: { $0.name == lowered }) {
                self = mode
            } else if let number = Int(lowered), let mode = Mode(rawValue: number) {
                self = mode
            } else {
                return nil
            }
        }

        /// All names, for help texts and error messages.
        public static var names: [String] { allCases.map(\.name) }

        public var description: String { name }

        /// Swap using scratch, move or offset: the image is swapped into the primary slot on reset.
        public var swaps: Bool { self == .swapUsingScratch || self == .swapUsingMove || self == .swapUsingOffset }

        /// Direct-XIP or RAM load: both slots hold runnable images; the higher version boots.
        public var bootsHigherVersion: Bool { self == .directXIP || self == .directXIPWithRevert || self == .ramLoad }
    }

    /// The mode.
    public var mode: Mode
    /// Downgrade prevention (`"no-downgrade": true` in bootloader info).
    public var noDowngrade: Bool
    /// A reset with `boot_mode` 1 enters MCUboot serial recovery (PROTOCOL.md 3.12) until the next reset
    /// (in firmware-loader mode it runs the loader image instead).
    public var serialRecovery: Bool
    /// `MCUBOOT_SERIAL_MAX_RECEIVE_SIZE`: the `buf_size` serial recovery reports and accepts.
    public var serialRecoveryBufferSize: Int
    /// Serial recovery answers echo (`MCUBOOT_BOOT_MGMT_ECHO`); otherwise `rc 8`, as the shared mps2_an385
    /// MCUboot does.
    public var serialRecoveryEcho: Bool = true
    /// Serial recovery answers MCUmgr parameters (`buf_size`, `buf_count` 1); otherwise `rc 8`, as the shared
    /// mps2_an385 MCUboot does.
    public var serialRecoveryParameters: Bool = true
    /// Serial recovery erases flash progressively (`MCUBOOT_ERASE_PROGRESSIVELY`): before writing a chunk it
    /// erases every sector of this size the chunk reaches that is not erased yet.
    public var serialRecoveryEraseSectorSize: Int = 4096
    /// How long erasing one sector takes; a chunk that erases is answered that much later per sector, and
    /// whatever arrives meanwhile waits (the bootloader does one thing at a time). Default: a sector-erasing
    /// chunk took 376 ms on MCUboot's raw serial recovery (issue 22). Zero: no delay.
    public var serialRecoveryEraseTime: Duration = .milliseconds(376)
    /// Raw framing: the bytes serial recovery's UART adapter stores while the bootloader erases (its free
    /// line buffers: 7 of `CONFIG_BOOT_LINE_BUFS` 8 x 128 bytes, one being held by the bootloader); it drops
    /// what arrives beyond them until the erase ends. nil: nothing is dropped.
    public var serialRecoveryBusyReceiveLimit: Int? = 7 * 128

    /// Firmware-loader mode: the name the loader advertises over Bluetooth LE when the application stored
    /// none in `fw_loader/adv_name` (the nRF Connect SDK fw_loader BLE MCUmgr sample's
    /// `CONFIG_BT_DEVICE_NAME`, samples/mcuboot/firmware_loader_entrance/sysbuild/ble_mcumgr/prj.conf).
    public var firmwareLoaderName: String = "FW loader"
    /// Firmware-loader mode: the loader's SMP buffer (`buf_size`), its own build's
    /// `CONFIG_MCUMGR_TRANSPORT_NETBUF_SIZE` (1220 in the fw_loader BLE MCUmgr sample: one packet in five
    /// writes of the largest ATT payload); nil: the application's.
    public var firmwareLoaderBufferSize: Int? = 1220

    /// Creates a bootloader.
    public init(
        mode: Mode = .swapUsingScratch, noDowngrade: Bool = false, serialRecovery: Bool = true,
        serialRecoveryBufferSize: Int = 1024
    ) {
        self.mode = mode
        self.noDowngrade = noDowngrade
        self.serialRecovery = serialRecovery
        self.serialRecoveryBufferSize = serialRecoveryBufferSize
    }

    /// MCUboot in `mode` with the other settings at their defaults.
    public static func mcuboot(_ mode: Mode) -> SimulatedBootloader { SimulatedBootloader(mode: mode) }
}
