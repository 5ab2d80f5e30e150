#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// Upgrades a device's firmware from a package (`.bin`, `dfu_application.zip`, `.suit`): reads the
/// device's buffers and bootloader mode, skips what the device already has, uploads (pipelined,
/// resuming from the device's offset), marks images for test or confirm, resets, waits for the swap,
/// reconnects, checks that the device runs what was expected, and confirms (testAndConfirm).
///
/// The decisions are McuMgrCore's `FirmwareUpgradeStateMachine`; this actor only runs its actions with
/// the managers (`DefaultManager`, `ImageManager`, `BasicManager`, `SuitManager`). Events come as an
/// `AsyncSequence` (``events()``) and, for code ported from the iOS library, through a
/// ``FirmwareUpgradeDelegate``. ``pause()``, ``resume()`` and ``cancel()`` work from any task.
///
/// ```swift
/// let manager = FirmwareUpgradeManager(client: client)
/// let events = manager.events()
/// Task { for await event in events { print(event) } }
/// let result = try await manager.upgrade(try McuMgrPackage(url: url),
///                                        configuration: .init(upgradeMode: .testAndConfirm))
/// ```
public actor FirmwareUpgradeManager {
    /// Runtime settings that are not part of the upgrade's configuration.
    public struct Options: Sendable, Hashable {
        /// Timeout of each request while the device is coming back after a reset (it may still be
        /// swapping: requests are repeated until `reconnectTimeout`).
        public var reconnectProbeTimeout: Duration
        /// Least time between two progress events of one image.
        public var progressInterval: Duration
        /// Pause between SUIT missing-image polls (group 66, command 3).
        public var suitPollInterval: Duration
        /// How long a SUIT device may ask for nothing before the upgrade counts as delivered.
        public var suitPollDuration: Duration
        /// Timeout for the upload chunk at offset 0 (it may erase a slot).
        public var firstChunkTimeout: Duration
        /// Timeout for every other upload chunk.
        public var chunkTimeout: Duration

        /// Creates options.
        public init(
            reconnectProbeTimeout: Duration = .seconds(2), progressInterval: Duration = .milliseconds(100),
            suitPollInterval: Duration = .milliseconds(150), suitPollDuration: Duration = .seconds(5),
            firstChunkTimeout: Duration = McuMgrTimeouts.defaultFirstChunk, chunkTimeout: Duration = McuMgrTimeouts.defaultAnswer
        ) {
            self.reconnectProbeTimeout = reconnectProbeTimeout
            self.progressInterval = progressInterval
            self.suitPollInterval = suitPollInterval
            self.suitPollDuration = suitPollDuration
            self.firstChunkTimeout = firstChunkTimeout
            self.chunkTimeout = chunkTimeout
        }
    }

    /// The client requests go through; replaced when the reconnection strategy returns another transport
    /// (a firmware loader reached as another Bluetooth LE peripheral), and the caller's own client again
    /// when the strategy returns the caller's transport (the application after the loader): the link
    /// the caller closes is then the one in use. A client the manager made is the manager's to close:
    /// when the upgrade ends on one (it failed while the loader was connected), close it too.
    public private(set) var client: McuMgrClient
    /// The client the manager was made with.
    private let callerClient: McuMgrClient
    /// Runtime settings.
    public nonisolated let options: Options
    private let reconnection: FirmwareUpgradeReconnection
    /// The client's clock, kept across reconnections: the swap wait, reconnect retries, the deadlines of
    /// the upgrade and its durations run on it.
    private let clock: McuMgrClock
    private let logger: Logger
    private let delegate: (any FirmwareUpgradeDelegate)?
    private let subscribers = LockedState<[UUID: AsyncStream<FirmwareUpgradeEvent>.Continuation]>([:])
    private let control = LockedState<Control>(Control())

    private struct Control {
        var inputs: AsyncStream<Input>.Continuation?
        var paused = false
    }

    /// The public state of the running (or last) upgrade.
    public private(set) var state: FirmwareUpgradeState = .none

    /// Creates a manager.
    /// - Parameters:
    ///   - client: the client to the device; the upgrade's time (the swap wait, reconnect retries, its
    ///     deadlines and durations) is this client's ``McuMgrClient/clock``.
    ///   - reconnection: how to reach the device again after a reset (default: reopen the same transport).
    ///   - options: runtime settings.
    ///   - delegate: receives the iOS library's delegate calls; held strongly until the manager goes.
    ///   - logger: receives every log line at debug level; nothing above unless something is wrong.
    public init(
        client: McuMgrClient, reconnection: FirmwareUpgradeReconnection = .reopen, options: Options = .init(),
        delegate: (any FirmwareUpgradeDelegate)? = nil,
        logger: Logger = Logger(label: "mcumgr.dfu", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.client = client
        self.callerClient = client
        self.clock = client.clock
        self.reconnection = reconnection
        self.options = options
        self.delegate = delegate
        self.logger = logger
    }

    // MARK: - Public API

    /// A new stream of this manager's events from now on (subscribe before starting an upgrade). Any
    /// number of streams may be open; each ends when its consumer stops or the manager goes away.
    public nonisolated func events() -> AsyncStream<FirmwareUpgradeEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: FirmwareUpgradeEvent.self)
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [subscribers] _ in subscribers.withLock { $0[id] = nil } }
        return stream
    }

    /// Whether an upgrade is running.
    public nonisolated var isInProgress: Bool { control.withLock { $0.inputs != nil } }

    /// Whether the running upgrade is paused.
    public nonisolated var isPaused: Bool { control.withLock { $0.paused } }

    /// Holds the upgrade: the chunks in flight are answered, then nothing more is sent until ``resume()``.
    /// No effect when no upgrade runs.
    public nonisolated func pause() { send(.pause) }

    /// Continues a paused upgrade; the upload goes on from the offset the device reported.
    public nonisolated func resume() { send(.resume) }

    /// Cancels the running upgrade: requests in flight are abandoned and nothing more is sent; the device
    /// keeps a partial upload (resumed by the next upgrade with the same package) but no state change.
    /// ``upgrade(_:configuration:resources:)`` then throws a `.cancelled` error.
    public nonisolated func cancel() { send(.cancel) }

    /// Upgrades the device with `package`.
    /// - Parameters:
    ///   - configuration: mode, bootloader mode, swap time, pipelining, ...
    ///   - resources: SUIT resources by name (as the device asks for them, without `file://`), for
    ///     envelopes whose payloads are not in the package.
    /// - Returns: what was uploaded or skipped, timings and the final image list.
    /// - Throws: `McuMgrError` with a message that says what to do (`.cancelled` after ``cancel()`` or
    ///   when the calling task is cancelled).
    public func upgrade(
        _ package: McuMgrPackage, configuration: FirmwareUpgradeConfiguration = .init(), resources: [String: Data] = [:]
    ) async throws -> FirmwareUpgradeResult {
        try await upgrade(images: package.images, configuration: configuration, resources: resources)
    }

    /// Starts an upgrade in a new task and returns at once, as the iOS library's `start(package:using:)`:
    /// follow it with the delegate or ``events()``; ``cancel()`` stops it.
    /// - Returns: the task running the upgrade (its value is the result; it throws what the upgrade throws).
    @discardableResult
    public nonisolated func start(
        package: McuMgrPackage, using configuration: FirmwareUpgradeConfiguration = .init()
    ) -> Task<FirmwareUpgradeResult, any Error> {
        Task { try await self.upgrade(package, configuration: configuration) }
    }

    /// Upgrades the device with these package files (see ``upgrade(_:configuration:resources:)``).
    public func upgrade(
        images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration = .init(),
        resources: [String: Data] = [:]
    ) async throws -> FirmwareUpgradeResult {
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        let started = control.withLock { c -> Bool in
            guard c.inputs == nil else { return false }
            c.inputs = continuation
            c.paused = false
            return true
        }
        guard started else {
            throw McuMgrError(.usage, "a firmware upgrade is already running on this manager; wait for it or cancel it")
        }
        defer { control.withLock { $0.inputs = nil; $0.paused = false } }
        var run = Run(
            images: images, configuration: configuration, resources: resources, inputs: continuation,
            clock: clock)
        return try await withTaskCancellationHandler {
            try await drive(&run, stream: stream)
        } onCancel: {
            continuation.yield(.cancel)
        }
    }

    // MARK: - Driver

    enum Input: Sendable {
        case parameters(Result<McuMgrParametersResponse, McuMgrError>)
        case bootloader(Result<(name: String?, mode: BootloaderMode?), McuMgrError>)
        case imageList(Result<McuMgrImageStateResponse, McuMgrError>)
        case stateWrite(Result<McuMgrImageStateResponse, McuMgrError>)
        case eraseSettings(Result<Void, McuMgrError>)
        case loaderNamed(Result<Void, McuMgrError>)
        case uploaded(image: Int, FirmwareUpgradeResult.Image)
        case uploadFailed(McuMgrError)
        case resetDone(Result<Void, McuMgrError>)
        case reconnected(Result<McuMgrClient, McuMgrError>)
        case timer(Int)
        case event(FirmwareUpgradeEvent)
        case pause, resume, cancel
    }

    private enum Outcome {
        case success(FirmwareUpgradeSummary)
        case failure(FirmwareUpgradeFailure)
        case cancelled(FirmwareUpgradeState)
    }

    /// One upgrade's bookkeeping.
    private struct Run {
        let images: [McuMgrPackage.Image]
        let configuration: FirmwareUpgradeConfiguration
        let resources: [String: Data]
        let inputs: AsyncStream<Input>.Continuation
        let clock: McuMgrClock
        let epoch: McuMgrClock.Instant
        var work: [Task<Void, Never>] = []
        var timer: Task<Void, Never>?
        var timerGeneration = 0
        /// When the armed timer fires; nil once it has fired (its input was handled) or before any.
        var timerInstant: SMPInstant?
        var uploadControl: UploadControl?
        var outcome: Outcome?
        var triggerError: McuMgrError?
        var triggerWasTimer = false
        var uploads: [FirmwareUpgradeResult.Image] = []
        var lastImageList: McuMgrImageStateResponse?
        var resetAt: McuMgrClock.Instant?
        var backAt: McuMgrClock.Instant?
        var isSUIT = false

        init(
            images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration, resources: [String: Data],
            inputs: AsyncStream<Input>.Continuation, clock: McuMgrClock
        ) {
            self.images = images
            self.configuration = configuration
            self.resources = resources
            self.inputs = inputs
            self.clock = clock
            self.epoch = clock.now
        }

        var now: SMPInstant { SMPInstant(nanoseconds: epoch.duration(to: clock.now).nanosecondsClamped) }
    }

    private func drive(_ run: inout Run, stream: AsyncStream<Input>) async throws -> FirmwareUpgradeResult {
        // The link as its transport declares it: the machine refines it with the device's buffers, so the
        // upload's depth is the one `LinkLimits.window(forPacket:)` every upload over this link gets.
        var machine = FirmwareUpgradeStateMachine(
            images: run.images, configuration: run.configuration, link: client.transport.linkLimits)
        state = .none
        emit(.started(images: run.images, configuration: run.configuration))
        log(.info, "upgrading with \(run.images.count) file(s) in \(run.configuration.upgradeMode) mode: "
            + run.images.map { "\($0.fileName) (image \($0.image), \($0.size) bytes)" }.joined(separator: ", "))
        execute(machine.start(now: run.now), &run, machine: &machine)

        for await input in stream {
            if run.outcome != nil { break }
            let actions = handle(input, &run, machine: &machine)
            execute(actions, &run, machine: &machine)
            if run.outcome != nil { break }
        }
        run.timer?.cancel()
        for task in run.work { task.cancel() }
        run.inputs.finish()

        switch run.outcome {
        case .success(let summary):
            let result = await finish(summary, &run)
            emit(.completed(result))
            return result
        case .failure(let failure):
            let error = mcuMgrError(for: failure, run)
            log(.error, error.message)
            emit(.failed(state: failure.state, error: error))
            throw error
        case .cancelled(let state):
            let error = McuMgrError(.cancelled, "the firmware upgrade was cancelled in state \(state)")
            emit(.cancelled(state: state))
            throw error
        case .none:
            // The stream ended without an outcome: only when the manager is torn down.
            let error = McuMgrError(.cancelled, "the firmware upgrade was cancelled")
            emit(.cancelled(state: state))
            throw error
        }
    }

    private func handle(
        _ input: Input, _ run: inout Run, machine: inout FirmwareUpgradeStateMachine
    ) -> [FirmwareUpgradeStateMachine.Action] {
        run.triggerError = nil
        run.triggerWasTimer = false
        let now = run.now
        switch input {
        case .parameters(.success(let p)):
            log(.debug, "device buffers: \(p.bufferCount) × \(p.bufferSize) bytes")
            return machine.parametersReceived(bufferSize: p.bufferSize, bufferCount: p.bufferCount)
        case .parameters(.failure(let error)):
            if error.kind == .device {
                log(.debug, "the device does not report its buffers (\(error.message)); uploading one chunk at a time")
                return machine.parametersUnsupported()
            }
            return failed(error, &run, machine: &machine, now: now)
        case .bootloader(.success(let info)):
            log(.debug, "bootloader: \(info.name ?? "unknown")" + (info.mode.map { ", mode \($0)" } ?? ""))
            return machine.bootloaderInfoReceived(name: info.name, mode: info.mode)
        case .bootloader(.failure(let error)):
            if error.kind == .device {
                log(.debug, "the device does not report its bootloader (\(error.message)); assuming an MCUboot swap mode")
                return machine.bootloaderInfoUnsupported()
            }
            return failed(error, &run, machine: &machine, now: now)
        case .imageList(.success(let list)):
            run.lastImageList = list
            if run.resetAt != nil, run.backAt == nil {
                run.backAt = clock.now
                if let resetAt = run.resetAt {
                    log(.info, "the device answers again, \(Self.seconds(resetAt.duration(to: clock.now))) after the reset")
                }
            }
            for slot in list.images {
                log(.debug, "device: image \(slot.image) slot \(slot.slot) version \(slot.version)"
                    + (slot.hash.map { " hash \($0.hexString)" } ?? "")
                    + (slot.active ? " active" : "") + (slot.confirmed ? " confirmed" : "")
                    + (slot.pending ? " pending" : "") + (slot.permanent ? " permanent" : ""))
            }
            return machine.imageListReceived(list.images)
        case .imageList(.failure(let error)) where error.kind == .device && error.returnCode == .notSupported:
            // No image group: a single-application MCUboot's application has none (the machine decides).
            log(.debug, "the image list is not supported here (\(error.message))")
            run.triggerError = error
            if machine.currentState == .reconnect, let resetAt = run.resetAt, run.backAt == nil {
                run.backAt = clock.now
                log(.info, "the device answers again, \(Self.seconds(resetAt.duration(to: clock.now))) after the reset")
            }
            return machine.imageListUnsupported(error.message, now: now)
        case .imageList(.failure(let error)):
            return failed(error, &run, machine: &machine, now: now)
        case .stateWrite(.success(let list)):
            run.lastImageList = list
            return machine.stateWriteSucceeded(list.images)
        case .stateWrite(.failure(let error)):
            return failed(error, &run, machine: &machine, now: now)
        case .eraseSettings(.success):
            log(.info, "application settings erased")
            return machine.eraseSettingsDone()
        case .eraseSettings(.failure(let error)):
            log(.warning, "erasing the application settings failed (\(error.message)); continuing")
            return machine.eraseSettingsFailed(error.message)
        case .loaderNamed(.success):
            return machine.firmwareLoaderNameSet()
        case .loaderNamed(.failure(let error)):
            log(.warning, "storing the firmware loader's advertising name failed (\(error.message))")
            return failed(error, &run, machine: &machine, now: now)
        case .uploaded(let image, let record):
            run.uploads.append(record)
            return machine.uploadFinished(image: image)
        case .uploadFailed(let error):
            if error.kind == .cancelled, run.outcome != nil { return [] }
            run.triggerError = error
            return machine.requestFailed(error.message, retriable: false, now: now)
        case .resetDone(.success):
            run.resetAt = clock.now
            run.backAt = nil
            return machine.resetSent(now: now)
        case .resetDone(.failure(let error)):
            if error.kind == .device {
                run.triggerError = error
                return machine.abort(
                    "the device refused the reset: \(error.message). Reset it by hand (`smp os reset --force`) to install the images")
            }
            // The link dropping while the reset is answered is what a reset does.
            log(.debug, "reset: \(error.message) (expected while the device reboots)")
            run.resetAt = clock.now
            run.backAt = nil
            return machine.resetSent(now: now)
        case .reconnected(.success(let newClient)):
            client = newClient
            log(.debug, "link to \(newClient.transport.name) open again")
            return machine.reconnected()
        case .reconnected(.failure(let error)):
            log(.debug, "not back yet: \(error.message)")
            return failed(error, &run, machine: &machine, now: now, retriable: true)
        case .timer(let generation):
            guard generation == run.timerGeneration else { return [] }
            run.timerInstant = nil
            run.triggerWasTimer = true
            return machine.timerFired(now: now)
        case .event(let event):
            if case .log(let entry) = event { logger.debug("\(entry.message)") }
            emit(event)
            return []
        case .pause:
            let actions = machine.pause()
            if machine.isPaused, !control.withLock({ $0.paused }) {
                control.withLock { $0.paused = true }
                log(.info, "paused in state \(machine.currentState)")
                emit(.paused(machine.currentState))
            }
            return actions
        case .resume:
            guard machine.isPaused else { return [] }
            let actions = machine.resume()
            control.withLock { $0.paused = false }
            log(.info, "resumed in state \(machine.currentState)")
            emit(.resumed(machine.currentState))
            return actions
        case .cancel:
            let before = machine.currentState
            cancelledState = before
            let actions = machine.cancel()
            if !actions.isEmpty { log(.info, "cancelled in state \(before)") }
            run.uploadControl?.resume()
            return actions
        }
    }

    private func failed(
        _ error: McuMgrError, _ run: inout Run, machine: inout FirmwareUpgradeStateMachine, now: SMPInstant,
        retriable: Bool? = nil
    ) -> [FirmwareUpgradeStateMachine.Action] {
        run.triggerError = error
        let canRetry = retriable ?? (error.kind == .timeout || error.returnCode == .busy)
        return machine.requestFailed(error.message, retriable: canRetry, now: now)
    }

    private var cancelledState: FirmwareUpgradeState = .none

    private func execute(
        _ actions: [FirmwareUpgradeStateMachine.Action], _ run: inout Run, machine: inout FirmwareUpgradeStateMachine
    ) {
        for action in actions {
            switch action {
            case .notify(let change):
                state = change.current
                logger.debug("state \(change.previous) -> \(change.current)")
                emit(.stateChanged(from: change.previous, to: change.current))
            case .requestParameters:
                spawn(&run) { client, _ in
                    .parameters(await Self.catching { try await DefaultManager(client: client).mcuMgrParameters() })
                }
            case .requestBootloaderInfo:
                spawn(&run) { client, _ in
                    .bootloader(
                        await Self.catching {
                            let os = DefaultManager(client: client)
                            let name = try await os.bootloaderName()
                            var mode: BootloaderMode?
                            do {
                                mode = try await os.bootloaderInfo(query: "mode").mode
                            } catch let error as McuMgrError where error.kind == .device {
                                mode = nil
                            }
                            return (name, mode)
                        })
                }
            case .requestImageList:
                let probing = machine.currentState == .reconnect
                let timeout = probing ? options.reconnectProbeTimeout : nil
                spawn(&run) { client, _ in
                    .imageList(await Self.catching { try await client.send(ImageStateReadRequest(), timeout: timeout) })
                }
            case .eraseAppSettings:
                log(.info, "erasing the application settings")
                spawn(&run) { client, _ in
                    .eraseSettings(await Self.catching { try await BasicManager(client: client).eraseStorage() })
                }
            case .upload(let images, let depth, let bufferSize):
                startUpload(images, depth: depth, bufferSize: bufferSize, serialRecovery: machine.isSerialRecovery, &run)
            case .pauseUpload:
                run.uploadControl?.pause()
            case .resumeUpload:
                run.uploadControl?.resume()
            case .testImage(let hash):
                log(.info, "marking \(describe(hash: hash, run)) for a test boot")
                spawn(&run) { client, _ in
                    .stateWrite(await Self.catching { try await ImageManager(client: client).test(hash: Data(hash)) })
                }
            case .confirmImage(let hash):
                log(.info, "confirming \(hash.map { describe(hash: $0, run) } ?? "the running image")")
                let timeout = machine.currentState == .reconnect ? options.reconnectProbeTimeout : nil
                spawn(&run) { client, _ in
                    .stateWrite(
                        await Self.catching {
                            try await client.send(ImageStateWriteRequest(hash: hash.map { Data($0) }, confirm: true), timeout: timeout)
                        })
                }
            case .setFirmwareLoaderName(let name):
                log(.info, "asking the application to have its firmware loader advertise as \"\(name)\" (settings fw_loader/adv_name)")
                spawn(&run) { client, _ in
                    .loaderNamed(
                        await Self.catching {
                            try await SettingsManager(client: client).setFirmwareLoaderAdvertisingName(name)
                        })
                }
            case .reset(let mode):
                let into = machine.bootloaderMode == .singleApplication ? "MCUboot's serial recovery" : "its firmware loader"
                log(.info, mode == .bootloader ? "resetting the device into \(into) (boot mode 1)" : "resetting the device")
                spawn(&run) { client, _ in
                    .resetDone(
                        await Self.catching {
                            try await DefaultManager(client: client).reset(bootMode: mode == .bootloader ? 1 : nil)
                        })
                }
            case .waitUntil(let instant):
                arm(instant, &run)
                if case .reconnect = machine.currentState, run.backAt == nil, run.resetAt != nil {
                    let wait = instant - run.now
                    if wait > .milliseconds(500), run.timerGeneration == 1 {
                        log(.info, "waiting \(Self.seconds(wait)) for the device to swap and reboot")
                    }
                }
            case .reconnect:
                reconnect(to: .application, &run)
            case .reconnectToFirmwareLoader(let name):
                reconnect(to: .firmwareLoader(name: name), &run)
            case .finished(let summary):
                run.outcome = .success(summary)
            case .failed(let failure):
                run.outcome = .failure(failure)
            case .cancelled:
                run.outcome = .cancelled(cancelledState)
            }
        }
    }

    // MARK: - Work

    private func reconnect(to target: FirmwareUpgradeReconnectionTarget, _ run: inout Run) {
        log(.debug, "reconnecting to \(target)")
        let strategy = reconnection
        let logger = self.logger
        let callerClient = self.callerClient
        spawn(&run) { client, _ in
            .reconnected(
                await Self.catching {
                    await client.close()
                    let transport = try await strategy.connect(client.transport, target)
                    if transport === client.transport { return client }
                    // Back on the caller's transport (the application after its firmware loader): the
                    // caller's client, which the caller closes; a client of the manager's own would
                    // keep that link open after the caller closed its client (seen on real BlueZ: the
                    // device stayed connected after `smp dfu` exited, and advertised to nobody).
                    if transport === callerClient.transport { return callerClient }
                    return McuMgrClient(
                        transport: transport, configuration: client.configuration, logger: logger, clock: client.clock)
                })
        }
    }

    private func spawn(_ run: inout Run, _ body: @escaping @Sendable (McuMgrClient, Options) async -> Input) {
        let client = self.client
        let options = self.options
        let inputs = run.inputs
        run.work.removeAll { $0.isCancelled }
        run.work.append(
            Task {
                let input = await body(client, options)
                if !Task.isCancelled { inputs.yield(input) }
            })
    }

    /// Sets the one timer to fire at `instant`. A timer already set for that instant stays as it is
    /// (cancelling it and sleeping again until the same instant would only churn tasks, and leave a
    /// moment with no timer set).
    private func arm(_ instant: SMPInstant, _ run: inout Run) {
        if run.timer != nil, run.timerInstant == instant { return }
        run.timerInstant = instant
        run.timer?.cancel()
        run.timerGeneration += 1
        let generation = run.timerGeneration
        let wake = run.epoch.advanced(by: .nanoseconds(Int64(clamping: instant.nanoseconds)))
        let inputs = run.inputs
        let clock = run.clock
        run.timer = Task {
            try? await clock.sleep(until: wake)
            guard !Task.isCancelled else { return }
            inputs.yield(.timer(generation))
        }
    }

    private static func catching<T>(_ body: () async throws -> T) async -> Result<T, McuMgrError> {
        do {
            return .success(try await body())
        } catch let error as McuMgrError {
            return .failure(error)
        } catch is CancellationError {
            return .failure(McuMgrError(.cancelled, "cancelled"))
        } catch {
            return .failure(McuMgrError(.transport, "\(error)", cause: error))
        }
    }

    private func startUpload(_ files: [McuMgrPackage.Image], depth: Int, bufferSize: Int?, serialRecovery: Bool, _ run: inout Run) {
        var configuration = UploadConfiguration(
            pipelineDepth: depth, byteAlignment: run.configuration.byteAlignment,
            firstChunkTimeout: options.firstChunkTimeout, chunkTimeout: options.chunkTimeout)
        configuration.deviceBufferSize = run.configuration.reassemblyBufferSize ?? bufferSize
        // MCUboot's serial recovery erases each sector when the upload reaches it.
        configuration.everyChunkMayErase = serialRecovery
        let isSUIT = files.contains { $0.contentType != .mcubootImage }
        run.isSUIT = isSUIT
        let resources = run.resources
        let packageFiles = run.images
        let job = UploadJob(files: files, configuration: configuration, options: options, inputs: run.inputs)
        run.uploadControl = job.control
        spawn(&run) { client, _ in
            do {
                if isSUIT {
                    try await job.uploadSUIT(client: client, resources: resources, package: packageFiles)
                } else {
                    try await job.uploadImages(client: client)
                }
                return .event(.log(FirmwareUpgradeLogEntry(level: .debug, message: "upload finished")))
            } catch let error as McuMgrError {
                return .uploadFailed(error)
            } catch {
                return .uploadFailed(McuMgrError(.cancelled, "the upload was cancelled"))
            }
        }
    }

    // MARK: - Results

    private func finish(_ summary: FirmwareUpgradeSummary, _ run: inout Run) async -> FirmwareUpgradeResult {
        for note in summary.notes { log(.warning, note) }
        var finalImages: [McuMgrImageStateResponse.ImageSlot] = []
        if !run.isSUIT {
            if let list = try? await client.send(ImageStateReadRequest(), timeout: options.reconnectProbeTimeout) {
                finalImages = list.images
            } else if let list = run.lastImageList {
                finalImages = list.images
            }
        }
        var records: [FirmwareUpgradeResult.Image] = []
        for image in run.images {
            if let uploaded = run.uploads.first(where: { $0.fileName == image.fileName && $0.image == image.image }) {
                records.append(uploaded)
            } else {
                records.append(
                    FirmwareUpgradeResult.Image(
                        image: image.image, slot: image.slot, fileName: image.fileName, contentType: image.contentType,
                        hash: image.hash, size: image.size, version: image.version, uploaded: false, resumedFrom: 0,
                        bytesSent: 0, uploadDuration: .zero))
            }
        }
        let duration = run.epoch.duration(to: clock.now)
        let reconnect = run.resetAt.flatMap { reset in run.backAt.map { reset.duration(to: $0) } } ?? .zero
        let upload = run.uploads.reduce(Duration.zero) { $0 + $1.uploadDuration }
        log(.info, "upgrade complete in \(Self.seconds(duration))"
            + (summary.uploadedImages.isEmpty ? "" : ", uploaded image(s) \(summary.uploadedImages.map(String.init).joined(separator: ", "))")
            + (summary.skippedImages.isEmpty ? "" : ", skipped image(s) \(summary.skippedImages.map(String.init).joined(separator: ", ")) (already on the device)"))
        return FirmwareUpgradeResult(
            summary: summary, images: records, finalImages: finalImages, duration: duration, uploadDuration: upload,
            reconnectDuration: reconnect)
    }

    private func mcuMgrError(for failure: FirmwareUpgradeFailure, _ run: Run) -> McuMgrError {
        let kind: McuMgrError.Kind
        if let trigger = run.triggerError {
            kind = failure.state == .reconnect && trigger.kind != .device ? .timeout : trigger.kind
        } else if run.triggerWasTimer {
            kind = .timeout
        } else {
            kind = .device
        }
        return McuMgrError(
            kind, "firmware upgrade failed (\(failure.state)): \(failure.message)",
            returnCode: run.triggerError?.returnCode, groupError: run.triggerError?.groupError,
            reason: run.triggerError?.reason, cause: failure)
    }

    // MARK: - Events

    private func emit(_ event: FirmwareUpgradeEvent) {
        let continuations = subscribers.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(event) }
        if let delegate { FirmwareUpgradeDelegateAdapter(delegate: delegate, manager: self).deliver(event) }
    }

    private func log(_ level: Logger.Level, _ message: String) {
        logger.debug("\(message)")
        emit(.log(FirmwareUpgradeLogEntry(level: level, message: message)))
    }

    private nonisolated func send(_ input: Input) {
        let inputs = control.withLock { $0.inputs }
        inputs?.yield(input)
    }

    private func describe(hash: [UInt8], _ run: Run) -> String {
        if let image = run.images.first(where: { Array($0.hash) == hash }) {
            return "image \(image.image) (\(image.fileName), hash \(image.hashHex.prefix(16))…)"
        }
        return "the image with hash \(Data(hash).hexString.prefix(16))…"
    }

    static func seconds(_ duration: Duration) -> String { String(cFormat: "%.1f s", duration.seconds) }
}
