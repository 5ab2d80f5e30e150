#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// Runs one operation on many devices at once, from one task group: each device gets its own transport,
/// ``McuMgrClient`` and session, its own events and its own result. At most
/// ``Configuration/maximumParallel`` devices are worked on at a time; the next one starts as soon as one
/// finishes. A device that goes silent or vanishes fails on its own (its requests time out, or
/// ``Configuration/deviceTimeLimit`` runs out) and never holds up the others.
///
/// Safe to use from any task. Cancelling the calling task, or calling ``cancel()``, stops every device
/// (their results say `.cancelled`); devices not started yet are not started.
///
/// ```swift
/// let fleet = McuMgrFleet(devices: addresses.map { address in
///     McuMgrFleet.Device(name: address) {
///         UDPTransport(configuration: .init(host: address, port: 1337))
///     }
/// }, configuration: .init(maximumParallel: 8))
/// let events = fleet.events()
/// Task { for await event in events { print(event.device, event.kind) } }
/// for result in await fleet.upgrade(package, configuration: .init(upgradeMode: .testAndConfirm)) {
///     print(result.device, result.succeeded ? "ok" : "failed: \(result.error!.message)")
/// }
/// ```
public final class McuMgrFleet: Sendable {
    /// One device of the fleet.
    public struct Device: Sendable {
        /// A name for people and reports (e.g. the device URI); give each device its own, since events and
        /// results name it (they also carry the device's index).
        public var name: String
        /// Makes the device's transport when its turn comes (opened by its client on the first request).
        public var transport: @Sendable () async throws -> any McuMgrTransport
        /// How a firmware upgrade reaches the device again after its reset.
        public var reconnection: FirmwareUpgradeReconnection
        /// This device's client settings (e.g. the memories its link kind uses); nil takes the fleet's
        /// (`Configuration.client`).
        public var client: McuMgrClient.Configuration?

        /// A device whose transport `transport` makes when its turn comes.
        public init(
            name: String, reconnection: FirmwareUpgradeReconnection = .reopen, client: McuMgrClient.Configuration? = nil,
            transport: @escaping @Sendable () async throws -> any McuMgrTransport
        ) {
            self.name = name
            self.reconnection = reconnection
            self.client = client
            self.transport = transport
        }

        /// A device reached through `transport`.
        public init(
            name: String, transport: any McuMgrTransport, reconnection: FirmwareUpgradeReconnection = .reopen,
            client: McuMgrClient.Configuration? = nil
        ) {
            self.init(name: name, reconnection: reconnection, client: client) { transport }
        }
    }

    /// How the fleet runs.
    public struct Configuration: Sendable {
        /// Most devices worked on at once; nil: all of them.
        public var maximumParallel: Int?
        /// Each device's client settings (its request timeout).
        public var client: McuMgrClient.Configuration
        /// The longest one device may take from its turn to its end; nil: no limit beyond the requests'
        /// own timeouts. A device over the limit is cancelled and fails with `.timeout`.
        public var deviceTimeLimit: Duration?

        /// Creates a configuration.
        public init(
            maximumParallel: Int? = nil, client: McuMgrClient.Configuration = .init(), deviceTimeLimit: Duration? = nil
        ) {
            self.maximumParallel = maximumParallel
            self.client = client
            self.deviceTimeLimit = deviceTimeLimit
        }
    }

    /// What an operation gets for one device: its client, and a way to report progress and log lines
    /// as fleet events.
    public struct Session: Sendable {
        /// The device's name.
        public let device: String
        /// The device's position in the fleet.
        public let index: Int
        /// The device's client (closed by the fleet when the operation ends).
        public let client: McuMgrClient
        /// How a firmware upgrade reaches the device again after its reset.
        public let reconnection: FirmwareUpgradeReconnection
        let fleet: McuMgrFleet
        let bytes: LockedState<Int>

        /// Reports that the device confirmed `bytes` of `total` (an event; the last value becomes the
        /// result's ``McuMgrFleetResult/bytesSent``).
        public func reportProgress(bytes: Int, total: Int) {
            self.bytes.withLock { $0 = bytes }
            emit(.progress(bytes: bytes, total: total))
        }

        /// A line for people about this device (an event).
        public func log(_ message: String, level: Logger.Level = .info) {
            emit(.log(FirmwareUpgradeLogEntry(level: level, message: message)))
        }

