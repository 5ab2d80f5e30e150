#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrCore
import McuMgrDBus

/// An SMP server as a BLE peripheral through BlueZ: registers a GATT application (its own
/// ObjectManager, the SMP service and characteristic with write-without-response and notify) and an
/// LE advertisement with the SMP service UUID and a name on one adapter, reassembles the requests
/// written to the characteristic, and notifies the answers in ATT-payload-sized pieces.
///
/// Writes arrive as `WriteValue` calls or, when BlueZ acquires them, on a socket; answers leave on the
/// socket BlueZ acquired for notifications, else as PropertiesChanged signals of `Value` while a
/// central has notifications on. `suspend()` drops every connection and stops advertising (a device
/// reset); `resume()` advertises again.
public final class SMPGattPeripheral: @unchecked Sendable {
    /// Peripheral settings.
    public struct Configuration: Sendable {
        /// What the SMP characteristic asks of the link, as Zephyr's `CONFIG_MCUMGR_TRANSPORT_BT_PERM_*`.
        public enum Security: String, Sendable, CaseIterable {
            /// `PERM_RW`: anyone may write and subscribe.
            case open
            /// `PERM_RW_ENCRYPT`: an encrypted link (any pairing).
            case encrypt
            /// `PERM_RW_AUTHEN`: an encrypted link from authenticated (MITM-protected) pairing.
            case authenticated

            /// BlueZ's characteristic flags for it.
            var flags: [String] {
                switch self {
                case .open: ["write-without-response", "notify"]
                case .encrypt: ["write-without-response", "notify", "encrypt-write", "encrypt-notify"]
                case .authenticated: ["write-without-response", "notify", "encrypt-authenticated-write", "encrypt-authenticated-notify"]
                }
            }
        }

        /// The adapter to serve on (`hci1`).
        public var adapter: String
        /// The advertised name.
        public var localName: String
        /// The ATT MTU to report and to split notifications by (payload = MTU − 3).
        public var attMTU: Int
        /// Offer AcquireWrite / AcquireNotify (BlueZ then passes writes and notifications through
        /// sockets); otherwise everything goes through D-Bus calls and signals.
        public var acquire: Bool
        /// The D-Bus address of the bus BlueZ is on; nil = the system bus.
        public var busAddress: String?
        /// Where the application's objects live.
        public var applicationPath: DBusObjectPath
        /// Delay before each answer is notified (emulates a slow device or link).
        public var responseDelay: Duration
        /// Whether writes are joined into requests as Zephyr's `CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY`
        /// does; without it every write is taken as whole requests (`SMPWriteAssembler`).
        public var reassembly: Bool
        /// The SMP buffer (header included): a longer request is dropped without an answer.
        public var bufferSize: Int
        /// What the characteristic asks of the link.
        public var security: Security
        /// The longest notification value the peripheral sends; nil: as much as the link carries
        /// (ATT MTU − 3, as Zephyr's smp_bt).
        public var notificationSize: Int?
        /// Answer pairing as a device with these I/O capabilities (a default BlueZ agent of the
        /// peripheral's: comparisons confirmed, Just Works accepted, passkeys to show reported through
        /// `onPairing`); nil registers no agent (BlueZ then answers with the agent it has, if any).
        public var pairing: BLEIOCapability?
        /// The passkey the peripheral types when pairing asks it for one (keyboard capabilities).
        public var passkey: UInt32?
        /// How the SMP service is laid out.
        public var layout: Layout

        /// The SMP service's characteristics, as firmware builds lay them out.
        public enum Layout: String, Sendable, CaseIterable {
            /// The SMP characteristic alone, at handles BlueZ picks (Zephyr's smp_bt).
            case standard
            /// The SMP characteristic, then a vendor characteristic, at fixed handles.
            case smpFirst = "smp-first"
            /// The vendor characteristic, then the SMP one, at the same fixed handles: the service keeps
            /// its handles and UUID, as after an upgrade that moved the SMP characteristic, and a central
            /// that kept its copy of `smpFirst`'s table would write to the vendor characteristic.
            case smpSecond = "smp-second"

            /// The service's first handle in the fixed layouts: above what bluetoothd and the
            /// applications whose handles it picks use on a test rig.
            static let serviceHandle: UInt16 = 0x0200

