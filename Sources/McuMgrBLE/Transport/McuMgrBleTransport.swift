#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrCore
import McuMgrDBus

/// SMP over Bluetooth LE through BlueZ (PROTOCOL.md §5.5): finds the device (by address or advertised
/// name, scanning when BlueZ does not know it yet), connects, finds the SMP characteristic by UUID,
/// writes requests without response in ATT-payload-sized pieces and reassembles the notifications.
///
/// Writes and notifications go through AcquireWrite / AcquireNotify sockets when BlueZ offers them,
/// else through WriteValue and PropertiesChanged signals. When the link drops (the device reset, went
/// out of range, BlueZ went away), every request in flight fails at once (`.closed(error)`); the next
/// `open` connects again, retrying for `scanTimeout` while a device that just reset comes back, which is
/// what a firmware upgrade needs after its reset.
public final class McuMgrBleTransport: McuMgrTransport, @unchecked Sendable {
    public let configuration: Configuration
    private let logger: Logger
    private let lock = NIOLock()
    private var link: BleLink?

    public init(
        configuration: Configuration,
        logger: Logger = Logger(label: "mcumgr.ble", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.configuration = configuration
        self.logger = logger
    }

    /// A transport for a `ble:` URI.
    public convenience init(uri: McuMgrDeviceURI, logger: Logger = Logger(label: "mcumgr.ble", factory: { _ in SwiftLogNoOpLogHandler() })) throws {
        self.init(configuration: try Configuration(uri: uri), logger: logger)
    }

    public var name: String { configuration.uri.description }

    /// The ATT payload of the current connection (ATT MTU − 3): the largest packet a device without
    /// SMP reassembly takes.
    public var mtu: Int {
        lock.lock()
        defer { lock.unlock() }
        return link?.maximumWriteLength ?? ((configuration.attMTU ?? 23) - 3)
    }

    /// The ATT MTU of the current connection, nil when not connected.
    public var attMTU: Int? {
        lock.lock()
        defer { lock.unlock() }
        return link.map { $0.maximumWriteLength + 3 }
    }

    /// The connected device's address, once connected.
    public var deviceAddress: BluetoothAddress? {
        lock.lock()
        defer { lock.unlock() }
        return link?.device.address
    }

    public var sessionDefaults: SMPSessionConfiguration { SMPSessionConfiguration(window: 1) }

    /// A new, unopened transport to the same device with the same settings: what a reconnect strategy
    /// (e.g. after a firmware upgrade's reset) can return. Reopening this transport works as well.
    public func recreated() -> McuMgrBleTransport {
        McuMgrBleTransport(configuration: configuration, logger: logger)
    }

    public func maximumPacketSize(deviceBufferSize: Int) -> Int {
        BLEFramingCodec.maximumPacketSize(
            maximumWriteLength: mtu, deviceBufferSize: deviceBufferSize, deviceReassembles: configuration.deviceReassembly)
    }

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let previous: BleLink? = lock.withLock {
            defer { link = nil }
            return link
        }
        await previous?.shutdown(disconnect: false)
        let client: BlueZClient
        do {
            client = try await BlueZClient.connect(busAddress: configuration.busAddress)
        } catch let error as McuMgrError {
            throw McuMgrError(.transport, "cannot reach BlueZ for \(name): \(error.message)")
        }
        do {
            let opened = try await BleConnector(configuration: configuration, client: client, logger: logger, name: name)
                .connect(handler: handler)
            lock.withLock { link = opened }
        } catch {
            client.connection.close()
            throw error
        }
    }

    public func send(_ packet: [UInt8]) throws {
        guard let link = lock.withLock({ link }) else {
            throw McuMgrError(.transport, "the Bluetooth link to \(name) is not open")
        }
        try link.send(packet)
    }

    public func close() async {
        let current: BleLink? = lock.withLock {
            defer { link = nil }
            return link
        }
        await current?.shutdown(disconnect: configuration.disconnectOnClose)
    }
}

