import Foundation
import McuManager
import McuMgrBLE
import McuMgrDBus
import TestSupport
import Testing

/// A scripted BlueZ (org.bluez on a private bus, served with McuMgrDBus) for what bluezoo cannot
/// show: a device that refuses connections, one that wants pairing.
final class FakeBlueZ: @unchecked Sendable {
    enum Behaviour {
        /// Connect fails with this BlueZ error.
        case refuseConnect(name: String, message: String)
        /// Connect works; the SMP characteristic refuses notifications with this error.
        case refuseNotify(name: String, message: String)
        /// As `refuseNotify`, but Connected and ServicesResolved change without a PropertiesChanged
        /// signal (bluetoothd 5.66's "already connected" race): only reading the properties shows it.
        case refuseNotifyWithoutSignals(name: String, message: String)
    }

    /// How `Device1.Pair` goes: the method it asks the registered agent for (the passkey it expects,
    /// or the one it shows), then Paired turns true; nil: Pair fails with NotSupported.
    enum Pairing {
        case passkeyEntry(expected: UInt32)
        case comparison(shown: UInt32)
        case justWorks
    }

    static let adapterPath: DBusObjectPath = "/org/bluez/hci0"
    static let address = "00:11:22:33:44:55"
    static var devicePath: DBusObjectPath { adapterPath.appending("dev_00_11_22_33_44_55") }

    let connection: DBusConnection
    let behaviour: Behaviour
    let pairing: Pairing?
    let connectCalls = LockedCounterBox()
    /// The agents registered (unique name, path, capability), and the default one.
    let agents = LockedValue<[(sender: String, path: DBusObjectPath, capability: String)]>([])
    let defaultAgent = LockedValue<DBusObjectPath?>(nil)
    let removedDevices = LockedValue<[DBusObjectPath]>([])
    /// The discovery calls on the adapter, in order: `SetDiscoveryFilter DuplicateData=true`, `StartDiscovery`, ...
    let discoveryCalls = LockedValue<[String]>([])
    /// With `connectsWhenTheScanRestarts`, the Connect call waiting for the scan to restart.
    private let pendingConnect = LockedValue<(call: DBusMethodCall, reply: DBusReply)?>(nil)
    private let connectsWhenTheScanRestarts: Bool

    private init(connection: DBusConnection, behaviour: Behaviour, pairing: Pairing?, connectsWhenTheScanRestarts: Bool) {
        self.connection = connection
        self.behaviour = behaviour
        self.pairing = pairing
        self.connectsWhenTheScanRestarts = connectsWhenTheScanRestarts
    }

    /// - Parameters:
    ///   - discovering: the adapter's `Discovering` (another program's discovery).
    ///   - connectsWhenTheScanRestarts: Connect waits, as it does on BlueZ while another program
    ///     discovers, until the scan restarts: until a client starts a discovery or changes its filter.
    static func start(
        address busAddress: String, behaviour: Behaviour, rssi: Int16 = -50, pairing: Pairing? = nil, paired: Bool = false,
        discovering: Bool = false, connectsWhenTheScanRestarts: Bool = false
    ) async throws -> FakeBlueZ {
        let connection = try await DBusConnection.connect(address: busAddress)
        let bluez = FakeBlueZ(
            connection: connection, behaviour: behaviour, pairing: pairing, connectsWhenTheScanRestarts: connectsWhenTheScanRestarts)
        try connection.exportObjectManager(at: .root)
        try connection.export(
            ScriptedObject([BlueZ.agentManagerInterface: [:]]) { [weak bluez] call in
                guard let bluez else { return [] }
                return try bluez.agentManagerCall(call)
            },
            at: BlueZ.agentManagerPath)
        try connection.export(
            ScriptedObject(
                [
                    BlueZ.adapterInterface: [
                        "Address": .string("00:00:5E:00:53:00"), "Powered": .boolean(true), "Alias": .string("fake"),
                        "Discovering": .boolean(discovering),
                    ]
                ]) { [weak bluez] call in
                    guard let bluez else { return [] }
                    if ["SetDiscoveryFilter", "StartDiscovery", "StopDiscovery"].contains(call.member) {
                        bluez.discovery(call)
                        return []
                    }
                    guard call.member == "RemoveDevice", let path = call.arguments.first?.objectPath else { return [] }
                    guard path == devicePath else { throw DBusError(name: "org.bluez.Error.DoesNotExist", message: "Does Not Exist") }
                    bluez.removedDevices.withValue { $0.append(path) }
                    bluez.device?.set(BlueZ.deviceInterface, ["Paired": .boolean(false)])
                    return []
                },
            at: adapterPath)
        let device = ScriptedObject(
            [
                BlueZ.deviceInterface: [
                    "Address": .string(address), "Name": .string("locked"), "Connected": .boolean(false),
                    "ServicesResolved": .boolean(false), "UUIDs": .strings([SMPGattUUID.service]),
                    "Adapter": .objectPath(adapterPath), "RSSI": .int16(rssi), "Paired": .boolean(paired),
                ]
            ]) { [weak bluez] call in
                guard let bluez else { return [] }
                return try bluez.deviceCall(call)
            } deferred: { [weak bluez] call, reply in
                guard let bluez else { return false }
                if call.member == "Connect", bluez.connectsWhenTheScanRestarts {
                    bluez.pendingConnect.withValue { $0 = (call, reply) }
                    return true
                }
                guard call.member == "Pair" else { return false }
                Task { await bluez.pair(reply) }
                return true
            }
        bluez.device = device
        try connection.export(device, at: devicePath)
        guard try await connection.requestName(BlueZ.service) else { throw DBusError(name: DBusError.failed, message: "org.bluez is taken") }
        return bluez
    }