            /// The fixed handles (the service's, and each characteristic's value: its declaration
            /// comes one before, its notification descriptor one after); nil: BlueZ picks.
            var handles: (service: UInt16, smp: UInt16, vendor: UInt16)? {
                let first = Self.serviceHandle + 2, second = Self.serviceHandle + 5
                switch self {
                case .standard: return nil
                case .smpFirst: return (Self.serviceHandle, first, second)
                case .smpSecond: return (Self.serviceHandle, second, first)
                }
            }
        }

        public init(
            adapter: String, localName: String = "smp-sim", attMTU: Int = 247, acquire: Bool = true,
            busAddress: String? = nil, applicationPath: DBusObjectPath = "/org/mcumgr/peripheral",
            responseDelay: Duration = .zero, reassembly: Bool = true, bufferSize: Int = BLEFramingCodec.defaultMaximumPacketSize,
            security: Security = .open, notificationSize: Int? = nil, pairing: BLEIOCapability? = nil, passkey: UInt32? = nil,
            layout: Layout = .standard
        ) {
            self.layout = layout
            self.pairing = pairing
            self.passkey = passkey
            self.security = security
            self.notificationSize = notificationSize
            self.responseDelay = responseDelay
            self.reassembly = reassembly
            self.bufferSize = bufferSize
            self.adapter = adapter
            self.localName = localName
            self.attMTU = attMTU
            self.acquire = acquire
            self.busAddress = busAddress
            self.applicationPath = applicationPath
        }
    }

    /// Answers one whole SMP request with zero or more whole response packets.
    public typealias RequestHandler = @Sendable ([UInt8]) -> [[UInt8]]

    public let configuration: Configuration
    private let handler: RequestHandler
    private let onPairing: (@Sendable (String) -> Void)?
    private let logger: Logger
    private let lock = NIOLock()
    private var client: BlueZClient?
    private var adapterInfo: BlueZAdapterInfo?
    private var characteristic: SMPCharacteristicObject?
    private var advertising = false
    private let advertisement: AdvertisementObject

    public init(
        configuration: Configuration,
        logger: Logger = Logger(label: "mcumgr.ble.peripheral", factory: { _ in SwiftLogNoOpLogHandler() }),
        onPairing: (@Sendable (String) -> Void)? = nil,
        handler: @escaping RequestHandler
    ) {
        precondition((23...517).contains(configuration.attMTU), "the ATT MTU is 23...517")
        self.configuration = configuration
        self.onPairing = onPairing
        self.logger = logger
        self.handler = handler
        self.advertisement = AdvertisementObject(localName: configuration.localName)
    }

    /// The name advertised now (the configured one until `resume(localName:)` changes it).
    public var localName: String { advertisement.localName }

    private var servicePath: DBusObjectPath { configuration.applicationPath.appending("service0") }
    /// The characteristics' paths in the order of their handles: bluetoothd adds an application's
    /// characteristics in the order its objects come (sorted by path here), and a service whose
    /// characteristics were added out of handle order is discovered wrong (the last one's descriptor
    /// is missed).
    private var characteristicPath: DBusObjectPath { servicePath.appending(configuration.layout == .smpSecond ? "char1" : "char0") }
    private var vendorCharacteristicPath: DBusObjectPath { servicePath.appending(configuration.layout == .smpSecond ? "char0" : "char1") }
    private var advertisementPath: DBusObjectPath { configuration.applicationPath.appending("advertisement0") }

