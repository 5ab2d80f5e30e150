#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// How `FirmwareUpgradeManager` gets back to the device after a reset: returns the transport to talk
/// to it through (the same object, reopened, or a new one). Called after the swap wait and again
/// every `retryInterval` while it throws, until `reconnectTimeout` runs out.
///
/// Serial ports that vanish and come back, UDP endpoints, Bluetooth LE devices and udev discovery of
/// a re-enumerated USB board (same serial number, another tty name) each plug in their own strategy.
/// In firmware-loader mode the device comes back twice: as its loader after the reset into it, then as
/// the application after the install reset; a strategy made with ``init(targeting:)`` is told which
/// (over Bluetooth LE they are different peripherals).
public struct FirmwareUpgradeReconnection: Sendable {
    /// Returns a transport to the device, given the one used before the reset and what comes back.
    /// - Throws: when the device is not reachable yet (the manager tries again).
    public let connect: @Sendable (_ previous: any McuMgrTransport, _ target: FirmwareUpgradeReconnectionTarget) async throws -> any McuMgrTransport

    /// Returns a transport to the device, given the one used before the reset (the target is the application).
    public var transport: @Sendable (_ previous: any McuMgrTransport) async throws -> any McuMgrTransport {
        let connect = self.connect
        return { previous in try await connect(previous, .application) }
    }

    /// A strategy from a closure that does not care what comes back (the same link reaches the
    /// application and the firmware loader: serial, UDP).
    public init(_ transport: @escaping @Sendable (_ previous: any McuMgrTransport) async throws -> any McuMgrTransport) {
        self.connect = { previous, _ in try await transport(previous) }
    }

    /// A strategy that reaches the application and the firmware loader each its own way.
    public init(
        targeting connect: @escaping @Sendable (_ previous: any McuMgrTransport, _ target: FirmwareUpgradeReconnectionTarget) async throws -> any McuMgrTransport
    ) {
        self.connect = connect
    }

    /// Reopens the same transport (UDP, the in-process simulator, a serial port that keeps its name).
    public static let reopen = FirmwareUpgradeReconnection { previous in previous }

    /// A new transport from `factory` each time (e.g. a discovery that finds the board again).
    public static func factory(_ factory: @escaping @Sendable () async throws -> any McuMgrTransport) -> Self {
        FirmwareUpgradeReconnection { _ in try await factory() }
    }

    /// Waits until `path` exists again (a USB serial port re-enumerating after the reset), polling every
    /// `pollInterval` for up to `attemptDuration` (on `clock`), then reopens the same transport.
    public static func reopen(
        waitingForPath path: String, pollInterval: Duration = .milliseconds(50), attemptDuration: Duration = .seconds(1),
        clock: McuMgrClock = .continuous
    ) -> Self {
        FirmwareUpgradeReconnection { previous in
            let deadline = clock.now.advanced(by: attemptDuration)
            while !FileManager.default.fileExists(atPath: path) {
                if clock.now >= deadline {
                    throw McuMgrError(.transport, "\(path) is not there (yet): the board has not come back after the reset")
                }
                try await clock.sleep(until: min(clock.now.advanced(by: pollInterval), deadline))
            }
            return previous
        }
    }
}
