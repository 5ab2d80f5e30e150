import Foundation
import Logging
import McuManager
import McuMgrCore
@testable import McuMgrSerial
import NIOCore
import NIOEmbedded
import Testing
import TestSupport

/// The RFC 2217 handler with the link handler behind it, as `openRemote` builds them, in an
/// `EmbeddedChannel`: the negotiation with ser2net's recorded bytes in every split, the Telnet on the
/// wire (checked by the shared verifier), the negotiation timeout in virtual time, refusals, closes and
/// errors during and after the negotiation, and bad input.
@Suite("RFC 2217 handler")
struct RFC2217HandlerTests {
    static let uri = "rfc2217://ser2net.example:3001"
    static let timeout = TimeAmount.seconds(5)
    static let start: [UInt8] = [255, 251, 0, 255, 251, 3, 255, 251, 44, 255, 253, 0, 255, 253, 3]
    static let startCommands: [[UInt8]] = [[255, 251, 0], [255, 251, 3], [255, 251, 44], [255, 253, 0], [255, 253, 3]]
    /// The settings for 115200 8N1 without flow control, one subnegotiation each.
    static let settingsCommands: [[UInt8]] = [
        [255, 250, 44, 1, 0, 1, 194, 0, 255, 240], [255, 250, 44, 2, 8, 255, 240], [255, 250, 44, 3, 1, 255, 240],
        [255, 250, 44, 4, 1, 255, 240], [255, 250, 44, 5, 1, 255, 240],
    ]
    static let closedByServer =
        "connection to rfc2217://ser2net.example:3001 closed by the server: the port server (e.g. ser2net) stopped, lost its serial port or gave it to another client; check it and retry"
    static let closedDuringNegotiation =
        "rfc2217://ser2net.example:3001 closed the connection during RFC 2217 negotiation: the port server may be busy with another client or unable to open its serial port"
    static let refused =
        "rfc2217://ser2net.example:3001 refused the RFC 2217 com port option: it is no telnet(rfc2217) accepter (use tcp:// for a raw port, or add telnet(rfc2217) to its ser2net accepter)"

    /// How the negotiation ended, once it did.
    final class Negotiation: @unchecked Sendable {
        private let lock = NSLock()
        private var outcome: Result<Int?, McuMgrError>?
        var result: Result<Int?, McuMgrError>? { lock.withLock { outcome } }
        func settle(_ result: Result<Int?, any Error>) {
            lock.withLock { outcome = result.mapError { $0 as? McuMgrError ?? McuMgrError(.transport, "\($0)") } }
        }
        var baudRate: Int?? { if case .success(let baud) = result { baud } else { nil } }
        var failure: String? { if case .failure(let error) = result { error.message } else { nil } }
    }

    /// An RFC 2217 handler and a raw-framing link handler on a fresh channel, connected (so the opening
    /// negotiation is already written and the timer set).
    struct Rig {
        let channel: EmbeddedChannel
        let negotiation = Negotiation()
        let events = TransportEventRecorder()
        let link: LinkInboundHandler

        init(settings: RFC2217Codec.PortSettings = .init(), timeout: TimeAmount = RFC2217HandlerTests.timeout) throws {
            let loop = EmbeddedEventLoop()
            let promise = loop.makePromise(of: Int?.self)
            promise.futureResult.whenComplete { [negotiation] in negotiation.settle($0) }
            link = LinkInboundHandler(
                codec: RawSerialCodec(), name: RFC2217HandlerTests.uri, messages: .remote(RFC2217HandlerTests.uri),
                handler: events.handler)
            let handler = RFC2217Handler(
                settings: settings, uri: RFC2217HandlerTests.uri, timeout: timeout, negotiated: promise, link: link,
                logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
            channel = EmbeddedChannel(handlers: [handler, link], loop: loop)
            try channel.connect(to: SocketAddress(ipAddress: "192.0.2.1", port: 3001)).wait()
        }

        /// Each chunk as one read from the server.
        func receive(_ chunks: [[UInt8]]) throws {
            for chunk in chunks { try channel.writeInbound(ByteBuffer(bytes: chunk)) }
        }

        /// What we sent since the last call, as one byte stream.
        func sent() throws -> [UInt8] {
            var bytes: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += Array(buffer.readableBytesView) }
            return bytes
        }