    /// Registers the application and the advertisement.
    /// - Returns: the adapter served on (its address is the peripheral's).
    /// - Throws: `McuMgrError` of kind `.transport` (no BlueZ, no such adapter, adapter off, refused).
    @discardableResult
    public func start() async throws -> BlueZAdapterInfo {
        let client = try await BlueZClient.connect(busAddress: configuration.busAddress)
        do {
            let objects = try await client.objects()
            let adapter = try client.adapter(named: configuration.adapter, in: objects)
            let interfaces = objects.managed.objects[adapter.path] ?? [:]
            guard interfaces[BlueZ.gattManagerInterface] != nil, interfaces[BlueZ.advertisingManagerInterface] != nil else {
                throw McuMgrError(
                    .transport,
                    "adapter \(adapter.label) offers no GATT server or LE advertising (GattManager1 / LEAdvertisingManager1); it needs BlueZ 5.50 or newer and an LE-capable controller"
                )
            }
            let connection = client.connection
            let handles = configuration.layout.handles
            let characteristic = SMPCharacteristicObject(
                connection: connection, path: characteristicPath, servicePath: servicePath,
                attMTU: configuration.attMTU, acquire: configuration.acquire, responseDelay: configuration.responseDelay,
                flags: configuration.security.flags, notificationSize: configuration.notificationSize, assembler: SMPWriteAssembler(reassembly: configuration.reassembly, bufferSize: configuration.bufferSize),
                handle: handles?.smp, logger: logger, handler: handler)
            try connection.exportObjectManager(at: configuration.applicationPath)
            try connection.export(SMPServiceObject(handle: handles?.service), at: servicePath)
            try connection.export(characteristic, at: characteristicPath)
            if let vendor = handles?.vendor {
                try connection.export(
                    VendorCharacteristicObject(servicePath: servicePath, handle: vendor, logger: logger), at: vendorCharacteristicPath)
            }
            try connection.export(advertisement, at: advertisementPath)
            do {
                _ = try await connection.call(
                    destination: BlueZ.service, path: adapter.path, interface: BlueZ.gattManagerInterface,
                    member: "RegisterApplication", [.objectPath(configuration.applicationPath), .properties([:])])
            } catch let error as DBusError {
                throw BlueZClient.map(error, "registering the SMP GATT application on \(adapter.label)")
            }
            if let capability = configuration.pairing {
                _ = try await BlueZAgent.register(
                    on: connection, capability: capability,
                    delegate: PeripheralPairing(passkey: configuration.passkey, report: onPairing ?? { _ in }),
                    path: configuration.applicationPath.appending("agent"), asDefault: true, adapter: adapter.path)
            }
            lock.withLock {
                self.client = client
                self.adapterInfo = adapter
                self.characteristic = characteristic
            }
            try await advertise()
            return adapter
        } catch {
            client.connection.close()
            throw error
        }
    }

    /// Unregisters everything and closes the bus connection.
    public func stop() async {
        let (client, characteristic, adapter) = lock.withLock {
            defer {
                self.client = nil
                self.characteristic = nil
            }
            return (self.client, self.characteristic, self.adapterInfo)
        }
        guard let client, let adapter else { return }
        characteristic?.dropConnections()
        _ = try? await client.connection.call(
            destination: BlueZ.service, path: adapter.path, interface: BlueZ.advertisingManagerInterface,
            member: "UnregisterAdvertisement", [.objectPath(advertisementPath)], timeout: .seconds(3))
        _ = try? await client.connection.call(
            destination: BlueZ.service, path: adapter.path, interface: BlueZ.gattManagerInterface,
            member: "UnregisterApplication", [.objectPath(configuration.applicationPath)], timeout: .seconds(3))
        client.connection.close()
    }

    /// Models a reset: stops advertising, closes the sockets BlueZ acquired and disconnects every
    /// central connected on the adapter.
    public func suspend() async {
        let (client, characteristic, adapter, wasAdvertising) = lock.withLock {
            defer { advertising = false }
            return (self.client, self.characteristic, self.adapterInfo, advertising)
        }
        guard let client, let adapter else { return }
        // The link goes first (as when a device's radio stops), then the advertisement.
        characteristic?.dropConnections(suspend: true)
        if wasAdvertising {
            _ = try? await client.connection.call(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.advertisingManagerInterface,
                member: "UnregisterAdvertisement", [.objectPath(advertisementPath)], timeout: .seconds(3))
        }
        if let objects = try? await client.objects() {
            for central in objects.devices(on: adapter.path) where central.connected {
                await client.disconnect(central.path)
                // A BlueZ stand-in that hosts the central's adapter on the same bus (bluezoo in the
                // tests) does not pass a peripheral's disconnect on to the central's side: end that
                // side too, as a real link loss would. With real BlueZ the central's adapter is on
                // another machine and there is nothing here to match.
                guard let centralAddress = central.address,
                    let centralAdapter = objects.adapters.first(where: { $0.address.flatMap(BluetoothAddress.init) == centralAddress }),
                    let ourAddress = adapter.address.flatMap(BluetoothAddress.init)
                else { continue }
                let mirror = centralAdapter.path.appending(ourAddress.pathElement)
                if objects.devices(on: centralAdapter.path).contains(where: { $0.path == mirror && $0.connected }) {
                    await client.disconnect(mirror)
                }
            }
        }
    }

