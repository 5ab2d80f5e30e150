#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrDBus

/// BlueZ's client API (Adapter1, Device1, GattCharacteristic1) over one D-Bus connection, with
/// BlueZ's errors turned into `McuMgrError`s that say what to do.
public struct BlueZClient: Sendable {
    public let connection: DBusConnection

    public init(connection: DBusConnection) {
        self.connection = connection
    }

    /// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured) or the bus at `address`.
    public static func connect(busAddress: String? = nil) async throws -> BlueZClient {
        let connection =
            if let busAddress { try await DBusConnection.connect(address: busAddress) } else {
                try await DBusConnection.system()
            }
        return BlueZClient(connection: connection)
    }

    // MARK: Objects and adapters

    /// All of BlueZ's objects.
    public func objects() async throws -> BlueZObjects {
        do {
            return BlueZObjects(try await connection.managedObjects(destination: BlueZ.service))
        } catch let error as DBusError {
            throw Self.map(error, "asking BlueZ for its adapters and devices")
        }
    }

    /// The adapter to use: the one named (`hci1`), else the first powered one, else the first.
    /// - Throws: `.transport` when there is none, the named one is missing, or it is powered off.
    public func adapter(named name: String?, in objects: BlueZObjects) throws -> BlueZAdapterInfo {
        let adapters = objects.adapters
        guard !adapters.isEmpty else {
            throw McuMgrError(
                .transport,
                "no Bluetooth adapter: BlueZ reports none; plug in or enable a Bluetooth controller (check `bluetoothctl list` and `rfkill list`)"
            )
        }
        let chosen: BlueZAdapterInfo
        if let name {
            guard let match = adapters.first(where: { $0.name == name || $0.address?.uppercased() == name.uppercased() }) else {
                throw McuMgrError(
                    .transport,
                    "no Bluetooth adapter \(name); adapters: \(adapters.map(\.label).joined(separator: ", ")); pick one with ?adapter=NAME"
                )
            }
            chosen = match
        } else {
            chosen = adapters.first(where: \.powered) ?? adapters[0]
        }
        guard chosen.powered else {
            throw McuMgrError(
                .transport,
                "Bluetooth adapter \(chosen.label) is powered off; turn it on with `bluetoothctl power on` (and `rfkill unblock bluetooth` if it is blocked)"
            )
        }
        return chosen
    }

    // MARK: Discovery

    /// Sets the discovery filter (LE only; the service UUIDs when given; `duplicateData`: a
    /// PropertiesChanged for every advertisement, not only for changes) and starts discovery. Called
    /// again while discovering, it changes the filter: bluetoothd restarts its scan when that changes the
    /// filter it merges from every program's.
    public func startDiscovery(adapter: BlueZAdapterInfo, serviceUUIDs: [String], duplicateData: Bool = false) async throws {
        var filter: [String: DBusValue] = ["Transport": .string("le"), "DuplicateData": .boolean(duplicateData)]
        if !serviceUUIDs.isEmpty { filter["UUIDs"] = .strings(serviceUUIDs) }
        do {
            _ = try await connection.call(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface, member: "SetDiscoveryFilter",
                [.properties(filter)])
            _ = try await connection.call(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface, member: "StartDiscovery")
        } catch let error as DBusError where error.name == "org.bluez.Error.InProgress" {
            // Already discovering for this client: fine.
        } catch let error as DBusError {
            throw Self.map(error, "starting a scan on \(adapter.label)")
        }
    }

    /// Whether the adapter is discovering (for any program); false when that cannot be read.
    public func isDiscovering(_ adapter: BlueZAdapterInfo) async -> Bool {
        let properties = try? await connection.properties(destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface)
        return properties?["Discovering"]?.bool ?? false
    }

    /// Stops discovery; errors are ignored (discovery also ends when this connection closes).
    public func stopDiscovery(adapter: BlueZAdapterInfo) async {
        _ = try? await connection.call(
            destination: BlueZ.service, path: adapter.path, interface: BlueZ.adapterInterface, member: "StopDiscovery",
            timeout: .seconds(5))
    }

