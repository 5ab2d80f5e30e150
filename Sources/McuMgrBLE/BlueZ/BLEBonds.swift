#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrDBus

/// Pairing and bonds through BlueZ: pair with a device (this process answering BlueZ's questions as
/// its agent), list the devices an adapter is paired with, and forget one.
public enum BLEBonds {
    /// What `pair` did.
    public struct Pairing: Sendable {
        /// The device after pairing.
        public var device: BlueZDeviceInfo
        /// It was paired already: nothing was asked of the device.
        public var alreadyPaired: Bool
    }

    /// Pairs with the device `configuration` names (scanning for it when BlueZ does not know it), with
    /// an agent of `capability` that asks `delegate`; leaves the link as it found it (a connection made
    /// for pairing is closed).
    /// - Throws: `McuMgrError` saying why pairing failed and what to do.
    public static func pair(
        _ configuration: McuMgrBleTransport.Configuration, capability: BLEIOCapability = .keyboardDisplay,
        delegate: any BLEPairingDelegate, timeout: Duration = .seconds(90), logger: Logger = Logger(label: "McuMgrBLE")
    ) async throws -> Pairing {
        let client = try await BlueZClient.connect(busAddress: configuration.busAddress)
        defer { client.connection.close() }
        let objects = try await client.objects()
        let adapter = try client.adapter(named: configuration.adapter, in: objects)
        let connector = BleConnector(
            configuration: configuration, client: client, logger: logger, name: "ble:\(configuration.target)", deviceMemory: .standard)
        // A connection an earlier command asked BlueZ to end would end in the middle of pairing.
        let found = await connector.awaitRequestedDisconnect(try await connector.findDevice(adapter: adapter, objects: objects))
        if found.paired { return Pairing(device: found, alreadyPaired: true) }
        let device = try await pair(found, client: client, capability: capability, delegate: delegate, timeout: timeout)
        return Pairing(device: device, alreadyPaired: false)
    }

    /// Pairs with `found` through `client`, with an agent of this connection's own (BlueZ asks the agent
    /// of the process that calls Pair; the default agent, a desktop's, is left alone); closes a
    /// connection made for pairing unless `keepConnection`.
    /// - Returns: the device after pairing.
    static func pair(
        _ found: BlueZDeviceInfo, client: BlueZClient, capability: BLEIOCapability, delegate: any BLEPairingDelegate,
        timeout: Duration, keepConnection: Bool = false
    ) async throws -> BlueZDeviceInfo {
        let agent = try await BlueZAgent.register(on: client.connection, capability: capability, delegate: delegate)
        let disconnectAfter = !found.connected && !keepConnection
        do {
            try await client.pair(found, timeout: timeout)
        } catch let error as DBusError where error.name == "org.bluez.Error.AlreadyExists" {
            // Paired meanwhile (BlueZ paired on its own when a connection asked for encryption).
        } catch let error as DBusError {
            await agent.unregister()
            if !found.connected { await client.disconnect(found.path) }
            throw pairingFailure(error, device: found, timeout: timeout)
        }
        await agent.unregister()
        let device = (try? await client.device(at: found.path)) ?? found
        if disconnectAfter { await client.disconnect(found.path) }
        guard device.paired else {
            throw McuMgrError(
                .transport,
                "BlueZ answered the pairing with \(device.label) but does not report it paired; try again, or `bluetoothctl pair \(device.address?.rawValue ?? "ADDRESS")`")
        }
        return device
    }

    /// BlueZ's pairing errors as what happened and what to do.
    static func pairingFailure(_ error: DBusError, device: BlueZDeviceInfo, timeout: Duration) -> McuMgrError {
        var failure = pairingFailureMessage(error, device: device, timeout: timeout)
        failure.cause = error
        return failure
    }

    private static func pairingFailureMessage(_ error: DBusError, device: BlueZDeviceInfo, timeout: Duration) -> McuMgrError {
        let address = device.address?.rawValue ?? "ADDRESS"
        let said = error.message.isEmpty ? error.name : error.message
        switch error.name {
        case "org.bluez.Error.AuthenticationFailed":
            return McuMgrError(
                .transport,
                "pairing with \(device.label) failed (\(said)): the passkey did not match, or the device refused. If the device was paired with this computer before and has since erased its bonds, forget it here first (`smp ble forget \(address)`), then pair again")
        case "org.bluez.Error.AuthenticationRejected", "org.bluez.Error.AuthenticationCanceled":
            return McuMgrError(.transport, "pairing with \(device.label) was refused or cancelled (\(said)), at this end or on the device; run `smp ble pair \(address)` again and accept on both ends")
        case "org.bluez.Error.AuthenticationTimeout":
            return McuMgrError(.timeout, "pairing with \(device.label) timed out (\(said)): nobody answered on the device or here in time; run `smp ble pair \(address)` again")
        case "org.bluez.Error.ConnectionAttemptFailed":
            return McuMgrError(.transport, "cannot connect to \(device.label) to pair (\(said)); is it advertising (not connected to another central) and in range?")
        case "org.bluez.Error.InProgress":
            return McuMgrError(.transport, "\(device.label) is pairing already (another program, or a desktop dialog waiting for an answer); finish or cancel that, then try again")
        case DBusError.noReply:
            return McuMgrError(.timeout, "pairing with \(device.label) got no answer from BlueZ within \(timeout); is a passkey waiting to be confirmed on the device?")
        default:
            return BlueZClient.map(error, "pairing with \(device.label)")
        }
    }

    /// The devices `adapter` (nil: the first powered one) is paired with.
    public static func bonds(adapter name: String? = nil, busAddress: String? = nil) async throws -> (BlueZAdapterInfo, [BlueZDeviceInfo]) {
        let client = try await BlueZClient.connect(busAddress: busAddress)
        defer { client.connection.close() }
        let objects = try await client.objects()
        let adapter = try client.adapter(named: name, in: objects)
        let paired = objects.devices(on: adapter.path).filter(\.paired)
        return (adapter, paired.sorted { ($0.address?.rawValue ?? "") < ($1.address?.rawValue ?? "") })
    }

    /// Removes `address` from `adapter`'s devices, with its keys: the next connection pairs afresh.
    /// - Returns: false when the adapter did not know the device.
    public static func forget(_ address: BluetoothAddress, adapter name: String? = nil, busAddress: String? = nil) async throws -> Bool {
        let client = try await BlueZClient.connect(busAddress: busAddress)
        defer { client.connection.close() }
        let objects = try await client.objects()
        let adapter = try client.adapter(named: name, in: objects)
        guard let device = objects.devices(on: adapter.path).first(where: { $0.address == address }) else { return false }
        return try await client.removeDevice(device)
    }
}
