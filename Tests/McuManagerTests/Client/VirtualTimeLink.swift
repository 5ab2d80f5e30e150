import Foundation
import McuManager
import McuMgrCore
import TestSupport

/// A link in virtual time: records each packet the client writes with the manual clock's reading, and
/// answers when the test (or its `responder`) says so. Nothing on it reads the machine's clock.
final class VirtualTimeLink: McuMgrTransport, @unchecked Sendable {
    /// A packet the client wrote, and when (virtual time since the start).
    struct Write: Sendable {
        var at: Duration
        var packet: SMPPacket
    }

    let clock: ManualClock
    let name = "virtual"
    /// Packets of up to the `mtu` given, the session given, frames in flight as the device's buffers allow.
    let linkLimits: LinkLimits
    /// Written packets as they come, for the test to await.
    let writes: AsyncStream<Write>
    private let sink: AsyncStream<Write>.Continuation
    private let lock = NSLock()
    private var handler: (@Sendable (McuMgrTransportEvent) -> Void)?
    private var written: [Write] = []
    /// Answers a request at once (its CBOR body); nil: no answer (lost, or left to the test).
    private let responder: (@Sendable (SMPPacket) -> CBOR?)?

    init(
        clock: ManualClock, mtu: Int = 512, session: SMPSessionConfiguration,
        responder: (@Sendable (SMPPacket) -> CBOR?)? = nil
    ) {
        self.clock = clock
        self.linkLimits = LinkLimits(maximumPacketSize: mtu, framesInFlight: 255, session: session)
        self.responder = responder
        (writes, sink) = AsyncStream.makeStream(of: Write.self)
    }

    /// Everything written so far.
    var log: [Write] { lock.withLock { written } }

    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        lock.withLock { self.handler = handler }
    }

    func send(_ bytes: [UInt8]) throws {
        let packet = try SMPPacket(decoding: bytes)
        let write = Write(at: clock.elapsed, packet: packet)
        lock.withLock { written.append(write) }
        sink.yield(write)
        if let body = responder?(packet) { answer(packet, with: body) }
    }

    /// Delivers the device's answer to `request`.
    func answer(_ request: SMPPacket, with body: CBOR) {
        var payload: [UInt8] = []
        CBORWriter.write(body, into: &payload)
        let header = SMPHeader(
            version: request.header.version, operation: request.header.operation.response,
            length: UInt16(payload.count), group: request.header.group, sequence: request.header.sequence,
            command: request.header.command)
        let handler = lock.withLock { self.handler }
        handler?(.packet(SMPPacket(header: header, payload: payload).bytes))
    }

    func close() async {
        lock.withLock { handler = nil }
    }
}
