import McuMgrDBus

/// BlueZ's D-Bus names.
public enum BlueZ {
    public static let service = "org.bluez"
    public static let adapterInterface = "org.bluez.Adapter1"
    public static let deviceInterface = "org.bluez.Device1"
    public static let gattServiceInterface = "org.bluez.GattService1"
    public static let gattCharacteristicInterface = "org.bluez.GattCharacteristic1"
    public static let gattManagerInterface = "org.bluez.GattManager1"
    public static let advertisingManagerInterface = "org.bluez.LEAdvertisingManager1"
    public static let advertisementInterface = "org.bluez.LEAdvertisement1"
    public static let agentManagerInterface = "org.bluez.AgentManager1"
    public static let agentInterface = "org.bluez.Agent1"
    /// Where BlueZ serves AgentManager1.
    public static let agentManagerPath: DBusObjectPath = "/org/bluez"
}

/// An adapter (`/org/bluez/hci0`).
public struct BlueZAdapterInfo: Sendable, Hashable {
    public var path: DBusObjectPath
    /// `hci0`.
    public var name: String
    public var address: String?
    public var powered: Bool
    public var alias: String?

    init(path: DBusObjectPath, properties: [String: DBusValue]) {
        self.path = path
        self.name = path.rawValue.split(separator: "/").last.map(String.init) ?? path.rawValue
        self.address = properties["Address"]?.string
        self.powered = properties["Powered"]?.bool ?? false
        self.alias = properties["Alias"]?.string
    }

    /// `hci0 (00:00:5E:00:53:00)`.
    public var label: String { address.map { "\(name) (\($0))" } ?? name }
}

/// A remote device as an adapter sees it (`/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF`).
public struct BlueZDeviceInfo: Sendable, Hashable {
    public var path: DBusObjectPath
    public var adapterPath: DBusObjectPath
    public var address: BluetoothAddress?
    /// The advertised or GATT name, when known.
    public var name: String?
    /// BlueZ's alias (the name, or the address when there is none).
    public var alias: String?
    /// Signal strength in dBm; nil when BlueZ reports none, or reports HCI's 127 ("not available").
    public var rssi: Int?
    /// Whether BlueZ reports a signal strength at all (it does only for devices the current or latest
    /// discovery saw, even when the controller could not measure it).
    public var discovered: Bool
    /// BlueZ's `Modalias` (from the device's PnP ID), e.g. `usb:v1D6Bp0246d0542` for a peripheral that
    /// runs BlueZ 5.66.
    public var modalias: String?
    /// Advertised service UUIDs (lower case).
    public var uuids: [String]
    public var connected: Bool
    public var servicesResolved: Bool
    public var paired: Bool
    /// Whether BlueZ stored keys for the device (`Bonded`, BlueZ 5.67 and later; nil before): paired
    /// without a bond means the keys last only for the connection.
    public var bonded: Bool?

    init(path: DBusObjectPath, properties: [String: DBusValue]) {
        self.path = path
        self.adapterPath = properties["Adapter"]?.objectPath ?? path.parent
        self.address = properties["Address"]?.string.flatMap(BluetoothAddress.init)
        self.name = properties["Name"]?.string
        self.alias = properties["Alias"]?.string
        let rssi = properties["RSSI"]?.int
        self.discovered = rssi != nil
        self.rssi = rssi == Self.rssiNotAvailable ? nil : rssi
        self.modalias = properties["Modalias"]?.string
        self.uuids = (properties["UUIDs"]?.strings ?? []).map { $0.lowercased() }
        self.connected = properties["Connected"]?.bool ?? false
        self.servicesResolved = properties["ServicesResolved"]?.bool ?? false
        self.paired = properties["Paired"]?.bool ?? false
        self.bonded = properties["Bonded"]?.bool
    }

    /// Applies a PropertiesChanged of Device1.
    mutating func update(_ changed: [String: DBusValue], invalidated: [String] = []) {
        var merged: [String: DBusValue] = [:]
        if let address { merged["Address"] = .string(address.rawValue) }
        if let name { merged["Name"] = .string(name) }
        if let alias { merged["Alias"] = .string(alias) }
        if discovered { merged["RSSI"] = .int16(Int16(clamping: rssi ?? Self.rssiNotAvailable)) }
        if let modalias { merged["Modalias"] = .string(modalias) }
        merged["UUIDs"] = .strings(uuids)
        merged["Connected"] = .boolean(connected)
        merged["ServicesResolved"] = .boolean(servicesResolved)
        merged["Paired"] = .boolean(paired)
        if let bonded { merged["Bonded"] = .boolean(bonded) }
        merged["Adapter"] = .objectPath(adapterPath)
        for key in invalidated { merged[key] = nil }
        merged.merge(changed) { _, new in new }
        self = BlueZDeviceInfo(path: path, properties: merged)
    }