    /// Accepts connections and advertises again after `suspend()`, under `localName` when given (a device
    /// that comes back as another image: smp-sim's firmware loader; BlueZ reads the advertisement's
    /// properties when it is registered, so the new name goes out with it).
    public func resume(localName: String? = nil) async throws {
        if let localName { advertisement.localName = localName }
        lock.withLock { characteristic }?.resume()
        try await advertise()
    }

    private func advertise() async throws {
        let (client, adapter, already) = lock.withLock { (self.client, self.adapterInfo, advertising) }
        guard let client, let adapter, !already else { return }
        do {
            _ = try await client.connection.call(
                destination: BlueZ.service, path: adapter.path, interface: BlueZ.advertisingManagerInterface,
                member: "RegisterAdvertisement", [.objectPath(advertisementPath), .properties([:])])
        } catch let error as DBusError {
            throw BlueZClient.map(error, "registering the SMP advertisement on \(adapter.label)")
        }
        lock.withLock { advertising = true }
    }
}

/// The SMP GATT service object.
final class SMPServiceObject: DBusExportedObject {
    /// Its first handle, when fixed (`Configuration.Layout`).
    let handle: UInt16?

    init(handle: UInt16? = nil) {
        self.handle = handle
    }

    var interfaceProperties: [String: [String: DBusValue]] {
        var properties: [String: DBusValue] = [
            "UUID": .string(SMPGattUUID.service), "Primary": .boolean(true), "Includes": .objectPaths([]),
        ]
        if let handle { properties["Handle"] = .uint16(handle) }
        return [BlueZ.gattServiceInterface: properties]
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] { throw DBusError.unknownMethod(call) }
}

/// A vendor characteristic beside SMP's in the SMP service (`Configuration.Layout`), with the same
/// properties: it takes writes and subscriptions, and never answers.
final class VendorCharacteristicObject: DBusExportedObject {
    static let uuid = "7c4e0f52-95b1-4d0e-8a3b-2f6d1c9e5a70"
    private let servicePath: DBusObjectPath
    private let handle: UInt16
    private let logger: Logger

    init(servicePath: DBusObjectPath, handle: UInt16, logger: Logger) {
        self.servicePath = servicePath
        self.handle = handle
        self.logger = logger
    }

    var interfaceProperties: [String: [String: DBusValue]] {
        [
            BlueZ.gattCharacteristicInterface: [
                "UUID": .string(Self.uuid), "Service": .objectPath(servicePath), "Handle": .uint16(handle),
                "Flags": .strings(["write-without-response", "notify"]), "Value": .bytes([]),
            ]
        ]
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] {
        switch call.member {
        case "WriteValue":
            logger.debug("write of \(call.arguments.first?.bytes?.count ?? 0) B to the vendor characteristic: not SMP, ignored")
            return []
        case "ReadValue": return [.bytes([])]
        case "StartNotify", "StopNotify": return []
        default: throw DBusError.unknownMethod(call)
        }
    }
}

/// The LE advertisement: connectable, discoverable, the SMP service UUID and a name.
final class AdvertisementObject: DBusExportedObject, @unchecked Sendable {
    private let lock = NIOLock()
    private var name: String

    init(localName: String) {
        self.name = localName
    }

    var localName: String {
        get { lock.withLock { name } }
        set { lock.withLock { name = newValue } }
    }

    var interfaceProperties: [String: [String: DBusValue]] {
        [
            BlueZ.advertisementInterface: [
                "Type": .string("peripheral"), "ServiceUUIDs": .strings([SMPGattUUID.service]),
                "LocalName": .string(localName), "Discoverable": .boolean(true), "Includes": .strings(["tx-power"]),
            ]
        ]
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] {
        guard call.member == "Release" else { throw DBusError.unknownMethod(call) }
        return []
    }
}

