import McuMgrCore

/// Everything the simulated device remembers, and the SMP server loop that answers packets. A value
/// type: `SimulatedDevice` guards one with a lock.
struct DeviceState: Sendable {
    let configuration: SimulatorConfiguration
    var images: ImageBank
    var files: FileStore
    var settings: SettingsStore
    var stats: StatsRegistry
    var log: DeviceLog
    /// When the current boot started; set on the first request.
    var bootInstant: SMPInstant?
    /// RTC: wall time (Unix ns) at an instant; nil until set or first read.
    var rtc: (unixNanoseconds: Int64, at: SMPInstant)?
    var resetCount = 0
    var rebootingUntil: SMPInstant?
    /// The instant of the request being handled.
    var now: SMPInstant = .zero
    /// A reset requested by the request being handled; run after its response is built.
    var requestedReset: (reason: SimulatedResetEvent.Reason, bootMode: UInt64?)?
    /// How long the device works on the packet just handled before it answers (serial recovery's flash
    /// erases); whatever arrives meanwhile waits.
    var busyTime: Duration = .zero
    /// MCUboot serial recovery's upload state (its offset and erase progress).
    var recoveryUpload: RecoveryUpload?
    /// What is running: the application, MCUboot serial recovery, or the firmware loader.
    var runMode: SimulatedRunMode = .application
    /// The SUIT side of a SUIT device.
    var suit: SUITState?
    /// The requests of the packet being handled, in order (what `SimulatedDevice`'s request observer is told).
    var received: [SimulatedRequestRecord] = []

    init(configuration: SimulatorConfiguration) {
        self.configuration = configuration
        images = ImageBank(configuration: configuration)
        files = FileStore(
            mountPoint: configuration.mountPoint, files: configuration.initialFiles,
            geometry: configuration.fileSystemBlockCount.map {
                FileStore.Geometry(blockSize: configuration.fileSystemBlockSize, blockCount: $0)
            })
        settings = SettingsStore(saved: configuration.initialSettings)
        stats = StatsRegistry()
        log = DeviceLog()
        log.append("Booting Zephyr OS build \(configuration.kernelRelease)", level: 1, at: 0)
        if let suitConfiguration = configuration.suit { suit = SUITState(configuration: suitConfiguration) }
        if configuration.startsWithoutApplication && configuration.suit == nil {
            for index in images.pairs.indices { images.pairs[index].slots[0] = ImageBank.Slot() }
            if configuration.bootloader.serialRecovery { runMode = .serialRecovery }
        }
    }

    /// Whether successful answers carry `"rc": 0`: legacy builds, SUIT devices (mandatory there) and MCUboot
    /// serial recovery.
    var includesReturnCode: Bool {
        configuration.legacyReturnCode || configuration.suit != nil || runMode == .serialRecovery
    }

    /// `buf_size` of what is running now.
    var bufferSize: Int {
        switch runMode {
        case .serialRecovery: configuration.bootloader.serialRecoveryBufferSize
        case .firmwareLoader: configuration.bootloader.firmwareLoaderBufferSize ?? configuration.bufferSize
        default: configuration.bufferSize
        }
    }

    /// Uptime of the current boot.
    var uptime: Duration { now - (bootInstant ?? now) }

    // MARK: Packet handling

    /// Answers every request in a transport packet (several may be concatenated), in order, stopping
    /// after the first that fails at the SMP level. Empty when nothing is answered.
    mutating func process(_ packet: [UInt8], now: SMPInstant) -> [[UInt8]] {
        self.now = now
        if bootInstant == nil { bootInstant = now }
        guard packet.count >= SMPHeader.size, packet.count <= bufferSize else { return [] }
        if runMode == .serialRecovery { return processRecovery(packet) }
        var responses: [[UInt8]] = []
        var start = 0
        while packet.count - start >= SMPHeader.size {
            let (response, consumed, stop) = processOne(packet, from: start)
            // Mynewt's crash test faults inside the handler: the device reboots without answering.
            if requestedReset?.reason == .crash { break }
            responses.append(response)
            stats.count(requestBytes: consumed, responseBytes: response.count)
            start += consumed
            if stop { break }
        }
        return responses
    }