    /// HCI's RSSI value for "not available" (Bluetooth Core, Vol 4, Part E, 7.7.65.2).
    static let rssiNotAvailable = 127

    /// Whether the device runs BlueZ (its PnP ID is BlueZ's default: Linux Foundation, product 0x0246).
    public var runsBlueZ: Bool { modalias?.lowercased().hasPrefix("usb:v1d6bp0246") ?? false }

    /// Whether the device advertises the SMP service.
    public var advertisesSMP: Bool { uuids.contains { SMPGattUUID.matches($0, SMPGattUUID.service) } }

    /// The name to show: the name, else the alias when it is not just the address, else nil.
    public var displayName: String? {
        if let name, !name.isEmpty { return name }
        if let alias, !alias.isEmpty, BluetoothAddress(alias) == nil { return alias }
        return nil
    }

    /// `NAME (AA:BB:CC:DD:EE:FF, -60 dBm)` for messages.
    public var label: String {
        var details = [address?.rawValue ?? path.rawValue]
        if let rssi { details.append("\(rssi) dBm") }
        return (displayName.map { "\"\($0)\" " } ?? "") + "(" + details.joined(separator: ", ") + ")"
    }
}

/// A GATT characteristic of a connected device.
public struct BlueZCharacteristicInfo: Sendable, Hashable {
    public var path: DBusObjectPath
    public var uuid: String
    public var servicePath: DBusObjectPath?
    public var flags: [String]
    /// The ATT MTU BlueZ reports for the characteristic (BlueZ 5.62+), when it does.
    public var mtu: Int?
    /// A program holds the notifications through an AcquireNotify socket (`NotifyAcquired`): BlueZ
    /// refuses every other subscription, and a StopNotify from anyone closes that socket.
    public var notifyAcquired: Bool

    init(path: DBusObjectPath, properties: [String: DBusValue]) {
        self.path = path
        self.uuid = properties["UUID"]?.string?.lowercased() ?? ""
        self.servicePath = properties["Service"]?.objectPath
        self.flags = properties["Flags"]?.strings ?? []
        self.mtu = properties["MTU"]?.int
        self.notifyAcquired = properties["NotifyAcquired"]?.bool ?? false
    }
}

/// A snapshot of BlueZ's objects (`GetManagedObjects`).
public struct BlueZObjects: Sendable {
    public var managed: DBusManagedObjects

    public init(_ managed: DBusManagedObjects) {
        self.managed = managed
    }

    public var adapters: [BlueZAdapterInfo] {
        managed.objects(with: BlueZ.adapterInterface).map { BlueZAdapterInfo(path: $0.path, properties: $0.properties) }
    }

    /// The devices an adapter knows, sorted by path.
    public func devices(on adapter: DBusObjectPath) -> [BlueZDeviceInfo] {
        managed.objects(with: BlueZ.deviceInterface)
            .map { BlueZDeviceInfo(path: $0.path, properties: $0.properties) }
            .filter { $0.adapterPath == adapter || $0.path.parent == adapter }
    }

    /// The SMP characteristics below a device, in the SMP service. Stale copies may survive a
    /// reconnection in some stacks, so there can be several; the most recently created (highest handle,
    /// so the last path) comes first.
    public func smpCharacteristics(of device: DBusObjectPath) -> [BlueZCharacteristicInfo] {
        let services = Set(
            managed.objects(with: BlueZ.gattServiceInterface)
                .filter { $0.path.isDescendant(of: device) && SMPGattUUID.matches($0.properties["UUID"]?.string ?? "", SMPGattUUID.service) }
                .map(\.path))
        return managed.objects(with: BlueZ.gattCharacteristicInterface)
            .filter { $0.path.isDescendant(of: device) }
            .map { BlueZCharacteristicInfo(path: $0.path, properties: $0.properties) }
            .filter { SMPGattUUID.matches($0.uuid, SMPGattUUID.characteristic) && ($0.servicePath.map(services.contains) ?? true) }
            .sorted { $0.path > $1.path }
    }

    /// The device's characteristics with `uuid` (lowercase, 128-bit form), in any service.
    public func characteristics(_ uuid: String, of device: DBusObjectPath) -> [BlueZCharacteristicInfo] {
        managed.objects(with: BlueZ.gattCharacteristicInterface)
            .filter { $0.path.isDescendant(of: device) }
            .map { BlueZCharacteristicInfo(path: $0.path, properties: $0.properties) }
            .filter { $0.uuid == uuid }
    }

    /// The UUIDs of the GATT services found on a device.
    public func serviceUUIDs(of device: DBusObjectPath) -> [String] {
        managed.objects(with: BlueZ.gattServiceInterface)
            .filter { $0.path.isDescendant(of: device) }
            .compactMap { $0.properties["UUID"]?.string?.lowercased() }
    }
}