/// One connection: the characteristic's write and notify paths, the codec and the watchers that notice
/// the link dropping.
final class BleLink: @unchecked Sendable {
    let client: BlueZClient
    let device: BlueZDeviceInfo
    let characteristic: BlueZCharacteristicInfo
    let maximumWriteLength: Int
    let weConnected: Bool
    let deviceReassembly: Bool
    private let name: String
    private let handler: @Sendable (McuMgrTransportEvent) -> Void
    private let encoder: BLEFramingCodec
    private let writeType: String
    private let logger: Logger

    private let lock = NIOLock()
    private var decoder: BLEFramingCodec
    private var writer: PacketSocketLink?
    private var notifier: PacketSocketLink?
    private var subscriptions: [DBusSubscription] = []
    private var ended = false

    init(
        client: BlueZClient, device: BlueZDeviceInfo, characteristic: BlueZCharacteristicInfo, maximumWriteLength: Int,
        weConnected: Bool, deviceReassembly: Bool, name: String, writeType: String, logger: Logger,
        handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) {
        self.deviceReassembly = deviceReassembly
        self.client = client
        self.device = device
        self.characteristic = characteristic
        self.maximumWriteLength = maximumWriteLength
        self.weConnected = weConnected
        self.name = name
        self.writeType = writeType
        self.logger = logger
        self.handler = handler
        self.encoder = BLEFramingCodec(maximumWriteLength: maximumWriteLength)
        self.decoder = BLEFramingCodec(maximumWriteLength: maximumWriteLength)
    }

    func attach(writer: PacketSocketLink?, notifier: PacketSocketLink?, subscriptions: [DBusSubscription]) {
        lock.withLock {
            self.writer = writer
            self.notifier = notifier
            self.subscriptions = subscriptions
        }
    }

    /// One notification (ATT payload) from the device.
    func received(_ payload: [UInt8]) {
        let events = lock.withLock { ended ? [] : decoder.decode(payload) }
        for event in events {
            switch event {
            case .packet(let packet): handler(.packet(packet))
            case .dropped(let drop): handler(.dropped(drop))
            }
        }
    }

    func send(_ packet: [UInt8]) throws {
        let (ended, writer) = lock.withLock { (self.ended, self.writer) }
        guard !ended else { throw McuMgrError(.transport, "the Bluetooth link to \(name) is closed") }
        if !deviceReassembly, packet.count > maximumWriteLength {
            // The device would take the first write as the whole request (PROTOCOL.md 5.5).
            throw McuMgrError(
                .usage,
                "a \(packet.count)-byte request does not fit one \(maximumWriteLength)-byte write (ATT MTU \(maximumWriteLength + 3)) and the device does not reassemble (reassembly=off); shorten the request, or drop reassembly=off if the firmware has CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY"
            )
        }
        let units = encoder.encode(packet)
        if let writer {
            guard writer.send(units) else { throw McuMgrError(.transport, "the Bluetooth link to \(name) is closed") }
            return
        }
        for unit in units {
            client.writeValue(unit, characteristic: characteristic.path, type: writeType) { [weak self] error in
                guard let self, let error else { return }
                self.lost("writing to the SMP characteristic failed (\(error))")
            }
        }
    }

    /// The link dropped: every request in flight fails at once.
    func lost(_ reason: String) {
        guard end() else { return }
        logger.debug("BLE link \(name) lost: \(reason)")
        handler(
            .closed(
                McuMgrError(
                    .transport,
                    "the Bluetooth link to \(name) was lost: \(reason); the device reset, went out of range or was switched off (the next request reconnects)"
                )))
        client.connection.close()
    }

    /// Closes the link on request; `.closed(nil)` follows.
    func shutdown(disconnect: Bool) async {
        let usedStartNotify = lock.withLock { notifier == nil }
        guard end() else { return }
        if usedStartNotify {
            // Tell the device we no longer listen (BlueZ would also notice this connection closing).
            _ = try? await client.connection.call(
                destination: BlueZ.service, path: characteristic.path, interface: BlueZ.gattCharacteristicInterface,
                member: "StopNotify", timeout: .seconds(3))
        }
        if disconnect && weConnected {
            await client.disconnect(device.path)
        }
        client.connection.close()
        handler(.closed(nil))
    }

