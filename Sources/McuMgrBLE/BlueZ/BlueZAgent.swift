#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrDBus
import NIOConcurrencyHelpers

/// What pairing asks of the person at this end. BlueZ asks through an agent (`org.bluez.Agent1`); the
/// answers may take as long as a person takes (they run off the D-Bus thread).
public protocol BLEPairingDelegate: Sendable {
    /// Passkey entry, the device displaying: the six digits the device shows, or nil to refuse.
    func passkey(for device: String) async -> UInt32?
    /// Passkey entry, this end displaying: show `passkey` for the person to type on the device
    /// (`entered`: how many digits they typed so far, when the device reports it).
    func display(passkey: UInt32, entered: Int?, for device: String)
    /// Numeric comparison: both ends show `passkey`; whether the person confirms they match.
    func confirm(passkey: UInt32, for device: String) async -> Bool
    /// Pairing without a passkey (Just Works) that the other end started: whether to accept.
    func authorize(_ device: String) async -> Bool
}

/// Passkeys as people see them: six digits, leading zeros included.
public enum BLEPasskey {
    public static func text(_ passkey: UInt32) -> String {
        let digits = String(passkey)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}

/// BlueZ's I/O capabilities for an agent: what it can show and what it can take in; they decide which
/// pairing method the two ends use (Bluetooth Core, Vol 3, Part H, 2.3.5.1).
public enum BLEIOCapability: String, Sendable, CaseIterable {
    case displayOnly = "DisplayOnly"
    case displayYesNo = "DisplayYesNo"
    case keyboardOnly = "KeyboardOnly"
    case noInputNoOutput = "NoInputNoOutput"
    case keyboardDisplay = "KeyboardDisplay"
}

/// An `org.bluez.Agent1` served on a D-Bus connection, answering through a `BLEPairingDelegate`.
public final class BlueZAgent: DBusDeferringObject, @unchecked Sendable {
    public let path: DBusObjectPath
    public let capability: BLEIOCapability
    private let delegate: any BLEPairingDelegate
    private let connection: DBusConnection
    /// Requests for devices of other adapters stay unanswered (see `register`).
    private let adapter: DBusObjectPath?
    private let lock = NIOLock()
    private var unanswered: [DBusReply] = []

    /// Exports an agent at `path` on `connection` and registers it with BlueZ; `asDefault` makes it
    /// the agent for pairings no client started (a peripheral's, or incoming ones). With `adapter`,
    /// the agent answers only for that adapter's devices and leaves other requests unanswered, as a
    /// person who is not there would: one bluetoothd serving a peripheral's adapter and a central's
    /// (a test rig) asks the default agent for both ends.
    /// - Throws: `McuMgrError` when BlueZ refuses (e.g. another agent of this connection is registered).
    public static func register(
        on connection: DBusConnection, capability: BLEIOCapability, delegate: any BLEPairingDelegate,
        path: DBusObjectPath = "/org/mcumgr/agent", asDefault: Bool = false, adapter: DBusObjectPath? = nil
    ) async throws -> BlueZAgent {
        let agent = BlueZAgent(path: path, capability: capability, delegate: delegate, connection: connection, adapter: adapter)
        try connection.export(agent, at: path)
        do {
            _ = try await connection.call(
                destination: BlueZ.service, path: BlueZ.agentManagerPath, interface: BlueZ.agentManagerInterface,
                member: "RegisterAgent", [.objectPath(path), .string(capability.rawValue)], timeout: .seconds(10))
            if asDefault {
                _ = try await connection.call(
                    destination: BlueZ.service, path: BlueZ.agentManagerPath, interface: BlueZ.agentManagerInterface,
                    member: "RequestDefaultAgent", [.objectPath(path)], timeout: .seconds(10))
            }
        } catch let error as DBusError {
            connection.unexport(path)
            throw BlueZClient.map(error, "registering a pairing agent with BlueZ")
        }
        return agent
    }

    private init(
        path: DBusObjectPath, capability: BLEIOCapability, delegate: any BLEPairingDelegate, connection: DBusConnection,
        adapter: DBusObjectPath?
    ) {
        self.adapter = adapter
        self.path = path
        self.capability = capability
        self.delegate = delegate
        self.connection = connection
    }

    /// Unregisters the agent and stops serving it; errors are ignored (BlueZ also drops an agent whose
    /// connection closes).
    public func unregister() async {
        _ = try? await connection.call(
            destination: BlueZ.service, path: BlueZ.agentManagerPath, interface: BlueZ.agentManagerInterface,
            member: "UnregisterAgent", [.objectPath(path)], timeout: .seconds(5))
        connection.unexport(path)
    }

    public var interfaceProperties: [String: [String: DBusValue]] { [BlueZ.agentInterface: [:]] }

    /// The device's address from its object path (`/org/bluez/hci0/dev_AA_BB_...`), for the person.
    static func deviceName(_ value: DBusValue?) -> String {
        guard let path = value?.objectPath?.rawValue, let last = path.split(separator: "/").last, last.hasPrefix("dev_") else {
            return value?.objectPath?.rawValue ?? "?"
        }
        return String(last.dropFirst(4)).replacing("_", with: ":")
    }

    static let rejected = DBusError(name: "org.bluez.Error.Rejected", message: "refused at this end")

    public func handle(_ call: DBusMethodCall, reply: DBusReply) {
        guard call.interface == nil || call.interface == BlueZ.agentInterface else {
            reply.fail(DBusError.unknownMethod(call))
            return
        }
        let device = Self.deviceName(call.arguments.first)
        let delegate = self.delegate
        if let adapter, call.member.hasPrefix("Request") || call.member.hasPrefix("Display") || call.member == "AuthorizeService",
            let path = call.arguments.first?.objectPath, !path.isDescendant(of: adapter)
        {
            lock.withLock { unanswered.append(reply) }
            return
        }
        switch call.member {
        case "Cancel":
            // BlueZ gave up on a request: what was held for it goes.
            let held = lock.withLock {
                defer { unanswered.removeAll() }
                return unanswered
            }
            for reply in held { reply.fail(DBusError(name: "org.bluez.Error.Canceled", message: "cancelled")) }
            reply.succeed()
        case "Release":
            reply.succeed()
        case "RequestPasskey":
            Task {
                if let passkey = await delegate.passkey(for: device) { reply.succeed([.uint32(passkey)]) } else { reply.fail(Self.rejected) }
            }
        case "DisplayPasskey":
            let passkey = call.arguments.count > 1 ? call.arguments[1].int.map(UInt32.init) ?? 0 : 0
            let entered = call.arguments.count > 2 ? call.arguments[2].int : nil
            delegate.display(passkey: passkey, entered: entered, for: device)
            reply.succeed()
        case "RequestConfirmation":
            let passkey = call.arguments.count > 1 ? call.arguments[1].int.map(UInt32.init) ?? 0 : 0
            Task { if await delegate.confirm(passkey: passkey, for: device) { reply.succeed() } else { reply.fail(Self.rejected) } }
        case "RequestAuthorization":
            Task { if await delegate.authorize(device) { reply.succeed() } else { reply.fail(Self.rejected) } }
        case "AuthorizeService":
            // A profile connection of a device already paired: accepted.
            reply.succeed()
        case "RequestPinCode", "DisplayPinCode":
            // Classic Bluetooth's PIN codes: SMP devices are LE only.
            reply.fail(DBusError(name: "org.bluez.Error.Rejected", message: "PIN codes are not supported (LE devices pair with passkeys)"))
        default:
            reply.fail(DBusError.unknownMethod(call))
        }
    }
}