        func emit(_ kind: McuMgrFleetEvent.Kind) {
            fleet.emit(McuMgrFleetEvent(device: device, index: index, kind: kind))
        }
    }

    /// The devices, in the order results are returned.
    public let devices: [Device]
    /// How the fleet runs.
    public let configuration: Configuration
    /// The clock the per-device time limit and the durations run on, and every device's client (tests
    /// pass a manual clock).
    public let clock: McuMgrClock
    private let logger: Logger
    private let subscribers = LockedState<[UUID: AsyncStream<McuMgrFleetEvent>.Continuation]>([:])
    private let runs = LockedState<[UUID: Task<Void, Never>]>([:])

    /// Creates a fleet.
    /// - Parameters:
    ///   - devices: the devices, each with its own name.
    ///   - logger: given to every device's client (debug-level traces; nothing above unless wrong).
    ///   - clock: what the per-device time limit and the durations are measured on, and every device's
    ///     client's clock.
    public init(
        devices: [Device], configuration: Configuration = .init(),
        logger: Logger = Logger(label: "mcumgr.fleet", factory: { _ in SwiftLogNoOpLogHandler() }),
        clock: McuMgrClock = .continuous
    ) {
        self.devices = devices
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    /// The number of devices worked on at once: ``Configuration/maximumParallel``, at least 1, at most all.
    public var parallelism: Int {
        max(1, min(configuration.maximumParallel ?? devices.count, devices.count))
    }

    /// A new stream of the fleet's events from now on (subscribe before starting a run). Each stream ends
    /// when its consumer stops or the fleet goes away.
    public func events() -> AsyncStream<McuMgrFleetEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: McuMgrFleetEvent.self)
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [subscribers] _ in subscribers.withLock { $0[id] = nil } }
        return stream
    }

    /// Stops every run of this fleet: devices at work are cancelled, the others are not started.
    public func cancel() {
        for task in runs.withLock({ Array($0.values) }) { task.cancel() }
    }

    /// Runs `operation` on every device, at most ``parallelism`` at a time.
    /// - Parameter operation: what to do with one device; its errors become that device's failure
    ///   (`McuMgrError` as it is; anything else as a `.transport` error with its description).
    /// - Returns: one result per device, in the order of ``devices``.
    public func run<Value: Sendable>(
        _ operation: @escaping @Sendable (Session) async throws -> Value
    ) async -> [McuMgrFleetResult<Value>] {
        let collected = LockedState<[McuMgrFleetResult<Value>]>([])
        let work = Task { [self] in
            let results = await runAll(operation)
            collected.withLock { $0 = results }
        }
        let id = UUID()
        runs.withLock { $0[id] = work }
        await withTaskCancellationHandler {
            await work.value
        } onCancel: {
            work.cancel()
        }
        runs.withLock { $0[id] = nil }
        return collected.withLock { $0 }
    }

    /// Upgrades every device's firmware with `package` (``FirmwareUpgradeManager`` on each), at most
    /// ``parallelism`` at a time; each device's upgrade events come as ``McuMgrFleetEvent/Kind/upgrade(_:)``.
    public func upgrade(
        _ package: McuMgrPackage, configuration: FirmwareUpgradeConfiguration = .init(),
        options: FirmwareUpgradeManager.Options = .init(), resources: [String: Data] = [:]
    ) async -> [McuMgrFleetResult<FirmwareUpgradeResult>] {
        await upgrade(images: package.images, configuration: configuration, options: options, resources: resources)
    }

    /// Upgrades every device's firmware with these package files (see ``upgrade(_:configuration:options:resources:)``).
    public func upgrade(
        images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration = .init(),
        options: FirmwareUpgradeManager.Options = .init(), resources: [String: Data] = [:]
    ) async -> [McuMgrFleetResult<FirmwareUpgradeResult>] {
        let logger = self.logger
        return await run { session in
            let manager = FirmwareUpgradeManager(
                client: session.client, reconnection: session.reconnection, options: options, logger: logger)
            let events = manager.events()
            let forwarder = Task {
                for await event in events {
                    if case .uploadProgress(let progress) = event {
                        session.bytes.withLock { $0 = progress.totalBytesSent }
                    }
                    session.emit(.upgrade(event))
                    switch event {
                    case .completed, .failed, .cancelled: return
                    default: continue
                    }
                }
            }
            do {
                let result = try await manager.upgrade(images: images, configuration: configuration, resources: resources)
                await forwarder.value
                session.bytes.withLock { $0 = result.bytesSent }
                await Self.closeReplacedClient(manager, session)
                return result
            } catch {
                await forwarder.value
                await Self.closeReplacedClient(manager, session)
                throw error
            }
        }
    }

    /// Closes the client a reconnection made (the session's own one the fleet closes).
    private static func closeReplacedClient(_ manager: FirmwareUpgradeManager, _ session: Session) async {
        let current = await manager.client
        if current !== session.client { await current.close() }
    }

    // MARK: - Running

    func emit(_ event: McuMgrFleetEvent) {
        for continuation in subscribers.withLock({ Array($0.values) }) { continuation.yield(event) }
    }

    private func runAll<Value: Sendable>(
        _ operation: @escaping @Sendable (Session) async throws -> Value
    ) async -> [McuMgrFleetResult<Value>] {
        let count = devices.count
        let limit = parallelism
        return await withTaskGroup(of: McuMgrFleetResult<Value>.self) { group in
            var next = 0
            while next < min(limit, count) {
                let index = next
                group.addTask { await self.runOne(index, operation) }
                next += 1
            }
            var results: [McuMgrFleetResult<Value>?] = Array(repeating: nil, count: count)
            for await result in group {
                results[result.index] = result
                if next < count {
                    let index = next
                    group.addTask { await self.runOne(index, operation) }
                    next += 1
                }
            }
            return results.map { $0! }
        }
    }

    private func runOne<Value: Sendable>(
        _ index: Int, _ operation: @escaping @Sendable (Session) async throws -> Value
    ) async -> McuMgrFleetResult<Value> {
        let device = devices[index]
        let start = clock.now
        let bytes = LockedState(0)
        let outcome: Result<Value, McuMgrError>
        if Task.isCancelled {
            outcome = .failure(McuMgrError(.cancelled, "\(device.name): not started, the run was cancelled"))
        } else {
            emit(McuMgrFleetEvent(device: device.name, index: index, kind: .started))
            var client: McuMgrClient?
            do {
                let transport = try await device.transport()
                let c = McuMgrClient(
                    transport: transport, configuration: device.client ?? configuration.client, logger: logger, clock: clock)
                client = c
                let session = Session(
                    device: device.name, index: index, client: c, reconnection: device.reconnection, fleet: self,
                    bytes: bytes)
                outcome = .success(try await limited(device.name) { try await operation(session) })
            } catch {
                outcome = .failure(Self.fleetError(error))
            }
            await client?.close()
        }
        let duration = start.duration(to: clock.now)
        let result = McuMgrFleetResult(
            device: device.name, index: index, result: outcome, duration: duration, bytesSent: bytes.withLock { $0 })
        emit(McuMgrFleetEvent(device: device.name, index: index, kind: .finished(error: result.error, duration: duration)))
        return result
    }

    /// Runs `body` within ``Configuration/deviceTimeLimit``.
    private func limited<Value: Sendable>(
        _ name: String, _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        guard let limit = configuration.deviceTimeLimit else { return try await body() }
        let clock = self.clock
        return try await withThrowingTaskGroup(of: LimitedOutcome<Value>.self) { group in
            group.addTask { .value(try await body()) }
            group.addTask {
                try await clock.sleep(for: limit)
                return .overtime
            }
            defer { group.cancelAll() }
            switch try await group.next()! {
            case .value(let value):
                return value
            case .overtime:
                throw McuMgrError(
                    .timeout,
                    "\(name) did not finish within \(limit.seconds.formatted2) s (the per-device time limit); check the device and run it again")
            }
        }
    }

    private enum LimitedOutcome<Value: Sendable>: Sendable {
        case value(Value)
        case overtime
    }

    /// Any error as the `McuMgrError` a result carries.
    static func fleetError(_ error: any Error) -> McuMgrError {
        switch error {
        case let error as McuMgrError: return error
        case is CancellationError: return McuMgrError(.cancelled, "cancelled")
        case let error as CBORError:
            return McuMgrError(.protocolViolation, "unexpected answer from the device: \(error)", cause: error)
        default: return McuMgrError(.transport, "\(error)", cause: error)
        }
    }
}

extension Double {
    /// Two decimals, trailing zeros dropped (`2`, `2.5`, `0.25`).
    fileprivate var formatted2: String {
        let hundredths = (self * 100).rounded()
        if hundredths.truncatingRemainder(dividingBy: 100) == 0 { return String(Int(hundredths / 100)) }
        return String(hundredths / 100)
    }
}