    /// Marks the link ended and releases its resources; false when it already was.
    private func end() -> Bool {
        let (first, writer, notifier, subscriptions) = lock.withLock {
            () -> (Bool, PacketSocketLink?, PacketSocketLink?, [DBusSubscription]) in
            defer {
                ended = true
                self.writer = nil
                self.notifier = nil
                self.subscriptions = []
            }
            return (!ended, self.writer, self.notifier, self.subscriptions)
        }
        guard first else { return false }
        writer?.close()
        notifier?.close()
        for subscription in subscriptions { subscription.cancel() }
        return true
    }
}

/// The steps from a URI to an open link, with the errors users need.
struct BleConnector {
    let configuration: McuMgrBleTransport.Configuration
    let client: BlueZClient
    let logger: Logger
    let name: String

    /// A failure worth retrying while a device that just reset comes back.
    private struct Retry: Error {
        var error: McuMgrError
    }

    /// A failure that retrying cannot fix (the device wants pairing).
    private struct Fatal: Error {
        var error: McuMgrError
    }

    /// Whether BlueZ refused for lack of pairing, authentication or encryption.
    static func needsPairing(_ error: DBusError) -> Bool {
        if ["org.bluez.Error.NotAuthorized", "org.bluez.Error.AuthenticationFailed", "org.bluez.Error.NotPaired"].contains(error.name) {
            return true
        }
        let text = error.message.lowercased()
        return text.contains("authentication") || text.contains("encryption") || text.contains("not paired")
    }