/// The SMP characteristic: takes writes as Zephyr does (`SMPWriteAssembler`), answers through the
/// handler, notifies the answers in pieces of the link's ATT payload (at most this device's MTU − 3).
final class SMPCharacteristicObject: DBusExportedObject, @unchecked Sendable {
    private let connection: DBusConnection
    private let path: DBusObjectPath
    private let servicePath: DBusObjectPath
    private let attMTU: Int
    private let acquire: Bool
    private let responseDelay: Duration
    private let flags: [String]
    private let notificationSize: Int?
    private let delayQueue = DispatchQueue(label: "smp peripheral answers")
    private let logger: Logger
    private let handler: SMPGattPeripheral.RequestHandler
    private let assembler: SMPWriteAssembler
    /// The value's handle, when fixed (`SMPGattPeripheral.Configuration.Layout`).
    private let valueHandle: UInt16?

    private let lock = NIOLock()
    private var value: [UInt8] = []
    private var notifying = false
    /// Requests in progress per central for WriteValue (keyed by the `device` option).
    private var writeAssemblers: [String: SMPWriteAssembler] = [:]
    /// The ATT MTU BlueZ last reported for a connection (the `mtu` option of its calls); nil before.
    private var linkMTU: Int?
    private var writeSockets: [PacketSocketLink] = []
    private var notifySocket: PacketSocketLink?
    /// While the device "reboots", the characteristic refuses everything as if the link were down.
    private var suspended = false

    init(
        connection: DBusConnection, path: DBusObjectPath, servicePath: DBusObjectPath, attMTU: Int, acquire: Bool,
        responseDelay: Duration, flags: [String] = SMPGattPeripheral.Configuration.Security.open.flags, notificationSize: Int? = nil,
        assembler: SMPWriteAssembler, handle: UInt16? = nil, logger: Logger, handler: @escaping SMPGattPeripheral.RequestHandler
    ) {
        self.valueHandle = handle
        self.flags = flags
        self.notificationSize = notificationSize
        self.responseDelay = responseDelay
        self.assembler = assembler
        self.connection = connection
        self.path = path
        self.servicePath = servicePath
        self.attMTU = attMTU
        self.acquire = acquire
        self.logger = logger
        self.handler = handler
    }

    var interfaceProperties: [String: [String: DBusValue]] {
        lock.lock()
        defer { lock.unlock() }
        var properties: [String: DBusValue] = [
            "UUID": .string(SMPGattUUID.characteristic), "Service": .objectPath(servicePath),
            "Flags": .strings(flags), "Value": .bytes(value),
            "Notifying": .boolean(notifying || notifySocket != nil), "MTU": .uint16(UInt16(attMTU)),
        ]
        if let valueHandle { properties["Handle"] = .uint16(valueHandle) }
        // No WriteAcquired / NotifyAcquired: for a server their presence makes BlueZ move writes and
        // notifications to sockets it acquires per connection, and a stand-in that relays those
        // sockets (bluezoo) loses track of them across connections. Without them writes arrive as
        // WriteValue calls and notifications leave as PropertiesChanged, in order, for every central;
        // AcquireWrite / AcquireNotify are still answered for centrals that a stand-in lets ask
        // directly (then the socket goes straight to the central).
        return [BlueZ.gattCharacteristicInterface: properties]
    }

    /// Notification size: the link's ATT payload, at most this device's (as Zephyr's
    /// `bt_gatt_get_mtu(conn) - 3`). Through real BlueZ (which reports the link's MTU) two bytes less:
    /// bluetoothd 5.66 sends a peripheral's notifications as Multiple Handle Value Notifications to a
    /// central that takes them (BlueZ's does), whose 4-byte handle and length leave MTU − 5 bytes for
    /// the value, and cuts a longer value short (seen in an HCI trace at ATT MTU 247: 243 bytes sent,
    /// 242 arrived).
    private var payloadSize: Int {
        let link = lock.withLock { linkMTU.map { min(attMTU - 3, $0 - 5) } ?? (attMTU - 3) }
        return notificationSize.map { max(1, min($0, link)) } ?? link
    }

    /// Keeps the link MTU that BlueZ passes in a call's options.
    private func note(_ options: [String: DBusValue]) {
        guard let mtu = options["mtu"]?.int, (23...517).contains(mtu) else { return }
        lock.withLock { linkMTU = mtu }
    }

