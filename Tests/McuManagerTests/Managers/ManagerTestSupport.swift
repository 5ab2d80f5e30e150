import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import TestSupport

/// A thread-safe box for test bookkeeping.
final class ManagerTestBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withValue<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
    var current: Value { withValue { $0 } }
}

/// What the tap does with a request on its way to the device.
enum ManagerTapAction {
    /// Send these bytes (possibly altered).
    case forward([UInt8])
    /// Lose the request.
    case drop
    /// The device took the request, but the link lost its answer and noticed (as a serial link discards a
    /// frame whose CRC fails): the client hears of the loss at once (`answerLost`: the request is resent),
    /// whatever the time, instead of after a resend timeout that a loaded machine may also reach with an
    /// answer that is only late.
    case loseAnswer
    /// Answer it here with this CBOR body; the device never sees it.
    case reply(CBOR)
    /// Answer it here with these payload bytes, CBOR or not (an answer the link garbled).
    case replyPayload([UInt8])
    /// Fail the link, as if the device vanished.
    case closeLink
}

/// Wraps a transport: records packets both ways, lets a test alter, drop or answer requests, and
/// tracks how many requests were in flight at once.
final class ManagerTapTransport: McuMgrTransport, McuMgrLinkAdvising, @unchecked Sendable {
    let inner: any McuMgrTransport
    /// What the link advises when data arrived unusable (`McuMgrLinkAdvising`); nil by default.
    let unusableDataAdvice = ManagerTestBox<String?>(nil)
    private let state = ManagerTestBox(TapState())
    /// Decides per request; nil forwards unchanged.
    let rule = ManagerTestBox<(@Sendable (SMPPacket) -> ManagerTapAction)?>(nil)
    /// Whether the link says the pieces of a frame may arrive out of order (as Bluetooth LE over EATT).
    let piecesArriveOutOfOrder = ManagerTestBox(false)
    /// Answers held back (see `holdAnswers(to:untilInFlight:)`).
    private let gate = ManagerTestBox<
        (command: (McuMgrGroup, McuMgrCommand)?, inFlight: Int, passing: Int, held: [McuMgrTransportEvent], timed: Bool)
    >((nil, 0, 0, [], true))

    struct TapState {
        var sent: [SMPPacket] = []
        var received: [SMPPacket] = []
        var inFlight = 0
        var maximumInFlight = 0
        var handler: (@Sendable (McuMgrTransportEvent) -> Void)?
    }

    private let mtuOverride: Int?

    /// - Parameter mtu: the link's MTU when not the inner transport's (a link that carries more than the
    ///   device takes).
    init(_ inner: any McuMgrTransport, mtu: Int? = nil) {
        self.inner = inner
        mtuOverride = mtu
    }

    var name: String { inner.name }
    var linkLimits: LinkLimits {
        var limits = inner.linkLimits
        if let mtuOverride { limits.maximumPacketSize = mtuOverride }
        limits.piecesArriveOutOfOrder = piecesArriveOutOfOrder.current
        return limits
    }

    var sent: [SMPPacket] { state.current.sent }
    var received: [SMPPacket] { state.current.received }
    var maximumInFlight: Int { state.current.maximumInFlight }

