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
public struct FirmwareUpgradeReconnection: Sendable {
    /// Returns a transport to the device, given the one used before the reset.
    /// - Throws: when the device is not reachable yet (the manager tries again).
    public let transport: @Sendable (_ previous: any McuMgrTransport) async throws -> any McuMgrTransport

    /// A strategy from a closure.
    public init(_ transport: @escaping @Sendable (_ previous: any McuMgrTransport) async throws -> any McuMgrTransport) {
        self.transport = transport
    }

    /// Reopens the same transport (UDP, the in-process simulator, a serial port that keeps its name).
    public static let reopen = FirmwareUpgradeReconnection { previous in previous }

    /// A new transport from `factory` each time (e.g. a discovery that finds the board again).
    public static func factory(_ factory: @escaping @Sendable () async throws -> any McuMgrTransport) -> Self {
        FirmwareUpgradeReconnection { _ in try await factory() }
    }

    /// Waits until `path` exists again (a USB serial port re-enumerating after the reset), polling every
    /// `pollInterval` for up to `attemptDuration`, then reopens the same transport.
    public static func reopen(
        waitingForPath path: String, pollInterval: Duration = .milliseconds(50), attemptDuration: Duration = .seconds(1)
    ) -> Self {
        FirmwareUpgradeReconnection { previous in
            let clock = ContinuousClock()
            let deadline = clock.now + attemptDuration
            while !FileManager.default.fileExists(atPath: path) {
                if clock.now >= deadline {
                    throw McuMgrError(.transport, "\(path) is not there (yet): the board has not come back after the reset")
                }
                try await Task.sleep(for: pollInterval)
            }
            return previous
        }
    }
}