    // MARK: Devices

    /// `Device1.Connect`.
    public func connect(_ device: BlueZDeviceInfo, timeout: Duration) async throws {
        do {
            _ = try await connection.call(
                .methodCall(destination: BlueZ.service, path: device.path, interface: BlueZ.deviceInterface, member: "Connect"),
                timeout: timeout)
        } catch let error as DBusError where error.name == "org.bluez.Error.AlreadyConnected" {
            return
        }
    }

    /// `Device1.Pair`: connects when needed and pairs, asking the registered agent; returns when done.
    /// - Throws: BlueZ's `DBusError` (`org.bluez.Error.AuthenticationFailed`, `AlreadyExists`, ...).
    public func pair(_ device: BlueZDeviceInfo, timeout: Duration) async throws {
        _ = try await connection.call(
            .methodCall(destination: BlueZ.service, path: device.path, interface: BlueZ.deviceInterface, member: "Pair"),
            timeout: timeout)
    }

    /// `Device1.Disconnect`; errors are ignored.
    public func disconnect(_ path: DBusObjectPath) async {
        _ = try? await connection.call(
            destination: BlueZ.service, path: path, interface: BlueZ.deviceInterface, member: "Disconnect", timeout: .seconds(5))
    }

    /// Asks BlueZ to disconnect the device without waiting for it: BlueZ 5.66 lets the device's profiles
    /// go first and ends the connection two seconds later (`DISCONNECT_TIMER` in src/device.c), and
    /// answers `Disconnect` only then. Connected stays true until that happens.
    public func requestDisconnect(_ path: DBusObjectPath) {
        try? connection.send(
            .methodCall(destination: BlueZ.service, path: path, interface: BlueZ.deviceInterface, member: "Disconnect", body: []))
    }