    func resetCounters() {
        state.withValue {
            $0.sent = []
            $0.received = []
            $0.maximumInFlight = 0
        }
    }

    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        state.withValue { $0.handler = handler }
        try await inner.open { [self] event in
            if case .packet(let bytes) = event, let header = try? SMPPacket(decoding: bytes).header {
                let first = gate.withValue { gate -> Bool? in
                    guard let command = gate.command, command == (header.group, header.command) else { return nil }
                    if gate.passing > 0 {
                        gate.passing -= 1
                        return nil
                    }
                    gate.held.append(event)
                    return gate.held.count == 1 && gate.timed
                }
                if let first {
                    if first { DispatchQueue.global().asyncAfter(deadline: .now() + 5) { [self] in releaseHeld() } }
                    return
                }
            }
            deliver(event)
        }
    }

    /// Holds back the answers to `command`, after the first `passing` of them, until `count` requests are
    /// in flight, once (or for at most 5 s, so that a client that never sends that many fails its test
    /// instead of hanging): a test of a window then does not depend on the client sending its next request
    /// before the device's answer to the one before comes back, which a loaded machine can reverse.
    func holdAnswers(to command: (McuMgrGroup, McuMgrCommand), passing: Int = 0, untilInFlight count: Int) {
        gate.withValue { $0 = (command, count, passing, [], true) }
    }

    /// Holds back the answers to `command` until `releaseHeldAnswers()`: a test that sees something happen
    /// while a request is unanswered. (It must release them, or its client waits out its timeout.)
    func holdAnswersUntilReleased(to command: (McuMgrGroup, McuMgrCommand)) {
        gate.withValue { $0 = (command, .max, 0, [], false) }
    }

    /// Delivers the answers held back, in order, and holds no more.
    func releaseHeldAnswers() { releaseHeld() }

    /// Hands an event from the device to the client, counting answers.
    private func deliver(_ event: McuMgrTransportEvent) {
        if case .packet(let bytes) = event, let packet = try? SMPPacket(decoding: bytes) {
            state.withValue {
                $0.received.append(packet)
                $0.inFlight = max(0, $0.inFlight - 1)
            }
        }
        state.current.handler?(event)
    }

    /// Ends holding answers back and delivers the held ones, in order.
    private func releaseHeld() {
        let events = gate.withValue { gate in
            defer { gate = (nil, 0, 0, [], true) }
            return gate.held
        }
        for event in events { deliver(event) }
    }

    func send(_ bytes: [UInt8]) throws {
        guard let packet = try? SMPPacket(decoding: bytes) else { return try inner.send(bytes) }
        let action = rule.current?(packet) ?? .forward(bytes)
        switch action {
        case .forward(let out):
            let inFlight = state.withValue {
                $0.sent.append((try? SMPPacket(decoding: out)) ?? packet)
                $0.inFlight += 1
                $0.maximumInFlight = max($0.maximumInFlight, $0.inFlight)
                return $0.inFlight
            }
            try inner.send(out)
            if gate.withValue({ $0.command != nil && inFlight >= $0.inFlight }) {
                DispatchQueue.global().async { [self] in releaseHeld() }
            }
        case .drop:
            state.withValue { $0.sent.append(packet) }
        case .loseAnswer:
            state.withValue { $0.sent.append(packet) }
            let handler = state.current.handler
            DispatchQueue.global().async { handler?(.dropped(.crcMismatch(expected: 0, actual: 1))) }
        case .reply(let body):
            var payload: [UInt8] = []
            CBORWriter.write(body, into: &payload)
            send(packet, answer: payload)
        case .replyPayload(let payload):
            send(packet, answer: payload)
        case .closeLink:
            let handler = state.current.handler
            DispatchQueue.global().async {
                handler?(.closed(McuMgrError(.transport, "test: the link went away")))
            }
        }
    }

    /// Answers `packet` here with `payload`.
    private func send(_ packet: SMPPacket, answer payload: [UInt8]) {
        state.withValue { $0.sent.append(packet) }
        let header = SMPHeader(
            version: packet.header.version, operation: packet.header.operation.response,
            length: UInt16(payload.count), group: packet.header.group, sequence: packet.header.sequence,
            command: packet.header.command)
        let response = SMPPacket(header: header, payload: payload).bytes
        let handler = state.current.handler
        DispatchQueue.global().async { handler?(.packet(response)) }
    }

    func hint(for returnCode: McuMgrReturnCode) -> String? { nil }
    var unusableDataHint: String? { unusableDataAdvice.current }

    func close() async { await inner.close() }
}

/// A simulated device, its in-memory link, a tap on it, and a client.
struct ManagerRig {
    let device: SimulatedDevice
    let link: InMemorySimulatorTransport
    let tap: ManagerTapTransport
    let client: McuMgrClient

    init(
        timeout: Duration = .seconds(10), parametersMemory: DeviceParametersMemory? = nil,
        _ configure: (inout SimulatorConfiguration) -> Void = { _ in }
    ) {
        var configuration = SimulatorConfiguration()
        // Transfers of up to megabytes: no 16 KiB LittleFS here.
        configuration.fileSystemBlockCount = nil
        configure(&configuration)
        self.init(device: SimulatedDevice(configuration: configuration), timeout: timeout, parametersMemory: parametersMemory)
    }

    /// A new connection (link, tap and client) to `device`: what a second run of a command gets.
    init(
        device: SimulatedDevice, timeout: Duration = .seconds(10), parametersMemory: DeviceParametersMemory? = nil,
        mtu: Int? = nil
    ) {
        self.device = device
        link = InMemorySimulatorTransport(device: device)
        tap = ManagerTapTransport(link, mtu: mtu)
        client = McuMgrClient(transport: tap, configuration: .init(timeout: timeout, parametersMemory: parametersMemory))
    }

    /// Waits (at most 30 s) until the device has finished rebooting.
    func waitForReboot() async throws {
        guard await waitUntil(timeout: .seconds(30), { !device.isRebooting() }) else {
            throw McuMgrError(.timeout, "the simulated device was still rebooting after 30 s")
        }
    }
}

/// Lets a progress callback cancel the task it reports for.
final class ManagerTestCanceller: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelAction: (@Sendable () -> Void)?
    private var requested = false

    func attach<T>(_ task: Task<T, any Error>) {
        lock.lock()
        cancelAction = { task.cancel() }
        let now = requested
        lock.unlock()
        if now { task.cancel() }
    }

    func cancel() {
        lock.lock()
        requested = true
        let action = cancelAction
        lock.unlock()
        action?()
    }
}

/// The CBOR body of a packet.
func smpBody(_ packet: SMPPacket) -> CBOR {
    (try? CBOR(decoding: packet.payload)) ?? .map([])
}

/// Deterministic pseudo-random bytes.
func managerTestBytes(_ count: Int, seed: UInt64 = 0x1234_5678) -> [UInt8] {
    var state = seed
    var out = [UInt8]()
    out.reserveCapacity(count)
    for _ in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return out
}

/// A fresh temporary directory.
func makeManagerTestDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("mcumgr-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