    /// Handles the request starting at `start`; returns the response, the bytes consumed and whether
    /// to stop processing the packet.
    private mutating func processOne(_ packet: [UInt8], from start: Int) -> ([UInt8], Int, Bool) {
        let b0 = packet[start]
        let opBits = b0 & 0b111
        let versionBits = (b0 >> 3) & 0b11
        let length = Int(packet[start + 2]) << 8 | Int(packet[start + 3])
        let group = McuMgrGroup(rawValue: UInt16(packet[start + 4]) << 8 | UInt16(packet[start + 5]))
        let sequence = packet[start + 6]
        let command = McuMgrCommand(rawValue: packet[start + 7])
        // smp_make_rsp_hdr: READ → READ_RSP, anything else → WRITE_RSP.
        let responseOperation: SMPOperation = opBits == 0 ? .readResponse : .writeResponse
        if let operation = SMPOperation(rawValue: opBits), !operation.isResponse {
            received.append(SimulatedRequestRecord(operation: operation, group: group, command: command))
        }

        // The version the request is handled in and the version of the response header.
        let handledVersion: SMPVersion
        let responseVersion: SMPVersion
        var versionError: Int?
        switch configuration.protocolSupport {
        case .v1Only:
            handledVersion = .v1
            responseVersion = .v1
        case .v1AndV2, .v2Only:
            handledVersion = versionBits == 0 ? .v1 : .v2
            responseVersion = handledVersion
            if versionBits >= 2 {
                versionError = McuMgrReturnCode.unsupportedTooNew.rawValue
            } else if versionBits == 0 && configuration.protocolSupport == .v2Only {
                versionError = McuMgrReturnCode.unsupportedTooOld.rawValue
            }
        }

        let available = packet.count - start - SMPHeader.size
        let outcome: SimulatedOutcome
        var consumed = SMPHeader.size + min(length, available)
        if let versionError {
            outcome = .returnCode(versionError)
        } else if length > available {
            outcome = .returnCode(McuMgrReturnCode.corrupt.rawValue)
            consumed = packet.count - start
        } else if let operation = SMPOperation(rawValue: opBits), !operation.isResponse,
            SupportedCommands.accepts(group: group.rawValue, command: command.rawValue, operation: operation),
            configuration.serves(group: group.rawValue, command: command.rawValue),
            runMode != .firmwareLoader || Self.firmwareLoaderServes(group: group, command: command.rawValue)
        {
            let payloadStart = start + SMPHeader.size
            let request = SimulatedRequest(
                operation: operation, version: handledVersion, group: group, command: command,
                payload: packet[payloadStart..<(payloadStart + length)])
            do {
                outcome = try dispatch(request)
            } catch {
                outcome = error.outcome
            }
        } else {
            outcome = .returnCode(McuMgrReturnCode.notSupported.rawValue)
        }

        var payload = encode(outcome, version: handledVersion)
        if payload.count + SMPHeader.size > bufferSize {
            payload = encode(.returnCode(McuMgrReturnCode.messageTooLarge.rawValue), version: handledVersion)
        }
        let header = SMPHeader(
            version: responseVersion, operation: responseOperation, length: UInt16(payload.count),
            group: group, sequence: sequence, command: command)
        var stop = false
        if case .returnCode = outcome { stop = true }
        return (header.bytes + payload, consumed, stop)
    }

    /// What the firmware loader image answers: the nRF Connect SDK fw_loader BLE MCUmgr sample
    /// (samples/mcuboot/firmware_loader_entrance/sysbuild/ble_mcumgr/prj.conf) builds the OS group with
    /// reset, MCUmgr parameters and bootloader info (echo and OS info off), the image group and the Zephyr
    /// basic group's storage erase; no settings, file system, statistics or shell. The rest is rc 8.
    static func firmwareLoaderServes(group: McuMgrGroup, command: UInt8) -> Bool {
        switch group {
        case .os: [5, 6, 8].contains(command)
        case .image, .zephyrBasic: true
        default: false
        }
    }

