import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// A libudev hotplug monitor for the tty subsystem: a non-blocking netlink socket read by a
/// `DispatchSource` on `queue`, so nobody blocks waiting for events. Each event is handed to `handler`
/// on `queue`.
///
/// The source is udevd's (`"udev"`: events after udevd applied its rules and database) when udevd runs
/// (`/run/udev/control` exists) or in a umockdev test bed (which emulates it), else the kernel's
/// (`"kernel"`: raw uevents, as in containers without udevd). Creation fails (nil) where netlink is not
/// allowed; callers then rely on rescans.
final class UdevMonitor: @unchecked Sendable {
    struct Event: Sendable {
        var action: String
        var sysPath: String
        var devNode: String?
    }

    let source: String
    private let udev: OpaquePointer
    private let monitor: OpaquePointer
    private let readSource: DispatchSourceRead
    private let logger: Logger

    /// Starts monitoring; nil when libudev or netlink is unavailable.
    init?(queue: DispatchQueue, logger: Logger, handler: @escaping @Sendable (Event) -> Void) {
        guard let udev = LibUdev.new() else {
            logger.debug("udev monitor: udev_new failed; relying on rescans")
            return nil
        }
        let source = Self.preferredSource
        guard let monitor = LibUdev.monitor(udev, source: source) else {
            logger.debug("udev monitor: no netlink socket for \(source) events; relying on rescans")
            LibUdev.unref(udev)
            return nil
        }
        guard LibUdev.filter(monitor, subsystem: "tty"), LibUdev.enableReceiving(monitor) else {
            logger.debug("udev monitor: cannot receive \(source) events; relying on rescans")
            LibUdev.unref(monitor: monitor)
            LibUdev.unref(udev)
            return nil
        }
        let fd = LibUdev.fileDescriptor(monitor)
        self.udev = udev
        self.monitor = monitor
        self.source = source
        self.logger = logger
        readSource = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        readSource.setEventHandler { [monitor, logger] in
            // Drain what is queued; receive never blocks (the socket is non-blocking).
            while let device = LibUdev.receive(monitor) {
                defer { LibUdev.unref(device: device) }
                guard let sysPath = LibUdev.sysPath(device) else { continue }
                let event = Event(
                    action: LibUdev.action(device) ?? "change", sysPath: sysPath, devNode: LibUdev.devNode(device))
                logger.debug("udev monitor: \(event.action) \(event.devNode ?? sysPath)")
                handler(event)
            }
        }
        readSource.setCancelHandler { [udev, monitor] in
            LibUdev.unref(monitor: monitor)
            LibUdev.unref(udev)
        }
        readSource.resume()
        logger.debug("udev monitor: listening for \(source) tty events on fd \(fd)")
    }

    /// Stops monitoring and releases the socket (on the monitor's queue).
    func cancel() { readSource.cancel() }

    /// "udev" when udevd (or a umockdev test bed, which emulates it) delivers events, else "kernel".
    static var preferredSource: String {
        if FileManager.default.fileExists(atPath: "/run/udev/control") { return "udev" }
        if let bed = ProcessInfo.processInfo.environment["UMOCKDEV_DIR"], !bed.isEmpty { return "udev" }
        return "kernel"
    }
}