    func connect(handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws -> BleLink {
        let objects = try await client.objects()
        let adapter = try client.adapter(named: configuration.adapter, in: objects)
        let device = try await findDevice(adapter: adapter, objects: objects)
        let deadline = ContinuousClock.now + configuration.scanTimeout
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await attach(device: device, adapter: adapter, handler: handler)
            } catch let fatal as Fatal {
                throw fatal.error
            } catch let retry as Retry {
                // At least one retry, however slow the first attempt was.
                guard ContinuousClock.now < deadline || attempt < 2 else { throw retry.error }
                logger.debug("BLE connect attempt \(attempt) to \(device.label): \(retry.error.message); retrying")
                try await Task.sleep(for: .milliseconds(300))
            }
        }
    }

    private func matches(_ device: BlueZDeviceInfo) -> Bool {
        switch configuration.target {
        case .address(let address): return device.address == address
        case .name(let name): return device.name == name || device.alias == name
        }
    }

    /// The device from BlueZ's objects, or found by a scan.
    private func findDevice(adapter: BlueZAdapterInfo, objects: BlueZObjects) async throws -> BlueZDeviceInfo {
        let known = objects.devices(on: adapter.path)
        if case .address = configuration.target, let device = known.first(where: matches) { return device }
        if case .name = configuration.target, let device = known.first(where: { matches($0) && ($0.connected || $0.rssi != nil) }) {
            return device
        }
        let target = configuration.target
        let scanner = BLEScanner(client: client, adapter: adapter)
        let seen = try await scanner.scan(serviceUUIDs: [], timeout: configuration.scanTimeout, known: objects) { device in
            switch target {
            case .address(let address): return device.address == address
            case .name(let name): return device.name == name || device.alias == name
            }
        }
        if let device = seen.first, matches(device) { return device }
        let seconds = Double(configuration.scanTimeout.components.seconds)
        var message = "no Bluetooth LE device \(target) found on \(adapter.label) within \(Int(seconds.rounded())) s"
        if seen.isEmpty {
            message += "; no device was seen at all"
        } else {
            let listed = seen.prefix(12).map { $0.label + ($0.advertisesSMP ? " SMP" : "") }
            message += "; seen: " + listed.joined(separator: ", ") + (seen.count > 12 ? ", ..." : "")
        }
        message +=
            ". Check that the device is powered and advertising (not connected to another central), move it closer, or scan longer with ?timeout=30; `smp ble scan` lists devices that advertise SMP"
        throw McuMgrError(.transport, message)
    }

    private func attach(
        device found: BlueZDeviceInfo, adapter: BlueZAdapterInfo, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) async throws -> BleLink {
        let connection = client.connection
        // Watch the device before connecting so that no change is missed.
        let state = DeviceStateBox()
        let devicePath = found.path
        let watch = try await connection.subscribe(
            .propertiesChanged(sender: BlueZ.service, path: devicePath, interface: BlueZ.deviceInterface)
        ) { message in
            guard message.body.count >= 2, let changed = message.body[1].stringKeyedDictionary else { return }
            state.apply(changed)
        }
        var keep = false
        defer { if !keep { watch.cancel() } }

        var device = try await client.device(at: devicePath)
        state.apply(["Connected": .boolean(device.connected), "ServicesResolved": .boolean(device.servicesResolved)])
        let weConnected = !device.connected
        if !device.connected {
            do {
                try await client.connect(device, timeout: configuration.connectTimeout)
            } catch let error as DBusError {
                let mapped = BlueZClient.map(error, "connecting to \(device.label)")
                if error.name == DBusError.noReply {
                    throw McuMgrError(
                        .timeout,
                        "connecting to \(device.label) timed out after \(configuration.connectTimeout); the device may be out of range, not connectable, or connected to another central"
                    )
                }
                if Self.needsPairing(error) { throw Fatal(error: Self.pairingError(mapped, device: device)) }
                throw Retry(
                    error: McuMgrError(
                        .transport,
                        "cannot connect to \(device.label): \(error.message.isEmpty ? error.name : error.message); the device may not be connectable (is it connected to another central, or out of range?)"
                    ))
            }
        }
        // Services must be resolved before the characteristic exists.
        guard await state.wait(until: { $0.connected && $0.servicesResolved }, timeout: configuration.connectTimeout) else {
            let now = state.snapshot
            if !now.connected {
                throw Retry(error: McuMgrError(.transport, "\(device.label) disconnected right after connecting; is it rebooting, or does it refuse this central?"))
            }
            throw McuMgrError(
                .timeout, "\(device.label) connected but BlueZ did not resolve its GATT services within \(configuration.connectTimeout)")
        }
        device = try await client.device(at: devicePath)
        let objects = try await client.objects()
        let candidates = objects.smpCharacteristics(of: devicePath)
        guard !candidates.isEmpty else {
            let services = objects.serviceUUIDs(of: devicePath)
            let error = McuMgrError(
                .transport,
                "\(device.label) has no SMP service (\(SMPGattUUID.service)); its services: \(services.isEmpty ? "none" : services.joined(separator: ", ")). The firmware needs CONFIG_MCUMGR_TRANSPORT_BT; if it requires encryption, pair first (`bluetoothctl pair \(device.address?.rawValue ?? "ADDRESS")`)"
            )
            // A device that advertises SMP but shows no characteristic yet may still be booting.
            if !weConnected {
                // Someone else's connection may hold a stale view of the services: connect afresh.
                await client.disconnect(devicePath)
                throw Retry(error: error)
            }
            if device.advertisesSMP { throw Retry(error: error) }
            await client.disconnect(devicePath)
            throw error
        }
        var lastError: McuMgrError?
        for characteristic in candidates {
            do {
                let link = try await open(
                    characteristic, device: device, weConnected: weConnected, state: state, watch: watch, handler: handler)
                keep = true
                return link
            } catch let error as McuMgrError {
                lastError = error
            } catch let fatal as Fatal {
                if weConnected { await client.disconnect(devicePath) }
                throw fatal
            }
        }
        // A connection made by someone else (or left over) whose characteristic does not work may
        // hold a stale view of the device's services: connect afresh on the next attempt.
        if !weConnected { await client.disconnect(devicePath) }
        throw Retry(error: lastError ?? McuMgrError(.transport, "cannot use the SMP characteristic of \(device.label)"))
    }

    private func open(
        _ characteristic: BlueZCharacteristicInfo, device: BlueZDeviceInfo, weConnected: Bool, state: DeviceStateBox,
        watch: DBusSubscription, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) async throws -> BleLink {
        let flags = Set(characteristic.flags)
        guard flags.contains("notify") || flags.contains("indicate") else {
            throw McuMgrError(.protocolViolation, "the SMP characteristic of \(device.label) cannot notify (flags: \(characteristic.flags.joined(separator: ", ")))")
        }
        let writeType: String
        if flags.contains("write-without-response") {
            writeType = "command"
        } else if flags.contains("write") {
            writeType = "request"
        } else {
            throw McuMgrError(.protocolViolation, "the SMP characteristic of \(device.label) cannot be written (flags: \(characteristic.flags.joined(separator: ", ")))")
        }
        let connection = client.connection
        var subscriptions: [DBusSubscription] = [watch]
        var notifyFD: Int32?
        var writeFD: Int32?
        var mtu = characteristic.mtu
        func cleanup() {
            for subscription in subscriptions where subscription !== watch { subscription.cancel() }
            if let notifyFD { close(notifyFD) }
            if let writeFD { close(writeFD) }
        }
        // A holder for the link, so that handlers set up before it exists can reach it.
        let holder = LinkHolder()

        do {
            if configuration.acquire, flags.contains("notify") {
                if let acquired = try? await client.acquire("AcquireNotify", characteristic: characteristic.path) {
                    notifyFD = acquired.fd
                    mtu = acquired.mtu
                }
            }
            if notifyFD == nil {
                subscriptions.append(
                    try await connection.subscribe(
                        .propertiesChanged(sender: BlueZ.service, path: characteristic.path, interface: BlueZ.gattCharacteristicInterface)
                    ) { message in
                        guard message.body.count >= 2, let value = message.body[1].stringKeyedDictionary?["Value"]?.bytes else { return }
                        holder.link?.received(value)
                    })
                // A session left by an earlier link that dropped is ended first: real BlueZ ends it with
                // the connection (and answers this with an error, ignored), a stand-in may keep it and
                // deliver every notification twice.
                _ = try? await connection.call(
                    destination: BlueZ.service, path: characteristic.path, interface: BlueZ.gattCharacteristicInterface,
                    member: "StopNotify", timeout: .seconds(3))
                do {
                    try await client.startNotify(characteristic: characteristic.path)
                } catch let error as DBusError {
                    let mapped = BlueZClient.map(error, "subscribing to the SMP notifications of \(device.label)")
                    if Self.needsPairing(error) { throw Fatal(error: Self.pairingError(mapped, device: device)) }
                    throw mapped
                }
            }
            if configuration.acquire, writeType == "command" {
                if let acquired = try? await client.acquire("AcquireWrite", characteristic: characteristic.path) {
                    writeFD = acquired.fd
                    mtu = acquired.mtu
                }
            }
        } catch {
            cleanup()
            throw error
        }
        var attMTU = mtu ?? configuration.attMTU ?? 23
        if let cap = configuration.attMTU { attMTU = min(attMTU, cap) }
        attMTU = max(23, min(attMTU, 517))
        let link = BleLink(
            client: client, device: device, characteristic: characteristic, maximumWriteLength: attMTU - 3,
            weConnected: weConnected, deviceReassembly: configuration.deviceReassembly, name: name, writeType: writeType,
            logger: logger, handler: handler)
        holder.link = link
        let path = "\(device.label) \(characteristic.path)"
        let route = "writes by \(writeFD == nil ? "WriteValue" : "socket"), notifications by \(notifyFD == nil ? "signal" : "socket")"
        do {
            let notifier = try notifyFD.map { fd in
                try PacketSocketLink(
                    readFD: fd, writeFD: nil, onPacket: { [weak link] in link?.received($0) },
                    onClose: { [weak link] reason in link?.lost(reason ?? "the notification socket closed") })
            }
            notifyFD = nil
            let writer = try writeFD.map { fd in
                try PacketSocketLink(
                    readFD: nil, writeFD: fd, onPacket: { _ in },
                    onClose: { [weak link] reason in link?.lost(reason ?? "the write socket closed") })
            }
            writeFD = nil
            // The device disconnecting or vanishing, or BlueZ or the bus going away, ends the link.
            state.onChange { [weak link] snapshot in
                if !snapshot.connected { link?.lost("the device disconnected") }
            }
            subscriptions.append(
                try await connection.subscribe(.objectManager(sender: BlueZ.service, member: "InterfacesRemoved")) { [weak link] message in
                    guard let removed = message.body.first?.objectPath else { return }
                    if device.path.isDescendant(of: removed) || characteristic.path.isDescendant(of: removed) {
                        link?.lost("BlueZ removed \(removed)")
                    }
                })
            connection.onDisconnect { [weak link] error in link?.lost("the D-Bus connection to BlueZ ended (\(error.message))") }
            link.attach(writer: writer, notifier: notifier, subscriptions: subscriptions)
            if !state.snapshot.connected { link.lost("the device disconnected") }
        } catch {
            cleanup()
            throw McuMgrError(.transport, "cannot set up the link to \(path): \(error)")
        }
        logger.debug(
            "BLE link \(name): \(device.label) characteristic \(characteristic.path), ATT MTU \(attMTU), \(route)"
        )
        return link
    }
}

