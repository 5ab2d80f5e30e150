import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrDBus

/// Looks for LE devices through BlueZ: devices BlueZ already knows that are present (they have an
/// RSSI, which BlueZ reports only for devices seen by the current discovery) and those that appear or
/// change while discovering.
public struct BLEScanner: Sendable {
    public let client: BlueZClient
    public let adapter: BlueZAdapterInfo

    /// How often a scan starts discovery over (see `scan`).
    public static let restartInterval = Duration.seconds(3)

    public init(client: BlueZClient, adapter: BlueZAdapterInfo) {
        self.client = client
        self.adapter = adapter
    }

    /// Scans for up to `timeout`, or until `stop` accepts a device (which is then returned first).
    /// - Parameters:
    ///   - serviceUUIDs: the discovery filter's service UUIDs (empty: any LE device).
    ///   - known: BlueZ's objects from before the scan (their devices are candidates at once).
    /// - Returns: the devices seen, most recently updated last; the one `stop` accepted first.
    public func scan(
        serviceUUIDs: [String], timeout: Duration, known: BlueZObjects,
        stop: (@Sendable (BlueZDeviceInfo) -> Bool)? = nil
    ) async throws -> [BlueZDeviceInfo] {
        let table = DeviceTable()
        for device in known.devices(on: adapter.path) {
            table.update(device, seen: device.discovered || device.connected)
        }
        if let stop, let hit = table.all.first(where: stop) { return [hit] }

        let connection = client.connection
        let adapterPath = adapter.path
        let wake = AsyncStream.makeStream(of: BlueZDeviceInfo.self)
        let added = try await connection.subscribe(.objectManager(sender: BlueZ.service, member: "InterfacesAdded")) { message in
            guard message.body.count == 2, let path = message.body[0].objectPath, path.isDescendant(of: adapterPath),
                let properties = message.body[1].stringKeyedDictionary?[BlueZ.deviceInterface]?.stringKeyedDictionary
            else { return }
            let device = BlueZDeviceInfo(path: path, properties: properties)
            table.update(device, seen: true)
            wake.continuation.yield(device)
        }
        let changed = try await connection.subscribe(
            .propertiesChanged(sender: BlueZ.service, pathNamespace: adapterPath, interface: BlueZ.deviceInterface)
        ) { message in
            guard let path = message.path, message.body.count >= 2, let properties = message.body[1].stringKeyedDictionary else { return }
            let invalidated = message.body.count > 2 ? (message.body[2].strings ?? []) : []
            if let device = table.change(path, properties, invalidated: invalidated) {
                wake.continuation.yield(device)
            }
        }
        defer {
            added.cancel()
            changed.cancel()
        }
        // Devices that appeared between the snapshot and the subscriptions.
        if let fresh = try? await client.objects() {
            for device in fresh.devices(on: adapterPath) where table.device(at: device.path) == nil {
                table.update(device, seen: device.discovered || device.connected)
            }
            if let stop, let hit = table.all.first(where: stop) { return [hit] }
        }
        try await client.startDiscovery(adapter: adapter, serviceUUIDs: serviceUUIDs)
        // Linux drops an advertising report that arrives before it reports discovery started, and the
        // controller's duplicate filter then keeps that device quiet until scanning starts over (the
        // kernel does so only after 10.24 s). Starting over every few seconds gives a device that
        // advertises several chances within any timeout. Only discovery this client started is
        // stopped; another client's keeps the controller scanning anyway.
        let restarter = Task { [client, adapter] in
            while !Task.isCancelled {
                try await Task.sleep(for: Self.restartInterval)
                await client.stopDiscovery(adapter: adapter)
                try Task.checkCancellation()
                try await client.startDiscovery(adapter: adapter, serviceUUIDs: serviceUUIDs)
            }
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            wake.continuation.finish()
        }
        // BlueZ signals a device's RSSI only when it changes by more than its threshold: a device seen in
        // an earlier discovery whose signal is steady (or unmeasured, 127) sends nothing while it keeps
        // advertising. So BlueZ's objects are read once a second as well.
        let poller = Task { [client] in
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(1))
                guard let objects = try? await client.objects() else { continue }
                for device in objects.devices(on: adapterPath) where device.discovered || device.connected {
                    table.update(device, seen: true)
                    wake.continuation.yield(device)
                }
            }
        }
        var accepted: BlueZDeviceInfo?
        for await device in wake.stream {
            if let stop, stop(device) {
                accepted = device
                break
            }
        }
        timer.cancel()
        poller.cancel()
        restarter.cancel()
        _ = await poller.result
        _ = await restarter.result
        await client.stopDiscovery(adapter: adapter)
        let seen = table.all.filter { table.wasSeen($0.path) }
        if let accepted { return [accepted] + seen.filter { $0.path != accepted.path } }
        return seen
    }
}

/// Devices by path, and which of them showed signs of life during the scan.
final class DeviceTable: @unchecked Sendable {
    private let lock = NIOLock()
    private var devices: [DBusObjectPath: BlueZDeviceInfo] = [:]
    private var order: [DBusObjectPath] = []
    private var seen: Set<DBusObjectPath> = []

    func update(_ device: BlueZDeviceInfo, seen isSeen: Bool) {
        lock.lock()
        defer { lock.unlock() }
        if devices[device.path] == nil { order.append(device.path) }
        devices[device.path] = device
        if isSeen { seen.insert(device.path) }
    }

    func change(_ path: DBusObjectPath, _ properties: [String: DBusValue], invalidated: [String]) -> BlueZDeviceInfo? {
        lock.lock()
        defer { lock.unlock() }
        guard var device = devices[path] else { return nil }
        device.update(properties, invalidated: invalidated)
        devices[path] = device
        seen.insert(path)
        return device
    }

    func device(at path: DBusObjectPath) -> BlueZDeviceInfo? {
        lock.lock()
        defer { lock.unlock() }
        return devices[path]
    }

    func wasSeen(_ path: DBusObjectPath) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return seen.contains(path)
    }

    var all: [BlueZDeviceInfo] {
        lock.lock()
        defer { lock.unlock() }
        return order.compactMap { devices[$0] }
    }
}

extension BLEScanner {
    /// Scans an adapter for LE devices, by default only those that advertise the SMP service.
    /// - Parameters:
    ///   - adapter: `hci0`, or nil for the first powered adapter.
    ///   - busAddress: the bus BlueZ is on; nil = the system bus.
    /// - Returns: the adapter used and the devices seen, strongest signal first.
    /// - Throws: `McuMgrError` (no BlueZ, no adapter, adapter off).
    public static func discover(
        adapter: String? = nil, timeout: Duration, onlySMP: Bool = true, busAddress: String? = nil
    ) async throws -> (adapter: BlueZAdapterInfo, devices: [BlueZDeviceInfo]) {
        let client = try await BlueZClient.connect(busAddress: busAddress)
        defer { client.connection.close() }
        let objects = try await client.objects()
        let chosen = try client.adapter(named: adapter, in: objects)
        let seen = try await BLEScanner(client: client, adapter: chosen)
            .scan(serviceUUIDs: onlySMP ? [SMPGattUUID.service] : [], timeout: timeout, known: objects)
        let devices = seen.filter { !onlySMP || $0.advertisesSMP }
            .sorted { ($0.rssi ?? Int.min, $1.address?.rawValue ?? "") > ($1.rssi ?? Int.min, $0.address?.rawValue ?? "") }
        return (chosen, devices)
    }
}