    /// Closes the bus connection after everything sent on it (a `requestDisconnect`) has left.
    public func closeFlushed() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            connection.onDisconnect { _ in done.resume() }
            connection.close()
        }
    }

    /// A device's current properties.
    public func device(at path: DBusObjectPath) async throws -> BlueZDeviceInfo {
        do {
            return BlueZDeviceInfo(
                path: path, properties: try await connection.properties(destination: BlueZ.service, path: path, interface: BlueZ.deviceInterface))
        } catch let error as DBusError {
            throw Self.map(error, "reading \(path)")
        }
    }

    // MARK: Characteristics

    /// `AcquireWrite` / `AcquireNotify`: a SOCK_SEQPACKET descriptor and the ATT MTU.
    public func acquire(_ member: String, characteristic: DBusObjectPath) async throws -> (fd: Int32, mtu: Int) {
        let reply = try await connection.call(
            destination: BlueZ.service, path: characteristic, interface: BlueZ.gattCharacteristicInterface, member: member,
            [.properties([:])], timeout: .seconds(10))
        guard reply.count == 2, let fd = reply[0].fileDescriptor, let mtu = reply[1].int else {
            throw DBusError(name: DBusError.invalidArgs, message: "\(member) answered (\(reply.map(\.signature).joined())), not (hq)")
        }
        return (fd.take(), mtu)
    }

    /// `Adapter1.RemoveDevice`: BlueZ disconnects the device and forgets it, with its bond and its copy
    /// of the device's services.
    /// - Returns: false when the adapter did not know the device.
    public func removeDevice(_ device: BlueZDeviceInfo) async throws -> Bool {
        do {
            _ = try await connection.call(
                destination: BlueZ.service, path: device.adapterPath, interface: BlueZ.adapterInterface, member: "RemoveDevice",
                [.objectPath(device.path)], timeout: .seconds(10))
        } catch let error as DBusError where error.name == "org.bluez.Error.DoesNotExist" || error.name == DBusError.unknownObject {
            return false
        } catch let error as DBusError {
            throw BlueZClient.map(error, "removing \(device.label) from \(device.adapterPath.rawValue.split(separator: "/").last.map(String.init) ?? device.adapterPath.rawValue)")
        }
        return true
    }

    /// `ReadValue({})`: the characteristic's value, read from the device.
    public func readValue(characteristic: DBusObjectPath, timeout: Duration = .seconds(5)) async throws -> [UInt8] {
        let reply = try await connection.call(
            destination: BlueZ.service, path: characteristic, interface: BlueZ.gattCharacteristicInterface, member: "ReadValue",
            [.properties([:])], timeout: timeout)
        guard let value = reply.first?.bytes else {
            throw DBusError(name: DBusError.invalidArgs, message: "ReadValue answered (\(reply.map(\.signature).joined())), not (ay)")
        }
        return value
    }

    /// `StartNotify`.
    public func startNotify(characteristic: DBusObjectPath) async throws {
        _ = try await connection.call(
            destination: BlueZ.service, path: characteristic, interface: BlueZ.gattCharacteristicInterface, member: "StartNotify",
            timeout: .seconds(10))
    }

    /// `WriteValue(value, {type})` without waiting for the answer: writes issued one after another go
    /// out in that order; `completion` gets the error, if any (on the D-Bus I/O thread).
    public func writeValue(
        _ value: [UInt8], characteristic: DBusObjectPath, type: String,
        completion: @escaping @Sendable (DBusError?) -> Void
    ) {
        connection.call(
            .methodCall(
                destination: BlueZ.service, path: characteristic, interface: BlueZ.gattCharacteristicInterface,
                member: "WriteValue", body: [.bytes(value), .properties(["type": .string(type)])]),
            timeout: .seconds(10)
        ) { result in
            switch result {
            case .success(let reply) where reply.kind == .error:
                completion(DBusError(name: reply.errorName ?? DBusError.failed, message: reply.body.first?.string ?? ""))
            case .success:
                completion(nil)
            case .failure(let error):
                completion(error)
            }
        }
    }

    // MARK: Errors

    /// BlueZ and bus errors as `McuMgrError`s with a hint; the D-Bus error is their `cause`.
    public static func map(_ error: DBusError, _ operation: String) -> McuMgrError {
        var mapped = hinted(error, operation)
        mapped.cause = error
        return mapped
    }

    private static func hinted(_ error: DBusError, _ operation: String) -> McuMgrError {
        switch error.name {
        case DBusError.serviceUnknown, DBusError.nameHasNoOwner:
            return McuMgrError(
                .transport,
                "\(operation): BlueZ (org.bluez) is not on the system bus; start it with `systemctl start bluetooth` (for a private bus set DBUS_SYSTEM_BUS_ADDRESS)"
            )
        case let name where name.hasPrefix("org.freedesktop.DBus.Error.Spawn."):
            // The bus tried to start BlueZ on demand: bluetoothd is gone (seen: bluetoothd 5.66 crashed
            // when pairing for an encrypted characteristic failed).
            return McuMgrError(
                .transport,
                "\(operation): BlueZ (bluetoothd) is not running and the bus could not start it (\(error.message.isEmpty ? error.name : error.message)); it may have crashed (`journalctl -u bluetooth`): restart it with `systemctl restart bluetooth`"
            )
        case "org.bluez.Error.NotReady":
            return McuMgrError(.transport, "\(operation): the Bluetooth adapter is not ready (powered off?); try `bluetoothctl power on`")
        case "org.bluez.Error.NotAuthorized", "org.bluez.Error.AuthenticationFailed", "org.bluez.Error.NotPermitted":
            return McuMgrError(
                .transport,
                "\(operation): \(error.message.isEmpty ? error.name : error.message); the device may require pairing (since Zephyr 4.0 the SMP characteristic needs an authenticated link by default): pair first with `smp ble pair ADDRESS`, or run the command with --pair"
            )
        case "org.bluez.Error.Failed", "org.bluez.Error.NotAvailable", "org.bluez.Error.NotConnected":
            return McuMgrError(.transport, "\(operation) failed: \(error.message.isEmpty ? error.name : error.message)")
        default:
            return error.mcuMgrError(operation)
        }
    }
}