extension BleConnector {
    /// The error for a device that wants pairing, with the command that pairs it.
    static func pairingError(_ mapped: McuMgrError, device: BlueZDeviceInfo) -> McuMgrError {
        if mapped.message.contains("bluetoothctl pair ADDRESS"), let address = device.address {
            return McuMgrError(.transport, mapped.message.replacing("bluetoothctl pair ADDRESS", with: "bluetoothctl pair \(address)"))
        }
        guard !mapped.message.contains("bluetoothctl pair") else { return mapped }
        return McuMgrError(
            .transport,
            "\(mapped.message); \(device.label) wants an authenticated or encrypted link (Zephyr 4.0+ requires one for SMP by default): pair first with `bluetoothctl pair \(device.address?.rawValue ?? "ADDRESS")`"
        )
    }
}

/// Lets handlers registered before a link exists reach it.
final class LinkHolder: @unchecked Sendable {
    private let lock = NIOLock()
    private weak var stored: BleLink?
    var link: BleLink? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// The device's Connected / ServicesResolved as signals report them.
final class DeviceStateBox: @unchecked Sendable {
    struct Snapshot: Sendable {
        var connected = false
        var servicesResolved = false
    }

    private struct Waiter {
        var condition: @Sendable (Snapshot) -> Bool
        var continuation: CheckedContinuation<Bool, Never>
    }