    private var device: ScriptedObject?

    private func agentManagerCall(_ call: DBusMethodCall) throws -> [DBusValue] {
        switch call.member {
        case "RegisterAgent":
            guard let path = call.arguments.first?.objectPath, let capability = call.arguments.last?.string else {
                throw DBusError(name: "org.bluez.Error.InvalidArguments", message: "Invalid arguments")
            }
            agents.withValue { $0.append((call.sender, path, capability)) }
        case "RequestDefaultAgent":
            defaultAgent.withValue { $0 = call.arguments.first?.objectPath }
        case "UnregisterAgent":
            let path = call.arguments.first?.objectPath
            agents.withValue { $0.removeAll { $0.path == path && $0.sender == call.sender } }
            defaultAgent.withValue { if $0 == path { $0 = nil } }
        default:
            throw DBusError.unknownMethod(call)
        }
        return []
    }

    /// `Device1.Pair`: asks the agent that the last registration named, as bluetoothd asks the
    /// caller's agent, and answers as bluetoothd does.
    private func pair(_ reply: DBusReply) async {
        guard let pairing else {
            return reply.fail(DBusError(name: "org.bluez.Error.NotSupported", message: "Operation is not supported"))
        }
        if device?.interfaceProperties[BlueZ.deviceInterface]?["Paired"]?.bool == true {
            return reply.fail(DBusError(name: "org.bluez.Error.AlreadyExists", message: "Already Exists"))
        }
        guard let agent = agents.value.last else {
            return reply.fail(DBusError(name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed"))
        }
        func ask(_ member: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
            try await connection.call(
                destination: agent.sender, path: agent.path, interface: BlueZ.agentInterface, member: member,
                [.objectPath(Self.devicePath)] + arguments, timeout: .seconds(30))
        }
        do {
            switch pairing {
            case .passkeyEntry(let expected):
                let answer = try await ask("RequestPasskey", [])
                guard answer.first?.int == Int(expected) else {
                    return reply.fail(DBusError(name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed"))
                }
            case .comparison(let shown):
                _ = try await ask("RequestConfirmation", [.uint32(shown)])
            case .justWorks:
                break
            }
        } catch let error as DBusError where error.name == "org.bluez.Error.Rejected" {
            return reply.fail(DBusError(name: "org.bluez.Error.AuthenticationRejected", message: "Authentication Rejected"))
        } catch {
            return reply.fail(DBusError(name: "org.bluez.Error.AuthenticationFailed", message: "Authentication Failed"))
        }
        device?.set(BlueZ.deviceInterface, ["Paired": .boolean(true)])
        reply.succeed()
    }

    /// A discovery call on the adapter: recorded; a filter change or a start restarts the scan, which
    /// lets a waiting Connect go on.
    private func discovery(_ call: DBusMethodCall) {
        var entry = call.member
        if call.member == "SetDiscoveryFilter", let duplicates = call.arguments.first?.stringKeyedDictionary?["DuplicateData"]?.bool {
            entry += " DuplicateData=\(duplicates)"
        }
        discoveryCalls.withValue { $0.append(entry) }
        guard call.member != "StopDiscovery", let (connect, reply) = pendingConnect.withValue({ pending in defer { pending = nil }; return pending })
        else { return }
        reply.answer { try deviceCall(connect) }
    }

    /// Whether the device is connected now (a client that connected and then failed must disconnect).
    var isConnected: Bool { device?.interfaceProperties[BlueZ.deviceInterface]?["Connected"]?.bool ?? false }

    private func deviceCall(_ call: DBusMethodCall) throws -> [DBusValue] {
        switch call.member {
        case "Connect":
            _ = connectCalls.increment()
            switch behaviour {
            case .refuseConnect(let name, let message):
                throw DBusError(name: name, message: message)
            case .refuseNotify(let name, let message), .refuseNotifyWithoutSignals(let name, let message):
                let service = Self.devicePath.appending("service0001")
                try connection.export(
                    ScriptedObject([BlueZ.gattServiceInterface: ["UUID": .string(SMPGattUUID.service), "Primary": .boolean(true)]]) { _ in [] },
                    at: service)
                try connection.export(
                    ScriptedObject([
                        BlueZ.gattCharacteristicInterface: [
                            "UUID": .string(SMPGattUUID.characteristic), "Service": .objectPath(service),
                            "Flags": .strings(["write-without-response", "notify"]),
                        ]
                    ]) { call in
                        throw DBusError(name: name, message: "\(call.member): \(message)")
                    },
                    at: service.appending("char0002"))
                device?.set(BlueZ.deviceInterface, ["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
                if case .refuseNotifyWithoutSignals = behaviour { return [] }
                try connection.emitPropertiesChanged(
                    path: Self.devicePath, interface: BlueZ.deviceInterface,
                    changed: ["Connected": .boolean(true), "ServicesResolved": .boolean(true)])
                return []
            }
        case "Disconnect":
            device?.set(BlueZ.deviceInterface, ["Connected": .boolean(false), "ServicesResolved": .boolean(false)])
            return []
        default:
            throw DBusError.unknownMethod(call)
        }
    }
}

/// An exported object with settable properties and a scripted method handler; `deferred` may take a
/// call to answer later (returning true).
final class ScriptedObject: DBusDeferringObject, @unchecked Sendable {
    private let lock = NSLock()
    private var properties: [String: [String: DBusValue]]
    private let handler: @Sendable (DBusMethodCall) throws -> [DBusValue]
    private let deferred: @Sendable (DBusMethodCall, DBusReply) -> Bool

    init(
        _ properties: [String: [String: DBusValue]], handler: @escaping @Sendable (DBusMethodCall) throws -> [DBusValue],
        deferred: @escaping @Sendable (DBusMethodCall, DBusReply) -> Bool = { _, _ in false }
    ) {
        self.properties = properties
        self.handler = handler
        self.deferred = deferred
    }

    func handle(_ call: DBusMethodCall, reply: DBusReply) {
        if deferred(call, reply) { return }
        reply.answer { try handler(call) }
    }

    var interfaceProperties: [String: [String: DBusValue]] { lock.withLock { properties } }

    func set(_ interface: String, _ changed: [String: DBusValue]) {
        lock.withLock { properties[interface, default: [:]].merge(changed) { _, new in new } }
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] { try handler(call) }
}

final class LockedCounterBox: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() -> Int { lock.withLock { count += 1; return count } }
    var value: Int { lock.withLock { count } }
}

extension DBusReply {
    /// Answers with what `body` returns, or with the error it throws (one that is not a D-Bus error as
    /// `Failed`).
    func answer(_ body: () throws -> [DBusValue]) {
        do {
            succeed(try body())
        } catch let error as DBusError {
            fail(error)
        } catch {
            fail(DBusError(name: DBusError.failed, message: "\(error)"))
        }
    }
}

@Suite("BLE errors against a scripted BlueZ", .enabled(if: BLERig.isAvailable, BLERig.skipReason), .serialized)
struct FakeBlueZTests {
    /// Opens a transport over the bus at `busAddress` to the fake device and expects it to fail with
    /// `fragments` (by default, the command that pairs the device).
    private func expectOpenFails(
        on busAddress: String, timeout: Int = 60, containing fragments: [String] = ["smp ble pair \(FakeBlueZ.address)"]
    ) async throws {
        var configuration = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:\(FakeBlueZ.address)?timeout=\(timeout)"))
        configuration.busAddress = busAddress
        await expectMcuMgrError(.transport, containing: fragments) {
            try await McuMgrBleTransport(configuration: configuration).open { _ in }
        }
    }

    @Test func aDeviceThatRefusesConnectionsIsReportedAfterRetrying() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseConnect(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"))
            defer { bluez.connection.close() }
            try await expectOpenFails(on: rig.address, timeout: 1, containing: ["cannot connect to \"locked\"", "le-connection-abort-by-local", "not be connectable"])
            // A device that just reset refuses for a while: the transport keeps trying within the timeout.
            #expect(bluez.connectCalls.value >= 2)
        }
    }

    @Test func aDeviceThatWantsPairingSaysHowToPairAtOnce() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseNotify(name: "org.bluez.Error.NotAuthorized", message: "Insufficient Authentication"))
            defer { bluez.connection.close() }
            let started = ContinuousClock.now
            try await expectOpenFails(on: rig.address, timeout: 20)
            // One connect and no retries: well inside the 20 s the URI allows (the bound is loose, as a
            // loaded CI machine takes seconds to start the D-Bus peers).
            #expect(bluez.connectCalls.value == 1, "pairing errors are not retried")
            #expect(ContinuousClock.now - started < .seconds(15), "a pairing error ends the wait at once")
        }
    }

    @Test func aConnectionBlueZNeverSignalsIsSeenInItsProperties() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address,
                behaviour: .refuseNotifyWithoutSignals(name: "org.bluez.Error.NotAuthorized", message: "Insufficient Authentication"))
            defer { bluez.connection.close() }
            // Without the properties read after Connect, the transport waited the whole connect timeout
            // for a Connected signal, called the device disconnected, and on the next attempt took the
            // link its own Connect had made for someone else's and left it up. Reading them, it reaches
            // the characteristic on its first connection, and closes the link it made when it fails.
            try await expectOpenFails(on: rig.address)
            #expect(bluez.connectCalls.value == 1)
            #expect(!bluez.isConnected, "the connection the transport made is closed")
        }
    }

    /// While another program discovers, BlueZ 5.66 connects only when that discovery's scan restarts
    /// (it reports each advertiser once per scan): the transport restarts it with a discovery of its own
    /// whose filter changes the merged one, and stops its discovery once Connect has answered.
    @Test func aConnectionWaitingForAnotherProgramsScanRestartsIt() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseNotify(name: "org.bluez.Error.NotAuthorized", message: "Insufficient Authentication"),
                discovering: true, connectsWhenTheScanRestarts: true)
            defer { bluez.connection.close() }
            // Connect answers only after the restart; without it the call would wait out its timeout.
            try await expectOpenFails(on: rig.address)
            #expect(bluez.connectCalls.value == 1)
            let calls = bluez.discoveryCalls.value
            #expect(calls.prefix(2) == ["SetDiscoveryFilter DuplicateData=true", "StartDiscovery"], "\(calls)")
            #expect(calls.last == "StopDiscovery", "the transport's own discovery ends with the Connect call: \(calls)")
        }
    }

    /// With no discovery running, Connect is left alone: no discovery of the transport's own.
    @Test func aConnectionWithNoDiscoveryRunningStartsNone() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseNotify(name: "org.bluez.Error.NotAuthorized", message: "Insufficient Authentication"))
            defer { bluez.connection.close() }
            try await expectOpenFails(on: rig.address)
            #expect(bluez.discoveryCalls.value.isEmpty, "\(bluez.discoveryCalls.value)")
        }
    }

    @Test func aSignalStrengthTheControllerCouldNotMeasureIsUnknown() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseConnect(name: "org.bluez.Error.Failed", message: "unused"), rssi: 127)
            defer { bluez.connection.close() }
            let (_, devices) = try await BLEScanner.discover(timeout: .milliseconds(300), busAddress: rig.address)
            let device = devices.first { $0.address?.rawValue == FakeBlueZ.address }
            #expect(device != nil, "a device BlueZ reports an RSSI for was seen, even an unmeasured one")
            #expect(device?.rssi == nil)
            #expect(device?.discovered == true)
            #expect(device?.label.contains("127") == false)
        }
    }
}