        /// `bytes` written by the framing above, as the transport's `send` does.
        func write(_ bytes: [UInt8]) throws {
            try channel.writeOutbound(ByteBuffer(bytes: bytes))
        }
    }

    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        SMPHeader(
            operation: .writeResponse, length: UInt16(payloadSize), group: .image, sequence: sequence,
            command: McuMgrCommand(rawValue: 1)
        ).bytes + random.bytes(payloadSize)
    }

    /// What a binary-mode server sends for `data`.
    static func serverEncode(_ data: [UInt8]) -> [UInt8] { data.flatMap { $0 == 255 ? [255, 255] : [$0] } }

    /// What one run shows, for comparing runs.
    struct Observed: Equatable, CustomStringConvertible {
        var sent: [UInt8]
        var baudRate: Int??
        var failure: String?
        var events: [SeenEvent]
        var description: String {
            "sent \(sent.count) bytes, baud \(String(describing: baudRate)), failure \(failure ?? "none"), events \(events)"
        }
    }

    @Test func ser2netsNegotiationAndDataInEverySplit() throws {
        var random = SplitMix64(seed: 0x2217)
        // Packets full of 0xFF, which the server doubles.
        let packets = [
            Self.packet(300, sequence: 1, using: &random), Self.packet(0, sequence: 2, using: &random),
            SMPHeader(operation: .readResponse, length: 4, group: .os, sequence: 255, command: McuMgrCommand(rawValue: 0)).bytes
                + [255, 255, 255, 255],
        ]
        let input = RFC2217CodecTests.ser2netGreeting + Self.serverEncode(packets[0]) + RFC2217CodecTests.ser2netAcks
            + [255, 241] + Self.serverEncode(packets[1] + packets[2])
        let expected = Observed(
            sent: Self.start + [255, 254, 1] + Self.settingsCommands.flatMap { $0 }, baudRate: .some(115_200), failure: nil,
            events: packets.map { .packet($0) })
        try FramingCodecVerifier.verifySplits(input: input, expected: expected) { chunks in
            let rig = try Rig()
            try rig.receive(chunks)
            let observed = Observed(
                sent: try rig.sent(), baudRate: rig.negotiation.baudRate, failure: rig.negotiation.failure,
                events: rig.events.events)
            #expect(rig.channel.isActive)
            _ = try rig.channel.finish()
            return observed
        }
    }

    @Test func whatGoesOutIsWellFormedTelnetCarryingTheDataExactly() throws {
        var random = SplitMix64(seed: 0x0FF)
        let rig = try Rig()
        #expect(try rig.sent() == Self.start, "the opening negotiation goes out when connected")
        try rig.receive([RFC2217CodecTests.ser2netGreeting, RFC2217CodecTests.ser2netAcks])
        #expect(rig.negotiation.baudRate == .some(115_200))
        // Raw framing: binary packets with every byte value, 0xFF and CR among them.
        let packets = (0..<20).map { Self.packet(Int(random.next(below: 600)), sequence: UInt8($0), using: &random) }
            + [SMPHeader(operation: .write, length: 3, group: .os, sequence: 0xFF, command: McuMgrCommand(rawValue: 0)).bytes + [255, 13, 255]]
        for packet in packets { try rig.write(packet) }
        FramingCodecVerifier.verifyTelnet(
            try rig.sent(), carrying: packets.flatMap { $0 }, binary: true, commands: [[255, 254, 1]] + Self.settingsCommands)
        _ = try rig.channel.finish()
    }

    @Test func whenTheServerRefusesBinaryCRGoesOutAsCRNUL() throws {
        let rig = try Rig()
        // ser2net's greeting, but WONT and DONT BINARY.
        try rig.receive([[255, 251, 3, 255, 253, 3, 255, 252, 0, 255, 254, 0, 255, 253, 44]])
        try rig.receive([RFC2217CodecTests.ser2netAcks])
        #expect(rig.negotiation.baudRate == .some(115_200))
        let data: [UInt8] = [0x06, 0x09] + Array("AB\rCD".utf8) + [0x0D, 0x0A, 0xFF, 0x0D]
        try rig.write(data)
        let wire = try rig.sent()
        FramingCodecVerifier.verifyTelnet(wire, carrying: data, binary: false, commands: Self.startCommands + Self.settingsCommands)
        #expect(wire.suffix(15) == [0x06, 0x09, 0x41, 0x42, 0x0D, 0x00, 0x43, 0x44, 0x0D, 0x00, 0x0A, 0xFF, 0xFF, 0x0D, 0x00])
        // And a CR NUL from the server is a CR to the framing.
        try rig.receive([[0x0A, 0x00, 0x00, 0x02, 0x00, 0x00, 0x01, 0x00, 0x0D, 0x00, 0x0D]])
        #expect(rig.events.events == [.packet([0x0A, 0x00, 0x00, 0x02, 0x00, 0x00, 0x01, 0x00, 0x0D, 0x0D])])
        _ = try rig.channel.finish()
    }

    @Test func theNegotiationTimesOutAtExactlyItsTimeout() throws {
        let rig = try Rig()
        #expect(try rig.sent() == Self.start)
        // The greeting alone: the settings go out, their acknowledgements never come.
        try rig.receive([RFC2217CodecTests.ser2netGreeting])
        rig.channel.embeddedEventLoop.advanceTime(by: Self.timeout - .nanoseconds(1))
        #expect(rig.negotiation.result == nil)
        #expect(rig.channel.isActive)
        rig.channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(
            rig.negotiation.failure
                == "rfc2217://ser2net.example:3001 did not complete RFC 2217 negotiation within 5000 ms; is it a raw TCP port (then use tcp://) or not a telnet(rfc2217) accepter?"
        )
        #expect(!rig.channel.isActive, "the connection is closed")
        #expect(rig.events.events == [.closed(.transport, Self.closedByServer)])
        _ = try rig.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aNegotiationThatCompletesInTimeStopsTheTimer() throws {
        let rig = try Rig(timeout: .milliseconds(1500))
        try rig.receive([RFC2217CodecTests.ser2netGreeting])
        rig.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1500) - .nanoseconds(1))
        try rig.receive([RFC2217CodecTests.ser2netAcks])
        #expect(rig.negotiation.baudRate == .some(115_200))
        rig.channel.embeddedEventLoop.advanceTime(by: .hours(1))
        #expect(rig.channel.isActive)
        #expect(rig.negotiation.baudRate == .some(115_200))
        #expect(rig.events.events == [])
        _ = try rig.channel.finish()
        #expect(rig.events.events == [.closed(.transport, Self.closedByServer)])
    }

    @Test func theBaudRateTheServerSetIsTheOneReported() throws {
        let rig = try Rig(settings: .init(baudRate: 1_000_000))
        try rig.receive([RFC2217CodecTests.ser2netGreeting])
        // It acknowledges 115200 for our 1000000.
        try rig.receive([RFC2217CodecTests.ser2netAcks])
        #expect(rig.negotiation.baudRate == .some(115_200))
        _ = try rig.channel.finish()
    }

    @Test func aRefusedComPortFailsTheNegotiation() throws {
        let rig = try Rig()
        try rig.receive([[255, 251, 3, 255, 253, 3, 255, 254, 44]])
        #expect(rig.negotiation.failure == Self.refused)
        // The transport closes it (openRemote); the link reports the close.
        _ = try rig.channel.finish()
        #expect(rig.events.events == [.closed(.transport, Self.closedByServer)])
    }

    @Test func aComPortWithdrawnAfterTheNegotiationClosesTheLinkWithTheReason() throws {
        let rig = try Rig()
        try rig.receive([RFC2217CodecTests.ser2netGreeting + RFC2217CodecTests.ser2netAcks])
        #expect(rig.negotiation.baudRate == .some(115_200))
        _ = try rig.sent()
        try rig.receive([[255, 254, 44]])
        #expect(try rig.sent() == [255, 252, 44], "answered WONT")
        #expect(!rig.channel.isActive)
        #expect(rig.events.events == [.closed(.transport, Self.refused)])
        _ = try rig.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func aCloseDuringTheNegotiationFailsIt() throws {
        // Cut anywhere in the greeting and acknowledgements: the close fails the negotiation.
        let stream = RFC2217CodecTests.ser2netGreeting + RFC2217CodecTests.ser2netAcks
        for cut in [0, 1, 5, RFC2217CodecTests.ser2netGreeting.count, stream.count - 1] {
            let rig = try Rig()
            try rig.receive([Array(stream.prefix(cut))])
            #expect(rig.negotiation.result == nil)
            _ = try rig.channel.finish()
            #expect(rig.negotiation.failure == Self.closedDuringNegotiation, "cut at \(cut)")
            #expect(rig.events.events == [.closed(.transport, Self.closedByServer)])
        }
    }

    @Test func aResetDuringTheNegotiationFailsItAsAClose() throws {
        let rig = try Rig()
        rig.channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        #expect(rig.negotiation.failure == Self.closedDuringNegotiation)
        #expect(!rig.channel.isActive, "the link handler closes the channel")
        #expect(rig.events.events == [.closed(.transport, Self.closedByServer)])
        _ = try rig.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func anotherErrorDuringTheNegotiationIsNamed() throws {
        let rig = try Rig()
        let error = IOError(errnoCode: EHOSTUNREACH, reason: "read")
        rig.channel.pipeline.fireErrorCaught(error)
        #expect(rig.negotiation.failure == "connection to rfc2217://ser2net.example:3001 failed during RFC 2217 negotiation: \(error)")
        #expect(
            rig.events.events == [
                .closed(
                    .transport,
                    "connection to rfc2217://ser2net.example:3001 failed (\(error)): the port server or the network went away; check it and retry"
                )
            ])
        _ = try rig.channel.finish(acceptAlreadyClosed: true)
    }

    @Test func anOverlongSubnegotiationAndNoiseNeitherTrapNorHang() throws {
        var random = SplitMix64(seed: 0xBAD)
        let packet = Self.packet(40, sequence: 7, using: &random)
        // A subnegotiation of 100 KB that never ends, cut by IAC SE at last; then a packet.
        let overlong = [255, 250, 44, 106] + [UInt8](repeating: 0x20, count: 100_000) + [255, 240]
        let input = RFC2217CodecTests.ser2netGreeting + RFC2217CodecTests.ser2netAcks + overlong + Self.serverEncode(packet)
        let expected = Observed(
            sent: Self.start + [255, 254, 1] + Self.settingsCommands.flatMap { $0 }, baudRate: .some(115_200), failure: nil,
            events: [.packet(packet)])
        try FramingCodecVerifier.verifySplits(input: input, expected: expected, randomSplits: 5, byteByByte: false) { chunks in
            let rig = try Rig()
            try rig.receive(chunks)
            let observed = Observed(
                sent: try rig.sent(), baudRate: rig.negotiation.baudRate, failure: rig.negotiation.failure,
                events: rig.events.events)
            _ = try rig.channel.finish()
            return observed
        }
        // Random bytes, a third of them IAC, after the negotiation (no byte 44: a DONT COM-PORT would
        // end the link): every read is handled, the link stays up, and escaped data still comes through.
        let rig = try Rig()
        try rig.receive([RFC2217CodecTests.ser2netGreeting + RFC2217CodecTests.ser2netAcks])
        for _ in 0..<300 {
            let noise = (0..<Int(random.next(below: 64))).map { _ in
                let r = random.next()
                let byte = r % 3 == 0 ? UInt8(255) : UInt8(truncatingIfNeeded: r >> 8)
                return byte == 44 ? 45 : byte
            }
            try rig.receive([noise])
        }
        #expect(rig.negotiation.baudRate == .some(115_200))
        #expect(rig.channel.isActive)
        _ = try rig.channel.finish()
        #expect(rig.events.events.last == .closed(.transport, Self.closedByServer))
    }
}