    private let lock = NIOLock()
    private var state = Snapshot()
    private var observers: [@Sendable (Snapshot) -> Void] = []
    private var waiters: [UUID: Waiter] = [:]

    var snapshot: Snapshot { lock.withLock { state } }

    func apply(_ changed: [String: DBusValue]) {
        let (snapshot, observers, ready) = lock.withLock {
            () -> (Snapshot, [@Sendable (Snapshot) -> Void], [CheckedContinuation<Bool, Never>]) in
            if let connected = changed["Connected"]?.bool { state.connected = connected }
            if let resolved = changed["ServicesResolved"]?.bool { state.servicesResolved = resolved }
            let done = waiters.filter { $0.value.condition(state) }
            for id in done.keys { waiters[id] = nil }
            return (state, self.observers, done.values.map(\.continuation))
        }
        for continuation in ready { continuation.resume(returning: true) }
        for observer in observers { observer(snapshot) }
    }

    func onChange(_ observer: @escaping @Sendable (Snapshot) -> Void) {
        lock.withLock { observers.append(observer) }
    }

    /// Waits until `condition` holds; false after `timeout`.
    func wait(until condition: @escaping @Sendable (Snapshot) -> Bool, timeout: Duration) async -> Bool {
        let id = UUID()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            lock.lock()
            if condition(state) {
                lock.unlock()
                continuation.resume(returning: true)
                return
            }
            waiters[id] = Waiter(condition: condition, continuation: continuation)
            lock.unlock()
        }
    }

    private func expire(_ id: UUID) {
        let waiter = lock.withLock { waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: false)
    }
}