    /// Announces Notifying / NotifyAcquired / WriteAcquired (BlueZ and its stand-ins cache them).
    private func emitState() {
        let changed = lock.withLock { () -> [String: DBusValue] in
            ["Notifying": .boolean(notifying || notifySocket != nil)]
        }
        try? connection.emitPropertiesChanged(path: path, interface: BlueZ.gattCharacteristicInterface, changed: changed)
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] {
        if lock.withLock({ suspended }), ["WriteValue", "StartNotify", "AcquireWrite", "AcquireNotify"].contains(call.member) {
            throw DBusError(name: "org.bluez.Error.NotConnected", message: "the device is not connected (it is rebooting)")
        }
        switch call.member {
        case "WriteValue":
            try call.expectSignature("aya{sv}")
            let bytes = call.arguments[0].bytes ?? []
            let options = call.arguments[1].stringKeyedDictionary ?? [:]
            let central = options["device"]?.objectPath?.rawValue ?? options["device"]?.string ?? call.sender
            note(options)
            logger.debug("write of \(bytes.count) B from \(central) (link MTU \(options["mtu"]?.int.map(String.init) ?? "not given")): \(bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: " "))")
            let outcomes = lock.withLock { () -> [SMPWriteAssembler.Outcome] in
                var assembler = writeAssemblers[central] ?? self.assembler
                let outcomes = assembler.take(bytes)
                writeAssemblers[central] = assembler
                return outcomes
            }
            process(outcomes)
            return []
        case "ReadValue":
            return [.bytes(lock.withLock { value })]
        case "StartNotify":
            let changed = lock.withLock { () -> Bool in
                // Zephyr drops a request in progress when a central (un)subscribes.
                defer {
                    notifying = true
                    writeAssemblers = [:]
                }
                return !notifying
            }
            if changed { emitState() }
            return []
        case "StopNotify":
            let socket = lock.withLock { () -> PacketSocketLink? in
                defer {
                    notifying = false
                    notifySocket = nil
                    writeAssemblers = [:]
                }
                return notifySocket
            }
            socket?.close()
            emitState()
            return []
        case "Confirm":
            // BlueZ confirms indications; notifications need nothing.
            return []
        case "AcquireWrite" where acquire:
            note(call.arguments.first?.stringKeyedDictionary ?? [:])
            let (ours, theirs) = try socketPair()
            let assembler = LockedAssembler(self.assembler)
            let socket: PacketSocketLink
            do {
                socket = try PacketSocketLink(
                    readFD: ours, writeFD: nil, receiveSize: 65536,
                    onPacket: { [weak self] bytes in
                        self?.logger.debug("write of \(bytes.count) B on an acquired socket: \(bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: " "))")
                        let outcomes = assembler.take(bytes)
                        self?.process(outcomes)
                    },
                    onClose: { [weak self] _ in self?.socketClosed() })
            } catch {
                SystemCall.close(ours)
                SystemCall.close(theirs)
                throw DBusError(name: "org.bluez.Error.Failed", message: "\(error)")
            }
            lock.withLock { writeSockets.append(socket) }
            emitState()
            return [.unixFD(DBusUnixFD(owning: theirs)), .uint16(UInt16(attMTU))]
        case "AcquireNotify" where acquire:
            note(call.arguments.first?.stringKeyedDictionary ?? [:])
            let (ours, theirs) = try socketPair()
            let socket: PacketSocketLink
            do {
                socket = try PacketSocketLink(
                    readFD: nil, writeFD: ours, onPacket: { _ in }, onClose: { [weak self] _ in self?.socketClosed() })
            } catch {
                SystemCall.close(ours)
                SystemCall.close(theirs)
                throw DBusError(name: "org.bluez.Error.Failed", message: "\(error)")
            }
            let previous = lock.withLock { () -> PacketSocketLink? in
                defer { notifySocket = socket }
                return notifySocket
            }
            previous?.close()
            emitState()
            return [.unixFD(DBusUnixFD(owning: theirs)), .uint16(UInt16(attMTU))]
        default:
            throw DBusError.unknownMethod(call)
        }
    }

    private func socketPair() throws -> (Int32, Int32) {
        do throws(SystemCallError) {
            return try SystemCall.socketPair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
        } catch {
            throw DBusError(name: "org.bluez.Error.Failed", message: "\(error.call): \(error)")
        }
    }

    /// A socket's other end went away (the central disconnected or released it).
    private func socketClosed() {
        lock.withLock {
            writeSockets.removeAll { !$0.isOpen }
            if let socket = notifySocket, !socket.isOpen { notifySocket = nil }
        }
        emitState()
    }

