import McuMgrCore

/// The shared Zephyr 4.4.0 smp_svr builds in ../shared/firmware, as simulator configurations.
public enum ZephyrBuild: String, Sendable, CaseIterable {
    /// `native_sim_serial.exe`: console serial, 4 x 384-byte SMP buffers, 2 x 128-byte line buffers.
    case nativeSimSerial = "native_sim_serial"
    /// `native_sim_serial_fs.exe`: 4 x 1024-byte SMP buffers, 32 x 512-byte line buffers; os stat fs enum.
    case nativeSimSerialFS = "native_sim_serial_fs"
    /// `native_sim_udp.exe`: UDP, 2 x 2048-byte SMP buffers.
    case nativeSimUDP = "native_sim_udp"
    /// `mps2_an385_serial_recovery_buf1024.hex` alone under QEMU: MCUboot (RAM load) finds no application
    /// and stays in serial recovery: image list and upload (slot 0), console echo, reset; `rc 8` to echo,
    /// MCUmgr parameters and everything else. After an upload and a reset the app below runs.
    case mps2Recovery = "mps2_recovery"
    /// `mps2_an385_serial_recovery_buf1024.hex` + `.signed.bin` under QEMU: the Zephyr smp_svr app under
    /// MCUboot RAM load: 4 x 1024-byte SMP buffers, 2 x 128-byte line buffers, all groups, slots of
    /// 0x80000 bytes, no image state write (RAM load), the LittleFS on the storage partition.
    case mps2App = "mps2_app"
    /// `qemu_cortex_m0_serial.merged.hex` under QEMU (microbit): MCUboot swap + the Zephyr app: 4 x 384-byte
    /// SMP buffers, 2 x 128-byte line buffers, os img stat enum, slots of 0x1A000 bytes.
    case qemuCortexM0 = "qemu_cortex_m0"

    /// Its SMP buffers (`os params`), line buffers (serial builds) and groups, measured: no image group
    /// (no MCUboot), no memory-pool statistics, date-time or bootloader info in the OS group,
    /// indefinite-length maps in every answer, an empty LittleFS of four 4 KiB blocks at /lfs1.
    public var configuration: SimulatorConfiguration {
        var configuration = SimulatorConfiguration()
        switch self {
        case .nativeSimSerial:
            configuration.bufferSize = 384
            configuration.bufferCount = 4
            configuration.enabledGroups = [10, 8, 0, 3, 9, 2, 63]
        case .nativeSimSerialFS:
            configuration.bufferSize = 1024
            configuration.bufferCount = 4
            configuration.enabledGroups = [10, 8, 0, 2]
        case .nativeSimUDP:
            configuration.bufferSize = 2048
            configuration.bufferCount = 2
            configuration.enabledGroups = [10, 8, 0, 3, 9, 2, 63]
        case .mps2Recovery, .mps2App:
            configuration.bufferSize = 1024
            configuration.bufferCount = 4
            configuration.enabledGroups = [10, 8, 1, 0, 3, 9, 2, 63]
            // Measured with the guest's os params, image slot info (524288-byte slots), image state write
            // (rc 8 to test and confirm) and MCUboot's serial recovery (rc 8 to echo and params; buf 1024 by the name).
            configuration.bootloader = SimulatedBootloader(mode: .ramLoad, serialRecoveryBufferSize: 1024)
            configuration.bootloader.serialRecoveryEcho = false
            configuration.bootloader.serialRecoveryParameters = false
            configuration.imageSlotSize = 0x80000
            configuration.imageStateWrite = false
            configuration.startsWithoutApplication = self == .mps2Recovery
            configuration.fileSystemOnStoragePartition = true
        case .qemuCortexM0:
            configuration.bufferSize = 384
            configuration.bufferCount = 4
            configuration.enabledGroups = [10, 1, 0, 2]
            // MCUboot swaps (which swap is not visible over SMP: no bootloader info); slots of 0x1A000.
            configuration.bootloader = SimulatedBootloader(mode: .swapUsingMove)
            configuration.imageSlotSize = 0x1A000
        }
        configuration.disabledCommands = [0: [1, 3, 4, 8]]
        configuration.indefiniteLengthMaps = true
        configuration.initialFiles = [:]
        configuration.initialSettings = [:]
        configuration.settingsRoots = []
        configuration.settingsSaveFails = true
        configuration.boardName = "native_sim/native"
        configuration.kernelVersion = "4.4.0"
        configuration.machine = "posix"
        configuration.processor = "x86"
        configuration.hostname = "unknown"
        switch self {
        case .nativeSimSerial, .nativeSimSerialFS, .nativeSimUDP:
            break
        case .mps2Recovery, .mps2App, .qemuCortexM0:
            // The apps are the shared signed images: version 0.0.0, no max_image_size in slot info.
            configuration.appVersion = McuMgrImageVersion(major: 0, minor: 0, revision: 0)
            configuration.slotInfoMaxImageSize = false
            configuration.imageCheck = false
            configuration.statisticsGroups =
                self == .qemuCortexM0 ? ["smp_svr_stats"] : ["flash_sim_stats", "flash_sim_thresholds", "smp_svr_stats"]
            configuration.machine = "arm"
            configuration.boardName = self == .qemuCortexM0 ? "qemu_cortex_m0/nrf51822" : "mps2/an385"
            configuration.processor = self == .qemuCortexM0 ? "cortex-m0" : "cortex-m3"
        }
        return configuration
    }

    /// Its serial receive line buffers (size, count); nil for UDP.
    public var receiveLineBuffers: (size: Int, count: Int)? {
        switch self {
        case .nativeSimSerial: return (128, 2)
        // CONFIG_UART_MCUMGR_RX_BUF_COUNT 32 x 512 in the executable's symbols: three whole 1 KiB frames
        // in lines of 511 bytes, back to back, are all answered (9 lines); lines of 511 bytes taken, 515
        // dropped. Its 4 SMP buffers bound the frames one read takes (with 5 one-line frames back to back
        // the real device stopped answering in our probe: a crash, from the source).
        case .nativeSimSerialFS: return (512, 32)
        case .nativeSimUDP: return nil
        // Measured under QEMU with one-line frames and lines back to back: a line of 131 bytes is dropped
        // by all three; qemu_cortex_m0 takes 4 lines back to back and drops 5; the mps2 app and its MCUboot
        // take at least 9 (the guests free lines while the next ones arrive, so these are what a client
        // sees, not the configured buffer counts).
        case .qemuCortexM0: return (128, 4)
        case .mps2App, .mps2Recovery: return (128, 9)
        }
    }
}
