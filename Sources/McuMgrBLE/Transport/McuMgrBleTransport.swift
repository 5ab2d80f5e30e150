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
    /// Where what was learned about each device (buffers, reassembly) is kept between runs; nil to
    /// learn it on every connection.
    public let deviceMemory: BLEDeviceMemory?
    /// Who answers when a device that wants an encrypted link must be paired first; nil: such a
    /// device fails with the command that pairs it (`smp ble pair`).
    public let pairing: (any BLEPairingDelegate)?
    private let logger: Logger
    private let lock = NIOLock()
    private var link: BleLink?

    public init(
        configuration: Configuration,
        logger: Logger = Logger(label: "mcumgr.ble", factory: { _ in SwiftLogNoOpLogHandler() }),
        deviceMemory: BLEDeviceMemory? = .standard, pairing: (any BLEPairingDelegate)? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.deviceMemory = deviceMemory
        self.pairing = pairing
    }

    /// A transport for a `ble:` URI.
    public convenience init(
        uri: McuMgrDeviceURI, logger: Logger = Logger(label: "mcumgr.ble", factory: { _ in SwiftLogNoOpLogHandler() }),
        pairing: (any BLEPairingDelegate)? = nil
    ) throws {
        self.init(configuration: try Configuration(uri: uri), logger: logger, pairing: pairing)
    }

    public var name: String { configuration.uri.description }

    /// The longest write of the current connection (ATT MTU − 3, at most 512, 509 toward BlueZ): the
    /// largest packet a device without SMP reassembly takes.
    public var mtu: Int {
        lock.lock()
        defer { lock.unlock() }
        return link?.maximumWriteLength ?? BLEFramingCodec.maximumWriteLength(attMTU: configuration.attMTU ?? 23)
    }

    /// The ATT MTU of the current connection, nil when not connected.
    public var attMTU: Int? {
        lock.lock()
        defer { lock.unlock() }
        return link?.attMTU
    }

    /// What is known about the connected device's buffers and reassembly, nil when not connected.
    public var deviceProfile: BLEDeviceProfile? {
        lock.withLock { link?.profile }
    }

    /// The connected device's address, once connected.
    public var deviceAddress: BluetoothAddress? {
        lock.lock()
        defer { lock.unlock() }
        return link?.device.address
    }

    /// The longest write as the packet of one frame; towards a device with SMP reassembly, packets of up
    /// to `BLEFramingCodec.defaultMaximumPacketSize` in several writes; a session window of 1 until the
    /// device's buffers are known; and once connected the device's buffers as the connection asked them
    /// (`os params`, see `deviceProfile`), so that transfers on this connection need not ask again.
    public var linkLimits: LinkLimits {
        let profile = deviceProfile
        let reassembles = profile?.reassembles ?? configuration.deviceReassembly
        var limits = LinkLimits(
            maximumPacketSize: mtu,
            reassembledPacketLimit: reassembles ? BLEFramingCodec.defaultMaximumPacketSize : nil,
            framesInFlight: 255, session: SMPSessionConfiguration(window: 1))
        if let profile {
            limits.deviceBufferSize = profile.bufferSize
            limits.deviceBufferCount = profile.bufferCount
            limits.piecesArriveOutOfOrder = profile.piecesArriveOutOfOrder
        }
        return limits
    }

    /// Looks for the device (by address or advertised name: a scan of `scanTimeout` when BlueZ has not
    /// seen it yet) without connecting: the device as BlueZ knows it, so that `open` then connects
    /// without a scan of its own. A firmware upgrade calls it while it waits for a device that comes back
    /// as another peripheral (a firmware loader), so that the wait lasts its reconnect timeout and not
    /// one scan.
    /// - Throws: `McuMgrError` (.transport) naming what was seen when the device was not found.
    public func locate() async throws -> BlueZDeviceInfo {
        let client: BlueZClient
        do {
            client = try await BlueZClient.connect(busAddress: configuration.busAddress)
        } catch let error as McuMgrError {
            throw McuMgrError(.transport, "cannot reach BlueZ for \(name): \(error.message)", cause: error)
        }
        defer { client.connection.close() }
        let objects = try await client.objects()
        let adapter = try client.adapter(named: configuration.adapter, in: objects)
        return try await BleConnector(configuration: configuration, client: client, logger: logger, name: name)
            .findDevice(adapter: adapter, objects: objects)
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
            throw McuMgrError(.transport, "cannot reach BlueZ for \(name): \(error.message)", cause: error)
        }
        do {
            let started = ContinuousClock.now
            let connector = BleConnector(
                configuration: configuration, client: client, logger: logger, name: name, pairing: pairing, deviceMemory: deviceMemory)
            let opened = try await connector.connect(handler: handler)
            logger.debug("BLE link \(name) up in \((ContinuousClock.now - started).milliseconds) ms (scan, connect, services, subscription)")
            var link = opened
            if await !learnProfile(of: link) {
                link = try await rediscoverServices(of: link, connector: connector, handler: handler) ?? link
            }
            // Lost while asking about the device: say so now rather than on the first request.
            if let lost = link.lossError { throw lost }
            lock.withLock { self.link = link }
        } catch {
            client.connection.close()
            throw error
        }
    }

    /// A connection this transport made to a device without a bond, on which the device did not answer
    /// at all: BlueZ may hold the services of the device's earlier firmware. It keeps a cached service
    /// whose handles and UUID did not change together with its characteristics (BlueZ 5.66, whether or
    /// not the device's database hash changed), so after an upgrade that moved the SMP characteristic
    /// within its service the writes and the subscription go to another characteristic. Removing the
    /// device from BlueZ drops that copy, and the next connection discovers the services afresh. A
    /// bonded device keeps its bond (removing it would take the keys): `noAnswerHint` says what to do.
    /// - Returns: the new link, nil when this is not such a connection.
    private func rediscoverServices(
        of link: BleLink, connector: BleConnector, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) async throws -> BleLink? {
        guard link.weConnected, !link.device.paired, link.lossError == nil else { return nil }
        logger.warning(
            "\(link.device.label) did not answer on its SMP characteristic: BlueZ may hold the services of the device's earlier firmware; removing the device from BlueZ to discover them afresh")
        link.discard()
        do {
            _ = try await connector.client.removeDevice(link.device)
        } catch {
            // Not removed: end the connection this transport made, so that the next one is its own too.
            logger.debug("BLE \(link.device.label): \(error); connecting again without removing it")
            await connector.client.disconnect(link.device.path)
        }
        let fresh: BleLink
        do {
            fresh = try await connector.connect(handler: handler)
        } catch let error as McuMgrError {
            throw McuMgrError(
                error.kind,
                "\(link.device.label) did not answer on its SMP characteristic, and connecting again after removing it from BlueZ (whose copy of its services may have been from earlier firmware) failed: \(error.message)",
                cause: error)
        }
        if await learnProfile(of: fresh) {
            logger.debug("BLE \(fresh.device.label): answers after its services were discovered afresh")
        }
        return fresh
    }

    /// Fills in the link's device profile: the buffers from `os params` (one round trip), and whether
    /// the device reassembles from the memory when it had the same buffer before, else from the
    /// reassembly probe (one more round trip, only when its buffer holds more than one write).
    /// - Returns: whether the device answered `os params` (with its buffers or an error).
    @discardableResult
    private func learnProfile(of link: BleLink) async -> Bool {
        let key = link.device.address?.rawValue ?? link.device.path.rawValue
        var profile = BLEDeviceProfile()
        let timeout = Duration.seconds(5)
        let answer = await link.exchange(BLEDeviceProbe.parametersRequest(), timeout: timeout, reading: BLEDeviceProbe.parameters(in:))
        if let buffers = answer ?? nil {
            profile.bufferSize = buffers.bufferSize
            profile.bufferCount = buffers.bufferCount
        }
        var source = "asked"
        if !configuration.deviceReassembly {
            source = "reassembly=off"
        } else if link.eatt {
            // Pieces reorder over EATT whatever the device does; a probe might pass by luck.
            profile.reassembles = false
            profile.piecesArriveOutOfOrder = true
            source = "EATT: single writes"
        } else if let known = deviceMemory?.recall(key, bufferSize: profile.bufferSize) {
            profile.reassembles = known.reassembles
            profile.piecesArriveOutOfOrder = known.piecesArriveOutOfOrder
            source = "remembered"
        } else if profile.needsReassemblyProbe(maximumWriteLength: link.maximumWriteLength) {
            profile.reassembles = await link.exchange(
                BLEDeviceProbe.reassemblyRequest(maximumWriteLength: link.maximumWriteLength), timeout: timeout,
                reading: BLEDeviceProbe.reassembly(in:))
            if profile.reassembles == nil, link.lossError == nil {
                // No answer, where a device without reassembly answers rc 9: the pieces did not reach
                // the device whole (BlueZ with EATT sends them over several bearers, and the one-byte
                // tail overtakes the head). Single writes always arrive whole. The device may hold the
                // head half-joined: end it, or it would swallow the next request.
                link.write(BLEDeviceProbe.flushWrite)
                profile.reassembles = false
                profile.piecesArriveOutOfOrder = true
            }
        }
        link.profile = profile
        logger.debug("BLE device \(link.device.label): \(profile) (\(source))")
        if source == "asked", link.lossError == nil { deviceMemory?.remember(profile, for: key) }
        return answer != nil
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
        await current?.shutdown(disconnect: configuration.disconnectOnClose, memory: deviceMemory)
    }

    /// Devices this process asked BlueZ to disconnect, and when (see `BleLink.shutdown`).
    static let disconnectsRequested = NIOLockedValueBox<[DBusObjectPath: ContinuousClock.Instant]>([:])
}

