import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// Hotplug events for serial ports, as an `AsyncSequence`: for HIL rigs that plug boards in and out, and
/// for following a board across the re-enumeration a reset causes (`DeviceFollower`).
///
/// Events come from the udev monitor (immediately) and from periodic rescans (which also catch what a
/// monitor cannot see, e.g. in containers where netlink events do not arrive). Consumers never block a
/// thread; cancelling the consuming task ends the stream and releases the monitor.
public struct SerialDeviceMonitor: Sendable {
    public var discovery: SerialDeviceDiscovery
    /// How often to rescan besides monitor events; nil: only on monitor events.
    public var rescanInterval: Duration?

    /// Where events come from instead of udev (tests); nil: udev.
    private var source: (@Sendable (_ includingPresent: Bool) -> AsyncStream<SerialDeviceEvent>)?

    public init(discovery: SerialDeviceDiscovery = SerialDeviceDiscovery(), rescanInterval: Duration? = .seconds(1)) {
        self.discovery = discovery
        self.rescanInterval = rescanInterval
    }

    /// A monitor whose events come from `events` (a test's own stream) instead of udev.
    init(
        discovery: SerialDeviceDiscovery = SerialDeviceDiscovery(),
        events: @escaping @Sendable (_ includingPresent: Bool) -> AsyncStream<SerialDeviceEvent>
    ) {
        self.discovery = discovery
        self.rescanInterval = nil
        self.source = events
    }

    /// Add and remove events from now on; with `includingPresent`, first an `.added` event for each port
    /// present now.
    public func events(includingPresent: Bool = false) -> AsyncStream<SerialDeviceEvent> {
        if let source { return source(includingPresent) }
        let (stream, continuation) = AsyncStream.makeStream(of: SerialDeviceEvent.self, bufferingPolicy: .unbounded)
        let engine = MonitorEngine(discovery: discovery, continuation: continuation)
        engine.start(includingPresent: includingPresent, rescanInterval: rescanInterval)
        continuation.onTermination = { _ in engine.stop() }
        return stream
    }
}

/// The state behind one event stream: the ports last seen, on one serial queue.
private final class MonitorEngine: @unchecked Sendable {
    private let queue = DispatchQueue(label: "smp.discovery.monitor")
    private let discovery: SerialDeviceDiscovery
    private let continuation: AsyncStream<SerialDeviceEvent>.Continuation
    // Touched only on `queue`.
    private var known: [String: SerialDevice] = [:]
    /// Ports a remove event announced, by sysfs path, and when: the kernel sends the event before it
    /// deletes the device, so a rescan in between still finds it, and would report it back at once
    /// (a board followed across its reset then seemed to return at its old tty). Rescans leave such a
    /// port out until they see it gone, an add event comes for it, or `departureLimit` passed.
    private var departed: [String: DispatchTime] = [:]
    private static let departureLimit: UInt64 = 5_000_000_000
    private var monitor: UdevMonitor?
    private var timer: DispatchSourceTimer?
    private var stopped = false

    init(discovery: SerialDeviceDiscovery, continuation: AsyncStream<SerialDeviceEvent>.Continuation) {
        self.discovery = discovery
        self.continuation = continuation
    }

    func start(includingPresent: Bool, rescanInterval: Duration?) {
        queue.async { [self] in
            monitor = UdevMonitor(queue: queue, logger: discovery.logger) { [weak self] event in
                self?.handle(event)
            }
            for device in discovery.devices() {
                known[device.sysPath] = device
                if includingPresent { continuation.yield(SerialDeviceEvent(kind: .added, device: device)) }
            }
            if let rescanInterval {
                let timer = DispatchSource.makeTimerSource(queue: queue)
                let nanoseconds = max(10_000_000, Int(rescanInterval.components.seconds * 1_000_000_000
                    + rescanInterval.components.attoseconds / 1_000_000_000))
                timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds))
                timer.setEventHandler { [weak self] in self?.rescan() }
                timer.resume()
                self.timer = timer
            }
        }
    }

    func stop() {
        queue.async { [self] in
            stopped = true
            monitor?.cancel()
            monitor = nil
            timer?.cancel()
            timer = nil
        }
    }

    private func handle(_ event: UdevMonitor.Event) {
        guard !stopped else { return }
        switch event.action {
        case "remove":
            departed[event.sysPath] = .now()
            if let device = known.removeValue(forKey: event.sysPath) {
                continuation.yield(SerialDeviceEvent(kind: .removed, device: device))
            }
        case "add":
            departed[event.sysPath] = nil
            // An add for a port we still hold means we missed its removal.
            if let stale = known.removeValue(forKey: event.sysPath) {
                continuation.yield(SerialDeviceEvent(kind: .removed, device: stale))
            }
            rescan()
        default:
            rescan()
        }
    }

    /// Diffs the ports present now against those last seen.
    private func rescan() {
        guard !stopped else { return }
        let listed = discovery.devices()
        let listedPaths = Set(listed.map(\.sysPath))
        let clock = DispatchTime.now().uptimeNanoseconds
        departed = departed.filter { sysPath, since in
            listedPaths.contains(sysPath) && clock &- since.uptimeNanoseconds < Self.departureLimit
        }
        let now = listed.filter { departed[$0.sysPath] == nil }
        var current: [String: SerialDevice] = [:]
        for device in now { current[device.sysPath] = device }
        for (sysPath, device) in known where current[sysPath] == nil || current[sysPath]?.path != device.path {
            known[sysPath] = nil
            continuation.yield(SerialDeviceEvent(kind: .removed, device: device))
        }
        for device in now where known[device.sysPath] == nil {
            known[device.sysPath] = device
            continuation.yield(SerialDeviceEvent(kind: .added, device: device))
        }
        // Keep the freshest details (links appear once udevd processed the device).
        for device in now { known[device.sysPath] = device }
    }
}
