import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrDiscovery

/// How the CLI sets up discovery: the board table with the user's rules, the prober with the URI's
/// serial options, and what `--device` resolved to (for following the board across `os reset`).
enum DiscoveryOptions {
    static func logger(verbose: Bool) -> Logger {
        var logger = Logger(label: "smp.discovery")
        logger.logLevel = verbose ? .debug : Terminal.quietLogLevel
        return logger
    }

    /// Discovery with the built-in board table and the user's rules ($SMP_BOARDS or
    /// ~/.config/smp/boards.json).
    static func discovery(includeNonUSB: Bool = false, logger: Logger) throws -> SerialDeviceDiscovery {
        let table = BoardTable(userRules: try BoardRulesFile.loadDefault())
        return SerialDeviceDiscovery(table: table, includeNonUSB: includeNonUSB, logger: logger)
    }

    /// A prober that opens each port as `serial:PATH?OPTIONS` would.
    static func prober(
        transportOptions: [(key: String, value: String)], timeout: Duration = .seconds(1), logger: Logger
    ) -> SerialDeviceProber {
        let options = transportOptions.map { ($0.key, $0.value) }
        return SerialDeviceProber(timeout: timeout, logger: logger) { device in
            let uri = McuMgrDeviceURI(scheme: .serial, target: device.path, options: options.map { (key: $0.0, value: $0.1) })
            return try DeviceResolver.transport(for: uri, logger: logger)
        }
    }

    /// What the last discovery filter selected in this process.
    static let resolved = ResolvedSelection()
}

/// The selection a filter made, shared between the resolver and the commands that follow the board.
final class ResolvedSelection: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: SerialDeviceSelection?

    func set(_ selection: SerialDeviceSelection) {
        lock.lock()
        defer { lock.unlock() }
        value = selection
    }

    var selection: SerialDeviceSelection? {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// `smp os reset` on a board selected by a discovery filter: follow it while it leaves the bus and comes
/// back (perhaps as another tty), so that the next command finds it ready.
enum ResetFollowing {
    /// Starts watching before the reset; nil when the device did not come from discovery or its port stays
    /// while the target resets (a probe's VCOM, a USB-UART bridge).
    static func prepare(_ context: CommandContext) async -> DeviceFollower? {
        guard let selection = DiscoveryOptions.resolved.selection, selection.uri == context.uri,
            selection.device.board?.followsResets ?? true
        else { return nil }
        let logger = DiscoveryOptions.logger(verbose: context.options.verbose)
        let monitor = SerialDeviceMonitor(
            discovery: SerialDeviceDiscovery(logger: logger), rescanInterval: .milliseconds(250))
        let follower = DeviceFollower(device: selection.device, monitor: monitor, logger: logger)
        await follower.start()
        return follower
    }

    /// Waits until the board is back; a board that does not come back is a warning (the reset itself
    /// worked).
    static func finish(_ follower: DeviceFollower?, _ context: CommandContext) async {
        guard let follower else { return }
        do {
            let device = try await follower.reconnected(within: context.options.timeouts.atLeast(McuMgrTimeouts.reconnectFloor))
            if context.options.verbose { Terminal.error("device: back at serial:\(device.path) after the reset") }
        } catch let error as McuMgrError {
            Terminal.warning(error.message)
        } catch {
            Terminal.warning("\(error)")
        }
        await follower.stop()
    }
}

/// Another kind of device `smp devices` lists besides serial ports (the Bluetooth LE scan plugs in here:
/// append a provider to `DeviceListProviders.all`).
protocol DeviceListProvider: Sendable {
    /// A short name for the JSON key and headings, e.g. "ble".
    var kind: String { get }
    /// Whether the provider can run here (e.g. a Bluetooth adapter exists); when not, it is skipped.
    func isAvailable() async -> Bool
    /// The devices found within `timeout`.
    func devices(timeout: Duration, logger: Logger) async throws -> [ListedDevice]
}

/// One device from a `DeviceListProvider`.
struct ListedDevice: Sendable {
    /// The URI to pass as --device, e.g. `ble:AA:BB:CC:DD:EE:FF`.
    var uri: String
    /// A name for people (advertised name, board name).
    var name: String
    /// Further fields, shown as `key value` lines and as JSON strings.
    var details: [(key: String, value: String)]
}

enum DeviceListProviders {
    /// The providers `smp devices` asks besides udev.
    static let all: [any DeviceListProvider] = [BLEDeviceListProvider()]
}
