#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrSerial

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Follows one board across the USB re-enumeration a reset causes: the board's own USB serial port
/// leaves the bus and comes back, perhaps as another tty (`ttyACM0` → `ttyACM1`). The follower watches
/// hotplug events and finds it again by who it is (vendor, product, interface and serial number, or the
/// physical USB port when it has no serial number).
///
/// Use: `start()` before the reset, then `reconnected()` after it; each call returns the port as it is
/// now, and the follower re-arms for the next reset. Ports that stay while the target resets (a debug
/// probe's VCOM, a USB-UART bridge) come back at once.
///
/// ```swift
/// let follower = DeviceFollower(device: device)
/// await follower.start()
/// try await DefaultManager(client: client).reset()
/// let back = try await follower.reconnected(within: .seconds(30))
/// let transport = SerialTransport(configuration: .init(path: back.path))
/// ```
public actor DeviceFollower {
    /// Who is followed.
    public nonisolated let identity: SerialDeviceIdentity
    /// The port as last seen present.
    public private(set) var current: SerialDevice
    /// Whether the port leaves the bus when the target resets (from the board table; unknown CDC-ACM: yes).
    public nonisolated let followsResets: Bool

    private let monitor: SerialDeviceMonitor
    private let logger: Logger
    /// What the departure grace, the deadline and the retries to open the port run on.
    private let clock: McuMgrClock
    private var watcher: Task<Void, Never>?
    private var present: SerialDevice?
    /// Set when the port went away since the follower was (re-)armed.
    private var wentAway = false
    private var changed: [CheckedContinuation<Void, Never>] = []

    /// - Parameters:
    ///   - device: the port as discovery found it.
    ///   - monitor: where hotplug events come from.
    ///   - clock: what the departure grace, the deadline and the retries to open the port are measured on
    ///     (tests pass a manual clock).
    public init(
        device: SerialDevice, monitor: SerialDeviceMonitor = SerialDeviceMonitor(), logger: Logger? = nil,
        clock: McuMgrClock = .continuous
    ) {
        self.clock = clock
        identity = device.identity
        current = device
        present = device
        followsResets = device.board?.followsResets ?? true
        self.monitor = monitor
        self.logger = logger ?? monitor.discovery.logger
    }

    /// Starts watching (idempotent). Call it before the reset, so that a quick disappearance is seen.
    public func start() async {
        guard watcher == nil else { return }
        let stream = monitor.events(includingPresent: false)
        let identity = identity
        watcher = Task { [weak self] in
            for await event in stream where identity.matches(event.device) {
                await self?.apply(event)
            }
        }
        // Let the monitor take its first snapshot before the caller resets the board.
        try? await clock.sleep(for: .milliseconds(50))
    }

    /// Stops watching.
    public func stop() {
        watcher?.cancel()
        watcher = nil
        wake()
    }

    private func apply(_ event: SerialDeviceEvent) {
        switch event.kind {
        case .removed:
            if present?.sysPath == event.device.sysPath || present == nil {
                logger.debug("follower: \(identity) went away from \(event.device.path)")
                present = nil
                wentAway = true
            }
        case .added:
            logger.debug("follower: \(identity) is at \(event.device.path)")
            // Back under another name or sysfs path: it re-enumerated, even if its removal went unseen.
            if let before = present ?? Optional(current),
                before.sysPath != event.device.sysPath || before.path != event.device.path
            {
                wentAway = true
            }
            present = event.device
        }
        wake()
    }

    private func wake() {
        let waiting = changed
        changed = []
        for continuation in waiting { continuation.resume() }
    }

    /// Waits until the board is back after a reset and its port can be opened; returns it (maybe under a
    /// new tty name) and re-arms for the next reset.
    ///
    /// - Parameters:
    ///   - timeout: how long to wait in all.
    ///   - departureGrace: how long to wait for the port to leave before assuming it stays (nil: 3 s for
    ///     ports that follow resets, none for probes and bridges).
    /// - Throws: `McuMgrError` `.timeout` when the board did not come back in time, `.cancelled`.
    public func reconnected(within timeout: Duration = .seconds(30), departureGrace: Duration? = nil) async throws
        -> SerialDevice
    {
        await start()
        let deadline = clock.now.advanced(by: timeout)
        let graceEnd = clock.now.advanced(by: departureGrace ?? (followsResets ? .seconds(3) : .zero))
        while true {
            try Task.checkCancellation()
            if let device = present, wentAway || clock.now >= graceEnd {
                if wentAway { logger.debug("follower: \(identity) came back at \(device.path)") }
                try await waitUntilOpenable(device, deadline: deadline)
                current = device
                wentAway = false
                return device
            }
            let now = clock.now
            if now >= deadline {
                let seen = monitor.discovery.devices().map(\.summary)
                throw McuMgrError(
                    .timeout,
                    "\(identity) did not come back within \(timeout) after the reset (last at \(current.path)); "
                        + (seen.isEmpty ? "no serial devices are present" : "present: " + seen.joined(separator: "; "))
                        + "; check the cable, or that the firmware still enables USB")
            }
            // Wake on the next event, at the grace end, or at the deadline, whichever is first.
            let wakeAt = present != nil && !wentAway && graceEnd > now ? min(graceEnd, deadline) : deadline
            await waitForChange(until: wakeAt)
        }
    }

    private func waitForChange(until instant: McuMgrClock.Instant) async {
        let clock = self.clock
        let timer = Task { [weak self] in
            // Cancelled: the wait ended on an event, and a wake now would end the next wait too (each
            // cancelled timer woke the wait after it: a loop of timers while the port was away).
            do { try await clock.sleep(until: instant) } catch { return }
            await self?.wake()
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { changed.append($0) }
        } onCancel: {
            Task { await self.wake() }
        }
        timer.cancel()
    }

    /// udevd may still be applying permissions when the node appears: try to open it until it works.
    private func waitUntilOpenable(_ device: SerialDevice, deadline: McuMgrClock.Instant) async throws {
        while true {
            do throws(SystemCallError) {
                SystemCall.close(try SystemCall.open(device.path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC))
                return
            } catch where clock.now >= deadline {
                throw McuMgrError(
                    .transport, "\(device.path) came back but cannot be opened: \(error); check permissions (the dialout group)")
            } catch {
                // Not yet: look again in 50 ms.
            }
            try await clock.sleep(for: .milliseconds(50))
        }
    }

    /// A transport factory for reconnecting after each reset (e.g. a firmware upgrade's reconnect
    /// strategy): every call waits for the board and opens a serial transport on its current port.
    public nonisolated func transportFactory(
        configuration: SerialTransport.Configuration, timeout: Duration = .seconds(30), logger: Logger? = nil
    ) -> @Sendable () async throws -> any McuMgrTransport {
        { [self] in
            let device = try await reconnected(within: timeout)
            var configuration = configuration
            configuration.path = device.path
            return SerialTransport(configuration: configuration, logger: logger ?? self.logger)
        }
    }
}