    /// Hands whole requests to the handler and notifies the answers.
    private func process(_ outcomes: [SMPWriteAssembler.Outcome]) {
        for outcome in outcomes {
            switch outcome {
            case .answer(let answer):
                notify(answer)
            case .request(let request):
                let responses = handler(request)
                if responseDelay > .zero {
                    let nanoseconds = Int(clamping: responseDelay.components.seconds * 1_000_000_000 + responseDelay.components.attoseconds / 1_000_000_000)
                    delayQueue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
                        for response in responses { self?.notify(response) }
                    }
                } else {
                    for response in responses { notify(response) }
                }
            case .dropped(let why):
                logger.debug("dropped a write: \(why)")
            }
        }
    }

    private func notify(_ response: [UInt8]) {
        let units = BLEFramingCodec(maximumWriteLength: payloadSize).encode(response)
        logger.debug("answer of \(response.count) B in \(units.count) notifications of up to \(payloadSize) B")
        let (socket, signals) = lock.withLock { () -> (PacketSocketLink?, Bool) in
            if let last = units.last { value = last }
            return (notifySocket, notifying)
        }
        if let socket, socket.send(units) { return }
        guard signals else {
            logger.debug("no central has notifications on; dropped a \(response.count)-byte answer")
            return
        }
        for (index, unit) in units.enumerated() {
            // Zephyr sends one notification at a time (the next after the stack took the last); a burst
            // of them makes bluetoothd spread them over its EATT bearers, and they arrive out of order.
            if index > 0 { usleep(UInt32(Self.notificationGap.components.attoseconds / 1_000_000_000_000)) }
            try? connection.emitPropertiesChanged(path: path, interface: BlueZ.gattCharacteristicInterface, changed: ["Value": .bytes(unit)])
        }
    }

    /// The pause between the notifications of one answer.
    static let notificationGap = Duration.milliseconds(5)

    /// Closes every acquired socket and forgets partial writes (a reset or a disconnect); with
    /// `suspend`, refuses new writes and subscriptions until `resume()`.
    func dropConnections(suspend: Bool = false) {
        let (writers, notifier, wasNotifying) = lock.withLock { () -> ([PacketSocketLink], PacketSocketLink?, Bool) in
            defer {
                if suspend { suspended = true }
                writeSockets = []
                notifySocket = nil
                notifying = false
                writeAssemblers = [:]
                linkMTU = nil
            }
            return (writeSockets, notifySocket, notifying || notifySocket != nil)
        }
        for socket in writers { socket.close() }
        notifier?.close()
        if wasNotifying || !writers.isEmpty { emitState() }
    }
}

extension SMPCharacteristicObject {
    /// Accepts writes and subscriptions again.
    func resume() {
        lock.withLock { suspended = false }
    }
}

/// A write assembler behind a lock (one per acquired write socket).
final class LockedAssembler: @unchecked Sendable {
    private let lock = NIOLock()
    private var assembler: SMPWriteAssembler

    init(_ assembler: SMPWriteAssembler) {
        self.assembler = assembler
    }

    func take(_ bytes: [UInt8]) -> [SMPWriteAssembler.Outcome] {
        lock.withLock { assembler.take(bytes) }
    }
}

/// A peripheral's answers to pairing: it accepts, and says what a person at the device would see.
struct PeripheralPairing: BLEPairingDelegate {
    var passkey: UInt32?
    var report: @Sendable (String) -> Void

    func passkey(for device: String) async -> UInt32? {
        if let passkey { report("pairing with \(device): typed the passkey \(BLEPasskey.text(passkey))") } else {
            report("pairing with \(device): asked for a passkey, and none was given (--ble-passkey); refused")
        }
        return passkey
    }

    func display(passkey: UInt32, entered: Int?, for device: String) {
        report("pairing with \(device): passkey \(BLEPasskey.text(passkey))")
    }

    func confirm(passkey: UInt32, for device: String) async -> Bool {
        report("pairing with \(device): passkey \(BLEPasskey.text(passkey)) confirmed")
        return true
    }

    func authorize(_ device: String) async -> Bool {
        report("pairing with \(device): accepted (no passkey)")
        return true
    }
}
