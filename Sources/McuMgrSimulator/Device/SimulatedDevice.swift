import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// A simulated Zephyr/MCUboot device that answers SMP requests: OS, image (two slots per image with
/// MCUboot swap/test/confirm/revert semantics), statistics, settings, log, crash, run-test, file
/// system, shell, enumeration and Zephyr basic groups (PROTOCOL.md).
///
/// Front ends feed it whole SMP packets and write back what it returns. Thread-safe: every call takes
/// an internal lock. After a reset the device answers (the reset command is acknowledged) and then
/// "reboots": `rebootingUntil` says until when a front end should stay silent; `handle` itself keeps
/// answering, so a front end decides how to model the outage.
public final class SimulatedDevice: @unchecked Sendable {
    public let configuration: SimulatorConfiguration
    private let lock = NIOLock()
    private var state: DeviceState
    private var resetObservers: [Int: @Sendable (SimulatedResetEvent) -> Void] = [:]
    private var requestObserver: (@Sendable (SimulatedRequestRecord) -> Void)?
    private var nextObserverID = 1

    public init(configuration: SimulatorConfiguration = SimulatorConfiguration()) {
        self.configuration = configuration
        self.state = DeviceState(configuration: configuration)
    }

    private func withState<T>(_ body: (inout DeviceState) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    /// Answers one SMP request packet with the whole response packet; nil when a device would stay
    /// silent (fewer than 8 bytes, or more than `bufferSize`). Several requests concatenated in one
    /// packet get their responses concatenated (see `responses(to:now:)` to keep them apart).
    /// - Parameter now: the current instant on a monotonic clock (uptime, RTC, reboot window); nil =
    ///   the host's monotonic clock.
    public func handle(_ request: [UInt8], now: SMPInstant? = nil) -> [UInt8]? {
        let responses = self.responses(to: request, now: now)
        guard !responses.isEmpty else { return nil }
        return responses.count == 1 ? responses[0] : Array(responses.joined())
    }

    /// The responses to every request in a packet, one packet each, in order; empty when silent.
    public func responses(to request: [UInt8], now: SMPInstant? = nil) -> [[UInt8]] {
        responsesAndBusyTime(to: request, now: now).responses
    }

    /// The responses to every request in a packet, and how long the device works on them before it answers
    /// (MCUboot serial recovery erasing flash sectors; zero otherwise). A front end holds the answers, and
    /// what arrives next, for that long.
    public func responsesAndBusyTime(to request: [UInt8], now: SMPInstant? = nil) -> (responses: [[UInt8]], busy: Duration) {
        let instant = now ?? SystemClock.monotonicNow()
        var busy = Duration.zero
        let (responses, event, observers): ([[UInt8]], SimulatedResetEvent?, [@Sendable (SimulatedResetEvent) -> Void]) =
            withState { state in
                state.requestedReset = nil
                state.busyTime = .zero
                state.received.removeAll(keepingCapacity: true)
                let responses = state.process(request, now: instant)
                if let requestObserver {
                    for record in state.received { requestObserver(record) }
                }
                busy = state.busyTime
                var event: SimulatedResetEvent?
                if let reset = state.requestedReset {
                    state.requestedReset = nil
                    event = state.reboot(reason: reset.reason, bootMode: reset.bootMode)
                }
                return (responses, event, observersInOrder)
            }
        if let event { for observer in observers { observer(event) } }
        return (responses, busy)
    }

    /// Called with every request the device receives (one call per request of a packet, in order), under
    /// the device's lock before the answer is returned: when a client has its answer, the observer has
    /// seen its request. For tests that count a command's requests (its round-trip budget); nil stops it.
    /// The observer must not call back into the device.
    public func setRequestObserver(_ observer: (@Sendable (SimulatedRequestRecord) -> Void)?) {
        withState { _ in requestObserver = observer }
    }

    /// Reboots the device as if its power were cycled: MCUboot applies pending swaps or reverts.
    @discardableResult
    public func powerCycle(now: SMPInstant? = nil) -> SimulatedResetEvent {
        let instant = now ?? SystemClock.monotonicNow()
        let (event, observers) = withState { state in
            state.now = instant
            return (state.reboot(reason: .powerCycle, bootMode: nil), observersInOrder)
        }
        for observer in observers { observer(event) }
        return event
    }

    /// Reboots the device as a reset command would (`bootMode` 1: serial recovery or firmware loader).
    @discardableResult
    public func reset(bootMode: UInt64? = nil, now: SMPInstant? = nil) -> SimulatedResetEvent {
        let instant = now ?? SystemClock.monotonicNow()
        let (event, observers) = withState { state in
            state.now = instant
            return (state.reboot(reason: .resetCommand, bootMode: bootMode), observersInOrder)
        }
        for observer in observers { observer(event) }
        return event
    }

    private var observersInOrder: [@Sendable (SimulatedResetEvent) -> Void] {
        resetObservers.keys.sorted().map { resetObservers[$0]! }
    }

    /// Called (outside the lock, on the caller's thread) after every reboot, e.g. so a test can follow
    /// reboots. Replaces the observer set by an earlier call; front ends use `addResetObserver`.
    public func setResetObserver(_ observer: (@Sendable (SimulatedResetEvent) -> Void)?) {
        withState { _ in resetObservers[0] = observer }
    }

    /// Adds an observer called (outside the lock) after every reboot; returns a token for
    /// `removeResetObserver`.
    @discardableResult
    public func addResetObserver(_ observer: @escaping @Sendable (SimulatedResetEvent) -> Void) -> Int {
        withState { _ in
            let id = nextObserverID
            nextObserverID += 1
            resetObservers[id] = observer
            return id
        }
    }

    /// Removes an observer added with `addResetObserver`.
    public func removeResetObserver(_ token: Int) {
        withState { _ in resetObservers[token] = nil }
    }

    /// `buf_size` of what runs now (the application's, or serial recovery's).
    public var currentBufferSize: Int { withState { $0.bufferSize } }

    /// What the device runs now (application, serial recovery, firmware loader).
    public var runMode: SimulatedRunMode { withState { $0.runMode } }

    /// A SUIT device's installed application root manifest: sequence number and digest; nil for MCUboot.
    public var suitRootManifest: (sequenceNumber: UInt64, digest: [UInt8])? {
        withState { state in state.suit.map { ($0.sequenceNumber, $0.digest) } }
    }

    /// A SUIT device's installed components by resource URI (e.g. "file://app.bin"); empty for MCUboot.
    public var suitInstalledResources: [String: [UInt8]] { withState { $0.suit?.installed ?? [:] } }

    /// The offset of the image upload in progress (the next byte the device expects), nil if none.
    public var imageUploadOffset: Int? { withState { $0.images.upload?.offset } }

    /// How many times the device has rebooted.
    public var resetCount: Int { withState { $0.resetCount } }

    /// The end of the last reboot window (see `isRebooting(at:)`); nil if the device never rebooted.
    public var rebootingUntil: SMPInstant? { withState { $0.rebootingUntil } }

    /// Whether the device is still rebooting at `now` (nil = the host's monotonic clock) and should not
    /// answer.
    public func isRebooting(at now: SMPInstant? = nil) -> Bool {
        guard let until = rebootingUntil else { return false }
        return (now ?? SystemClock.monotonicNow()) < until
    }

    // MARK: Inspection (tests, demos)

    /// The images in their slots, as the image list reports them.
    public var imageSlots: [SimulatedImageSlot] {
        withState { state in
            var result: [SimulatedImageSlot] = []
            for image in 0..<state.images.imageCount {
                for slot in 0..<2 {
                    guard let content = state.images.slot(image, slot) else { continue }
                    let f = state.images.flags(image: image, slot: slot)
                    result.append(
                        SimulatedImageSlot(
                            image: image, slot: slot, version: content.info.version, hash: content.info.hash,
                            bytes: content.bytes, pending: f.pending, confirmed: f.confirmed, active: f.active,
                            permanent: f.permanent))
                }
            }
            return result
        }
    }

    /// A file's contents, nil if there is no such file. A file open for an upload shows what has been
    /// written so far, committed or not (the device itself reports the committed size until it closes).
    public func file(_ path: String) -> [UInt8]? {
        withState { state in
            if let transfer = state.files.transfer, transfer.kind == .upload, transfer.path == path {
                return transfer.working
            }
            return state.files.contents(of: path)
        }
    }

    /// Creates or replaces a file.
    public func setFile(_ path: String, _ contents: [UInt8]) { withState { $0.files.write(path, contents) } }

    /// A setting's current (runtime) value.
    public func setting(_ name: String) -> [UInt8]? { withState { $0.settings.value(name) } }

    /// The name the device advertises over Bluetooth LE while its firmware loader runs: what the application
    /// saved in `fw_loader/adv_name` (a saved setting survives the reset into the loader, as sdk-nrf-bm's
    /// retained copy does), else the loader's built-in name. Nil while the application runs.
    public var firmwareLoaderAdvertisingName: String? {
        withState { state in
            guard state.runMode == .firmwareLoader else { return nil }
            if let saved = state.settings.value("fw_loader/adv_name"), !saved.isEmpty,
                let name = String(validating: saved, as: UTF8.self)
            {
                return name
            }
            return state.configuration.bootloader.firmwareLoaderName
        }
    }
}