    func encode(_ outcome: SimulatedOutcome, version: SMPVersion) -> [UInt8] {
        var entries: [CBORMapEntry]
        switch outcome {
        case .success(let body):
            entries = body
            if includesReturnCode { entries.append("rc", 0) }
        case .groupError(let group, let rc, let extra):
            if version == .v1 {
                // Only the translated rc: keys that go with a v2 error are not sent (measured on
                // native_sim_udp 4.4.0: the fs offset error's `len` is missing in v1).
                entries = [CBORMapEntry(key: "rc", value: .int(ErrorTranslation.v1ReturnCode(group: group, rc: rc)))]
            } else {
                entries = [
                    CBORMapEntry(
                        key: "err",
                        value: .map(.entries(["group": .unsigned(UInt64(group.rawValue)), "rc": .int(rc)])))
                ]
                entries.append(contentsOf: extra)
            }
        case .returnCode(let rc):
            entries = [CBORMapEntry(key: "rc", value: .int(rc))]
        }
        return ResponseEncoder.encode(.map(entries), indefiniteLengths: configuration.indefiniteLengthMaps)
    }

    private mutating func dispatch(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch request.group {
        case .os: return try handleOS(request)
        case .image: return try handleImage(request)
        case .stats: return try handleStats(request)
        case .settings: return try handleSettings(request)
        case .log: return try handleLog(request)
        case .crash: return try handleCrash(request)
        case .run: return try handleRunTest(request)
        case .fileSystem: return try handleFileSystem(request)
        case .shell: return try handleShell(request)
        case .enumeration: return try handleEnumeration(request)
        case .zephyrBasic: return try handleBasic(request)
        case McuMgrGroup(rawValue: SUITState.group) where suit != nil: return try handleSUIT(request)
        default: throw .notSupported
        }
    }

    /// The largest response payload (CBOR bytes) that still fits one buffer.
    var maximumPayload: Int { configuration.bufferSize - SMPHeader.size }

    /// Encoded size of a response map with these entries, as it would be sent.
    func encodedSize(_ entries: [CBORMapEntry]) -> Int {
        var entries = entries
        if includesReturnCode { entries.append("rc", 0) }
        return ResponseEncoder.encode(.map(entries), indefiniteLengths: configuration.indefiniteLengthMaps).count
    }

    // MARK: Reset

    /// Reboots: MCUboot applies pending swaps (or a SUIT device installs its candidate), volatile state is
    /// lost. `bootMode` 1 enters serial recovery, or the firmware loader in that mode. Returns the event to
    /// report.
    mutating func reboot(reason: SimulatedResetEvent.Reason, bootMode: UInt64?) -> SimulatedResetEvent {
        let bootloader = configuration.bootloader
        var swapped = false
        images.upload = nil
        recoveryUpload = nil
        if suit != nil {
            swapped = suit!.boot()
            runMode = .application
        } else if bootMode == 1 && bootloader.mode == .firmwareLoader {
            runMode = .firmwareLoader
            images.pairs[0].activeSlot = 1
        } else if bootMode == 1 && bootloader.serialRecovery {
            runMode = .serialRecovery
        } else {
            swapped = images.boot()
            runMode = .application
            // No application to run: MCUboot stays in (or falls back to) the loader or serial recovery.
            let active = images.activeSlot(of: 0)
            if !images.isBootable(image: 0, slot: active) {
                if bootloader.mode == .firmwareLoader {
                    runMode = .firmwareLoader
                    images.pairs[0].activeSlot = 1
                } else if bootloader.serialRecovery {
                    runMode = .serialRecovery
                }
            }
        }
        resetCount += 1
        // A crash takes the device down at once; a reset command answers first and waits its delay.
        let delay = reason == .crash ? Duration.zero : configuration.resetDelay
        let rebootAt = now + delay
        var downtime = delay + configuration.bootTime
        if swapped { downtime += configuration.swapTime }
        let until = now + downtime
        rebootingUntil = until
        bootInstant = until
        // A reboot does not close files: writes of an open upload that were never committed are lost.
        files.abandonTransfer()
        files.remountAfterErase()
        settings.reload()
        stats.reset()
        log.append(
            "Reset (\(reason)); boot \(resetCount)\(swapped ? ", image swapped" : "")"
                + (runMode == .application ? "" : ", \(runMode)"), level: 1,
            at: UInt64(until.nanoseconds / 1000))
        return SimulatedResetEvent(
            reason: reason, bootMode: bootMode, swapped: swapped, rebootAt: rebootAt, rebootingUntil: until,
            resetCount: resetCount, runMode: runMode)
    }
}