/// One connection: the characteristic's write and notify paths, the codec and the watchers that notice
/// the link dropping.
final class BleLink: @unchecked Sendable {
    let client: BlueZClient
    let device: BlueZDeviceInfo
    let characteristic: BlueZCharacteristicInfo
    let maximumWriteLength: Int
    let attMTU: Int
    let weConnected: Bool
    let deviceReassembly: Bool
    /// The link runs EATT: requests and answers in pieces arrive out of order (`BlueZEATT`).
    let eatt: Bool
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
    private var learned = BLEDeviceProfile()
    private var lost: McuMgrError?
    /// The `exchange` in progress, ended early when the link is lost.
    private var pendingExchange: (@Sendable () -> Void)?
    /// While the transport asks the device about itself: takes the answers meant for it.
    private var interceptor: (@Sendable ([UInt8]) -> Bool)?

    init(
        client: BlueZClient, device: BlueZDeviceInfo, characteristic: BlueZCharacteristicInfo, attMTU: Int, maximumWriteLength: Int,
        weConnected: Bool, deviceReassembly: Bool, eatt: Bool = false, name: String, writeType: String, logger: Logger,
        handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) {
        self.deviceReassembly = deviceReassembly
        self.eatt = eatt
        self.client = client
        self.device = device
        self.characteristic = characteristic
        self.maximumWriteLength = maximumWriteLength
        self.attMTU = attMTU
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

    /// What is known about the device's buffers and reassembly.
    var profile: BLEDeviceProfile {
        get { lock.withLock { learned } }
        set { lock.withLock { learned = newValue } }
    }

    /// Sends `packet` outside the session and returns what `reading` makes of the first answer it
    /// recognises, or nil after `timeout` or when the link ends.
    func exchange<T: Sendable>(_ packet: [UInt8], timeout: Duration, reading: @escaping @Sendable ([UInt8]) -> T?) async -> T? {
        let box = ExchangeBox<T>()
        let ended = lock.withLock { () -> Bool in
            interceptor = { bytes in
                guard let value = reading(bytes) else { return false }
                box.finish(value)
                return true
            }
            pendingExchange = { box.finish(nil) }
            return self.ended
        }
        defer {
            lock.withLock {
                interceptor = nil
                pendingExchange = nil
            }
        }
        guard !ended else { return nil }
        let units = encoder.encode(packet)
        let writer = lock.withLock { self.writer }
        if let writer {
            guard writer.send(units) else { return nil }
        } else {
            for unit in units {
                client.writeValue(unit, characteristic: characteristic.path, type: writeType) { _ in }
            }
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            box.finish(nil)
        }
        defer { timer.cancel() }
        return await box.value()
    }

    /// One write of `bytes` as they are, outside the framing (see `BLEDeviceProbe.flushWrite`).
    func write(_ bytes: [UInt8]) {
        let writer = lock.withLock { ended ? nil : self.writer }
        if let writer {
            _ = writer.send([bytes])
        } else if !lock.withLock({ ended }) {
            client.writeValue(bytes, characteristic: characteristic.path, type: writeType) { _ in }
        }
    }

    /// One notification (ATT payload) from the device.
    func received(_ payload: [UInt8]) {
        let (events, interceptor) = lock.withLock { (ended ? [] : decoder.decode(payload), self.interceptor) }
        for event in events {
            switch event {
            case .packet(let packet):
                if let interceptor, interceptor(packet) { continue }
                handler(.packet(packet))
            case .dropped(let drop): handler(.dropped(drop))
            }
        }
    }

    func send(_ packet: [UInt8]) throws {
        let (ended, writer) = lock.withLock { (self.ended, self.writer) }
        guard !ended else { throw lossError ?? McuMgrError(.transport, "the Bluetooth link to \(name) is closed") }
        // A device without reassembly takes the first write as the whole request, and one with it drops
        // a request larger than its buffer, both without an answer the client could wait for.
        if let refusal = profile.refusal(packetSize: packet.count, maximumWriteLength: maximumWriteLength, assumeReassembly: deviceReassembly) {
            throw McuMgrError(.usage, "\(name) (ATT MTU \(attMTU)): \(refusal)")
        }
        let units = encoder.encode(packet)
        if let writer {
            // The write socket ended (a hang-up or an error) and its thread has not told `lost` why yet:
            // the link was lost all the same.
            guard writer.send(units) else { throw lossError ?? lossReport("the write socket closed") }
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
        let error = lossReport(reason)
        let abandon = lock.withLock { () -> (@Sendable () -> Void)? in
            if lost == nil { lost = error }
            return pendingExchange
        }
        abandon?()
        guard end() else { return }
        logger.debug("BLE link \(name) lost: \(reason)")
        handler(.closed(error))
        client.connection.close()
    }

    /// The error of a lost link, with what the user can do.
    private func lossReport(_ reason: String) -> McuMgrError {
        McuMgrError(
            .transport,
            "the Bluetooth link to \(name) was lost: \(reason); the device reset, went out of range or was switched off (the next request reconnects)"
        )
    }

    /// Why the link ended, when it was lost.
    var lossError: McuMgrError? {
        get { lock.withLock { lost } }
        set { lock.withLock { lost = newValue } }
    }

    /// Closes the link on request; `.closed(nil)` follows. With `disconnect`, a connection this link
    /// made is ended. BlueZ ends it two seconds after it is asked (`BlueZClient.requestDisconnect`), so
    /// when `memory` can tell the next command (another process) that the connection is ending, the
    /// request is only sent: the next connection to the device waits for the end instead
    /// (`BleConnector.awaitRequestedDisconnect`). Without a memory it waits here.
    func shutdown(disconnect: Bool, memory: BLEDeviceMemory? = nil) async {
        let usedStartNotify = lock.withLock { notifier == nil }
        guard end() else { return }
        if usedStartNotify {
            // Tell the device we no longer listen (BlueZ would also notice this connection closing).
            _ = try? await client.connection.call(
                destination: BlueZ.service, path: characteristic.path, interface: BlueZ.gattCharacteristicInterface,
                member: "StopNotify", timeout: .seconds(3))
        }
        if disconnect && weConnected {
            if let memory, let address = device.address {
                client.requestDisconnect(device.path)
                McuMgrBleTransport.disconnectsRequested.withLockedValue { $0[device.path] = .now }
                memory.noteDisconnectRequested(address.rawValue)
                logger.debug("BLE \(device.label): asked BlueZ to disconnect (it does so 2 s later; the next connection waits for that)")
            } else {
                await client.disconnect(device.path)
            }
        }
        await client.closeFlushed()
        handler(.closed(nil))
    }

    /// Ends the link without a word to the client (which has not seen it yet) and without disconnecting:
    /// the caller deals with the connection.
    func discard() {
        _ = end()
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
    /// Who answers pairing questions when the device wants pairing; nil: pairing is not this
    /// connector's to start, and a device that wants it fails with the command to pair.
    var pairing: (any BLEPairingDelegate)? = nil
    /// Where an earlier command recorded the disconnect it asked for (`awaitRequestedDisconnect`).
    var deviceMemory: BLEDeviceMemory? = nil

    /// How long after a requested disconnect the device may still show as connected: BlueZ's two
    /// seconds, the controller's disconnection, and a loaded machine's delays.
    static let requestedDisconnectGrace = Duration.seconds(6)

    /// A failure worth retrying while a device that just reset comes back; `rediscover` when BlueZ
    /// dropped the device's object (it removes an unpaired device some 30 s after it disconnects).
    private struct Retry: Error {
        var error: McuMgrError
        var rediscover = false
    }

    /// Whether an attempt called `Connect`: a connection this transport asked for is its own to close,
    /// even when a later attempt finds it already up.
    final class Ownership: @unchecked Sendable {
        private let lock = NIOLock()
        private var connected = false
        var calledConnect: Bool {
            get { lock.withLock { connected } }
            set { lock.withLock { connected = newValue } }
        }
    }

    /// How long the D-Bus `Connect` call may take: longer than BlueZ's own connection attempt, so that
    /// BlueZ's answer (and not a D-Bus NoReply) ends a failed one.
    var connectCallTimeout: Duration { configuration.connectTimeout + .seconds(10) }

    /// A failure that retrying cannot fix, unless it is pairing that the device wants and the caller
    /// lets this connector pair.
    private struct Fatal: Error {
        var error: McuMgrError
        var wantsPairing = false
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
        var device = await awaitRequestedDisconnect(try await findDevice(adapter: adapter, objects: objects))
        // Allowed to pair: a device not paired yet is paired first, with this process answering (an
        // agent of its own for this pairing; BlueZ's default agent, a desktop's, is left alone).
        let pairedNow = pairing != nil && !device.paired
        if let pairing, pairedNow {
            device = try await BLEBonds.pair(
                device, client: client, capability: .keyboardDisplay, delegate: pairing, timeout: Self.pairingTimeout, keepConnection: true)
        }
        return try await connect(device: &device, adapter: adapter, handler: handler, pairedNow: pairedNow)
    }

    /// How long pairing may take, a person typing a passkey included.
    static let pairingTimeout = Duration.seconds(90)

    private func connect(
        device: inout BlueZDeviceInfo, adapter: BlueZAdapterInfo, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void,
        pairedNow: Bool
    ) async throws -> BleLink {
        let deadline = ContinuousClock.now + configuration.scanTimeout
        let ownership = Ownership()
        // A connection pairing made is this transport's to close.
        ownership.calledConnect = pairedNow && device.connected
        var attempt = 0
        var paired = pairedNow
        while true {
            attempt += 1
            do {
                return try await attach(device: device, adapter: adapter, ownership: ownership, handler: handler)
            } catch let fatal as Fatal {
                if let pairing, fatal.wantsPairing, !paired {
                    // Paired when connecting, but the bond was lost since (on the device's side, or
                    // BlueZ's): pair again, then connect again.
                    paired = true
                    logger.debug("BLE: \(device.label) wants pairing: \(fatal.error.message); pairing")
                    device = try await BLEBonds.pair(
                        device, client: client, capability: .keyboardDisplay, delegate: pairing, timeout: Self.pairingTimeout,
                        keepConnection: true)
                    ownership.calledConnect = ownership.calledConnect || device.connected
                    continue
                }
                if ownership.calledConnect { await client.disconnect(device.path) }
                if fatal.wantsPairing, paired {
                    let address = device.address?.rawValue ?? "ADDRESS"
                    throw McuMgrError(
                        .transport,
                        "paired with \(device.label), and it still refuses (\(fatal.error.message)); it may want a pairing with a passkey (authenticated, MITM-protected): remove the bond with `smp ble forget \(address)`, then pair again with `smp ble pair \(address)` and type or confirm the passkey")
                }
                throw fatal.error
            } catch let retry as Retry {
                // At least one retry, however slow the first attempt was.
                guard ContinuousClock.now < deadline || attempt < 2 else {
                    // A connection this transport asked for is not left behind (the device would stay
                    // connected and stop advertising to every other client).
                    if ownership.calledConnect { await client.disconnect(device.path) }
                    throw Self.withLostBondHint(retry.error, device: device)
                }
                logger.debug("BLE connect attempt \(attempt) to \(device.label): \(retry.error.message); retrying")
                try await Task.sleep(for: .milliseconds(300))
                if retry.rediscover {
                    device = try await findDevice(adapter: adapter, objects: try await client.objects())
                }
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
    func findDevice(adapter: BlueZAdapterInfo, objects: BlueZObjects) async throws -> BlueZDeviceInfo {
        let known = objects.devices(on: adapter.path)
        if case .address = configuration.target, let device = known.first(where: matches) { return device }
        if case .name = configuration.target, let device = known.first(where: { matches($0) && ($0.connected || $0.discovered) }) {
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
        if seen.isEmpty {
            // Linux 6.1 can leave a controller's scan off while it reports discovery running (an HCI
            // command that timed out while it restarted the scan, seen during pairing on a busy machine):
            // a power cycle of the adapter starts it afresh.
            message += ". Where other devices advertise nearby, \(adapter.label)'s scan may be stuck: power it off and on (bluetoothctl power off; bluetoothctl power on)"
        }
        throw McuMgrError(.transport, message)
    }

    private func attach(
        device found: BlueZDeviceInfo, adapter: BlueZAdapterInfo, ownership: Ownership,
        handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
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

        var device: BlueZDeviceInfo
        do {
            device = try await client.device(at: devicePath)
        } catch let error as McuMgrError {
            throw Retry(error: error, rediscover: true)
        }
        state.apply(["Connected": .boolean(device.connected), "ServicesResolved": .boolean(device.servicesResolved)])
        let weConnected = !device.connected || ownership.calledConnect
        // Where a slow link-up goes, for -v: the Connect call, the services, the Device Information.
        var phase = ContinuousClock.now
        func phaseDone(_ what: String) {
            let now = ContinuousClock.now
            logger.debug("BLE \(device.label): \(what) in \((now - phase).milliseconds) ms")
            phase = now
        }
        if !device.connected {
            ownership.calledConnect = true
            do {
                try await connectRestartingOthersScan(device, adapter: adapter)
                phaseDone("BlueZ answered Connect")
            } catch let error as DBusError {
                let mapped = BlueZClient.map(error, "connecting to \(device.label)")
                if Self.needsPairing(error) { throw Fatal(error: Self.pairingError(mapped, device: device), wantsPairing: true) }
                if error.name == DBusError.noReply {
                    throw Retry(
                        error: McuMgrError(
                            .timeout,
                            "connecting to \(device.label) timed out after \(connectCallTimeout); the device may be out of range, not connectable, or connected to another central"
                        ))
                }
                // BlueZ dropped the device's object: find it again by scanning.
                let vanished = error.name == DBusError.unknownObject || error.name == "org.bluez.Error.DoesNotExist"
                throw Retry(
                    error: McuMgrError(
                        .transport,
                        "cannot connect to \(device.label): \(error.message.isEmpty ? error.name : error.message); the device may not be connectable (is it connected to another central, or out of range?)"
                    ), rediscover: vanished)
            }
            // BlueZ may answer Connect without ever signalling Connected (its "already connected" race):
            // read the properties instead of waiting for a signal that does not come.
            if let fresh = try? await client.device(at: devicePath) {
                state.apply(["Connected": .boolean(fresh.connected), "ServicesResolved": .boolean(fresh.servicesResolved)])
            }
        }
        // Services must be resolved before the characteristic exists; signals wake the wait, and the
        // properties are read once a second in case a signal never comes.
        let resolveDeadline = ContinuousClock.now + configuration.connectTimeout
        var resolved = false
        while !resolved, ContinuousClock.now < resolveDeadline {
            resolved = await state.wait(until: { $0.connected && $0.servicesResolved }, timeout: .seconds(1))
            if !resolved, let fresh = try? await client.device(at: devicePath) {
                state.apply(["Connected": .boolean(fresh.connected), "ServicesResolved": .boolean(fresh.servicesResolved)])
                resolved = fresh.connected && fresh.servicesResolved
            }
        }
        guard resolved else {
            let now = state.snapshot
            if !now.connected {
                throw Retry(error: McuMgrError(.transport, "\(device.label) disconnected right after connecting; is it rebooting, or does it refuse this central?"))
            }
            throw McuMgrError(
                .timeout, "\(device.label) connected but BlueZ did not resolve its GATT services within \(configuration.connectTimeout)")
        }
        phaseDone(weConnected ? "connected with services resolved" : "found connected with services resolved")
        device = try await client.device(at: devicePath)
        // BlueZ reads the device's PnP ID (Device Information, 0x180A) after resolving its services and
        // only then sets Modalias, which tells a BlueZ peripheral (it takes shorter writes): wait for it
        // a moment when the device has that service.
        if device.modalias == nil, device.uuids.contains(where: { $0.lowercased().hasPrefix("0000180a-") }) {
            for _ in 0..<20 where device.modalias == nil {
                try? await Task.sleep(for: .milliseconds(100))
                if let fresh = try? await client.device(at: devicePath) { device = fresh }
            }
            phaseDone(device.modalias == nil ? "no PnP ID (Device Information) read" : "PnP ID (Device Information) read")
        }
        let objects = try await client.objects()
        let candidates = objects.smpCharacteristics(of: devicePath)
        guard !candidates.isEmpty else {
            let services = objects.serviceUUIDs(of: devicePath)
            let error = McuMgrError(
                .transport,
                "\(device.label) has no SMP service (\(SMPGattUUID.service)); its services: \(services.isEmpty ? "none" : services.joined(separator: ", ")). The firmware needs CONFIG_MCUMGR_TRANSPORT_BT; if it requires encryption, pair first (`smp ble pair \(device.address?.rawValue ?? "ADDRESS")`)"
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
        let eatt = await runsEATT(device: devicePath, objects: objects)
        var lastError: McuMgrError?
        for characteristic in candidates {
            do {
                let link = try await open(
                    characteristic, device: device, weConnected: weConnected, eatt: eatt, state: state, watch: watch, handler: handler)
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

    /// `Device1.Connect`. BlueZ connects to an LE device when the kernel's scan reports one of its
    /// advertisements. While another program discovers (a desktop's Bluetooth settings, a
    /// `bluetoothctl scan on`), that scan is the discovery's, which reports each advertiser once until
    /// the scan restarts: the connection waits for bluetoothd to restart it, up to 10 s (seen on BlueZ
    /// 5.66: 3-9 s, against 40 ms with no discovery running). So when Connect has not answered after a
    /// quarter of a second and the adapter discovers, this connector restarts that scan once: it starts
    /// a discovery of its own whose filter (DuplicateData) changes the one bluetoothd merges from every
    /// program's, which bluetoothd applies by restarting the scan, and stops it when Connect answers.
    /// Once only: a device that the restarted scan misses is connected at the other discovery's own
    /// restart, as without this.
    private func connectRestartingOthersScan(_ device: BlueZDeviceInfo, adapter: BlueZAdapterInfo) async throws {
        let restart = Task { await restartOthersScan(device, adapter: adapter) }
        let result: Result<Void, any Error>
        do {
            try await client.connect(device, timeout: connectCallTimeout)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        restart.cancel()
        if await restart.value { await client.stopDiscovery(adapter: adapter) }
        try result.get()
    }

    /// The scan restart of `connectRestartingOthersScan`, a quarter of a second into the Connect call
    /// (by then BlueZ waits for the device's advertisement), unless cancelled first.
    /// - Returns: whether it started a discovery of its own (to be stopped).
    private func restartOthersScan(_ device: BlueZDeviceInfo, adapter: BlueZAdapterInfo) async -> Bool {
        guard (try? await Task.sleep(for: .milliseconds(250))) != nil, await client.isDiscovering(adapter), !Task.isCancelled
        else { return false }
        logger.debug(
            "BLE \(device.label): \(adapter.name) is discovering for another program, whose scan reports the device only when it restarts: restarting it once")
        do {
            try await client.startDiscovery(adapter: adapter, serviceUUIDs: [], duplicateData: true)
            return true
        } catch {
            logger.debug("BLE \(device.label): restarting \(adapter.name)'s scan failed: \(error)")
            return false
        }
    }

    /// A device found connected whose disconnect this tool asked BlueZ for moments ago (an earlier
    /// command that exited without waiting, or this process): that connection is about to end, and a
    /// command that took it would lose it in the middle. Waits until BlueZ reports it disconnected, at
    /// most until `requestedDisconnectGrace` after the request.
    /// - Returns: the device as BlueZ knows it now.
    func awaitRequestedDisconnect(_ device: BlueZDeviceInfo) async -> BlueZDeviceInfo {
        guard device.connected else { return device }
        var remaining = Duration.zero
        if let requested = McuMgrBleTransport.disconnectsRequested.withLockedValue({ $0[device.path] }) {
            remaining = requested + Self.requestedDisconnectGrace - .now
        } else if let address = device.address, let requested = deviceMemory?.disconnectRequested(address.rawValue) {
            let ago = Date().timeIntervalSince1970 - requested
            if ago >= 0 { remaining = Self.requestedDisconnectGrace - .seconds(ago) }
        }
        guard remaining > .zero else { return device }
        let state = DeviceStateBox()
        let watch = try? await client.connection.subscribe(
            .propertiesChanged(sender: BlueZ.service, path: device.path, interface: BlueZ.deviceInterface)
        ) { message in
            guard message.body.count >= 2, let changed = message.body[1].stringKeyedDictionary else { return }
            state.apply(changed)
        }
        defer { watch?.cancel() }
        // Read after subscribing, so that a change in between is not missed.
        var fresh = (try? await client.device(at: device.path)) ?? device
        state.apply(["Connected": .boolean(fresh.connected)])
        let started = ContinuousClock.now
        let ended = await state.wait(until: { !$0.connected }, timeout: remaining)
        logger.debug(
            "BLE \(device.label): found connected, ending as an earlier command asked; \(ended ? "disconnected" : "still connected") after \((ContinuousClock.now - started).milliseconds) ms")
        fresh = (try? await client.device(at: device.path)) ?? fresh
        return fresh
    }

    /// Why subscribing got no answer, when the device is not paired: BlueZ was pairing because the
    /// device asks for an encrypted link, and no pairing agent answered (seen on real BlueZ 5.66: with
    /// an agent that does not answer, StartNotify waits until the caller gives up). Retrying would only
    /// ask again. Nil when the device is paired (then the silence has another cause).
    private func pairingStalled(_ device: BlueZDeviceInfo) async -> McuMgrError? {
        guard let fresh = try? await client.device(at: device.path), !fresh.paired else { return nil }
        let address = device.address?.rawValue ?? "ADDRESS"
        return McuMgrError(
            .transport,
            "subscribing to the SMP notifications of \(device.label) got no answer: BlueZ is pairing with it (the device asks for an encrypted link, as Zephyr's SMP transport does unless built with CONFIG_MCUMGR_TRANSPORT_BT_PERM_RW) and no pairing agent answered. Pair first with `smp ble pair \(address)` (it asks for the passkey the device shows), or run the command again with --pair, or accept the pairing in your desktop's Bluetooth dialog"
        )
    }

    /// Whether the link runs EATT (see `BlueZEATT`): one read of the device's Server Supported
    /// Features, only when it has them.
    private func runsEATT(device: DBusObjectPath, objects: BlueZObjects) async -> Bool {
        guard let features = objects.characteristics(BlueZEATT.serverSupportedFeatures, of: device).first,
            let value = try? await client.readValue(characteristic: features.path, timeout: .seconds(3)),
            BlueZEATT.offered(serverSupportedFeatures: value)
        else { return false }
        return BlueZEATT.localBearersAllowed()
    }

    private func open(
        _ characteristic: BlueZCharacteristicInfo, device: BlueZDeviceInfo, weConnected: Bool, eatt: Bool, state: DeviceStateBox,
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
            if let notifyFD { SystemCall.close(notifyFD) }
            if let writeFD { SystemCall.close(writeFD) }
        }
        // A holder for the link, so that handlers set up before it exists can reach it.
        let holder = LinkHolder()

        do {
            // Someone holds the notifications: subscribing fails, and a StopNotify would close their socket.
            if characteristic.notifyAcquired { throw Fatal(error: Self.notificationsHeld(device)) }
            if configuration.acquire, flags.contains("notify") {
                do {
                    let acquired = try await client.acquire("AcquireNotify", characteristic: characteristic.path)
                    notifyFD = acquired.fd
                    mtu = acquired.mtu
                } catch let error as DBusError where Self.notificationsHeld(error) {
                    throw Fatal(error: Self.notificationsHeld(device))
                } catch let error as DBusError where error.name == DBusError.noReply {
                    // Subscribing writes the device's CCC descriptor; BlueZ holds the call while it
                    // pairs when the device asks for an encrypted link.
                    if let stalled = await pairingStalled(device) { throw Fatal(error: stalled, wantsPairing: true) }
                } catch {
                    // Not offered or refused: StartNotify below.
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
                // deliver every notification twice. (Not while a program holds the notifications through
                // a socket, which StopNotify would close: `notifyAcquired` above.)
                _ = try? await connection.call(
                    destination: BlueZ.service, path: characteristic.path, interface: BlueZ.gattCharacteristicInterface,
                    member: "StopNotify", timeout: .seconds(3))
                do {
                    try await client.startNotify(characteristic: characteristic.path)
                } catch let error as DBusError where Self.notificationsHeld(error) {
                    throw Fatal(error: Self.notificationsHeld(device))
                } catch let error as DBusError {
                    let mapped = BlueZClient.map(error, "subscribing to the SMP notifications of \(device.label)")
                    if Self.needsPairing(error) { throw Fatal(error: Self.pairingError(mapped, device: device), wantsPairing: true) }
                    if error.name == DBusError.noReply, let stalled = await pairingStalled(device) { throw Fatal(error: stalled, wantsPairing: true) }
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
        let writeLength = BLEFramingCodec.maximumWriteLength(attMTU: attMTU, peripheralRunsBlueZ: device.runsBlueZ)
        let link = BleLink(
            client: client, device: device, characteristic: characteristic, attMTU: attMTU, maximumWriteLength: writeLength,
            weConnected: weConnected, deviceReassembly: configuration.deviceReassembly, eatt: eatt, name: name, writeType: writeType,
            logger: logger, handler: handler)
        holder.link = link
        let path = "\(device.label) \(characteristic.path)"
        let route = "writes by \(writeFD == nil ? "WriteValue" : "socket"), notifications by \(notifyFD == nil ? "signal" : "socket")"
        do {
            let notifier = try notifyFD.map { fd in
                try PacketSocketLink(
                    readFD: fd, writeFD: nil, onPacket: { [weak link] in link?.received($0) },
                    onClose: { [weak link] end in link?.lost(end.reason ?? "the notification socket closed") })
            }
            notifyFD = nil
            let writer = try writeFD.map { fd in
                try PacketSocketLink(
                    readFD: nil, writeFD: fd, onPacket: { _ in },
                    onClose: { [weak link] end in link?.lost(end.reason ?? "the write socket closed") })
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
            throw McuMgrError(.transport, "cannot set up the link to \(path): \(error)", cause: error)
        }
        logger.debug(
            "BLE link \(name): \(device.label) characteristic \(characteristic.path), ATT MTU \(attMTU), writes of up to \(writeLength) B\(device.runsBlueZ ? " (a BlueZ peripheral)" : ""), \(route)"
        )
        return link
    }
}

extension BleConnector {
    /// BlueZ's refusal while a program holds a characteristic's notifications through AcquireNotify.
    static func notificationsHeld(_ error: DBusError) -> Bool {
        error.name == "org.bluez.Error.NotPermitted" && error.message.contains("Notify acquired")
    }

    /// The error for a device whose SMP notifications another program holds: this command waits for
    /// nothing and closes nothing of theirs. BlueZ 5.66 also reports them held, forever, after an
    /// AcquireNotify that failed on the device's side (it never answers that call and keeps its
    /// half-made socket; a StopNotify or removing the device then crashes bluetoothd).
    static func notificationsHeld(_ device: BlueZDeviceInfo) -> McuMgrError {
        McuMgrError(
            .transport,
            "another program holds the SMP notifications of \(device.label) (BlueZ: Notify acquired), for example another smp still working with it: wait until it ends, then run the command again. If no other program uses the device, BlueZ is stuck after a subscription that failed (BlueZ 5.66): restart it with `systemctl restart bluetooth`"
        )
    }

    /// A paired device that will not keep a link may have lost its bond (erased by a factory reset or
    /// new firmware) while this computer kept it: encryption with the old keys then fails at once, and
    /// BlueZ reports only that the connection ended. Said where nothing else explains the failure.
    static func withLostBondHint(_ error: McuMgrError, device: BlueZDeviceInfo) -> McuMgrError {
        guard device.paired, !error.message.contains("smp ble") else { return error }
        let address = device.address?.rawValue ?? "ADDRESS"
        return McuMgrError(
            error.kind,
            "\(error.message). This computer holds a bond with \(device.label): if the device erased its bonds (a factory reset, new firmware), remove the old one with `smp ble forget \(address)`, then pair again with `smp ble pair \(address)`")
    }

    /// The error for a device that wants pairing, with the command that pairs it.
    static func pairingError(_ mapped: McuMgrError, device: BlueZDeviceInfo) -> McuMgrError {
        if mapped.message.contains("smp ble pair ADDRESS"), let address = device.address {
            return McuMgrError(.transport, mapped.message.replacing("smp ble pair ADDRESS", with: "smp ble pair \(address)"))
        }
        guard !mapped.message.contains("smp ble pair") else { return mapped }
        return McuMgrError(
            .transport,
            "\(mapped.message); \(device.label) wants an authenticated or encrypted link (Zephyr 4.0+ requires one for SMP by default): pair first with `smp ble pair \(device.address?.rawValue ?? "ADDRESS")`, or run the command with --pair"
        )
    }
}

/// The one answer an `exchange` waits for.
final class ExchangeBox<T: Sendable>: @unchecked Sendable {
    private let lock = NIOLock()
    private var result: T??
    private var continuation: CheckedContinuation<T?, Never>?

    /// The first call wins.
    func finish(_ value: T?) {
        let waiting: CheckedContinuation<T?, Never>? = lock.withLock {
            guard result == nil else { return nil }
            result = .some(value)
            defer { continuation = nil }
            return continuation
        }
        waiting?.resume(returning: value)
    }

    func value() async -> T? {
        await withCheckedContinuation { continuation in
            let done: T?? = lock.withLock {
                if let result { return result }
                self.continuation = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
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

extension McuMgrBleTransport: McuMgrLinkAdvising {
    /// Over Bluetooth a request the device could not parse was written in pieces to a device that
    /// takes every write as a whole request: what was remembered about it is wrong, so it is
    /// forgotten (the next connection asks again).
    public func hint(for returnCode: McuMgrReturnCode) -> String? {
        guard returnCode.rawValue == 9 else { return nil }
        if let link = lock.withLock({ link }) {
            var profile = link.profile
            if profile.reassembles != false {
                profile.reassembles = false
                link.profile = profile
                deviceMemory?.remember(profile, for: link.device.address?.rawValue ?? link.device.path.rawValue)
            }
        }
        return "the device took a request written in pieces as a whole one: its firmware has no SMP reassembly (CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY); the next command sends single writes, or give reassembly=off in the device URI"
    }

    /// Notifications that do not join into packets were lost, cut short or reordered on the way.
    public var unusableDataHint: String? {
        if lock.withLock({ link?.profile.piecesArriveOutOfOrder }) == true {
            return "answers longer than one notification arrive out of order on this link, as requests in pieces did (BlueZ spreads them over its EATT bearers); keep BlueZ to one ATT bearer: `Channels = 1` under [GATT] in /etc/bluetooth/main.conf, then `systemctl restart bluetooth`"
        }
        return "the answer's notifications arrived cut short or out of order (a device that sends them faster than the link takes them, or over several EATT bearers at once); retry, and if it persists try acquire=off or a lower mtu= in the device URI"
    }

    /// The link is up and the writes went through, yet no notification came: the device's SMP server,
    /// or BlueZ's copy of the device's services after a firmware change (BlueZ keeps a device's GATT
    /// table; one without the Database Hash characteristic cannot tell it that the table changed).
    public var noAnswerHint: String? {
        let device = lock.withLock { link?.device }
        var address = device?.address?.rawValue ?? "ADDRESS"
        if case .address(let target) = configuration.target { address = target.rawValue }
        let pairAgain = device?.paired == true ? " (it forgets the bond too: pair again with `smp ble pair \(address)`)" : ""
        return "The link is up and the requests went out, but no notification came back on the SMP characteristic: the device's SMP server may be busy (a flash erase: raise --timeout) or stuck (reset the device); after a firmware change, BlueZ may still use the device's old services: `smp ble forget \(address)`\(pairAgain), then run the command again."
    }
}
