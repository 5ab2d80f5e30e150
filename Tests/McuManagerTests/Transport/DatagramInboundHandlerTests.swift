import Foundation
import McuManager
import McuMgrCore
@testable import McuMgrUDP
import NIOCore
import NIOEmbedded
import Testing
import TestSupport

/// The UDP transport's inbound handler in an `EmbeddedChannel`: one packet per datagram from the
/// device's port, others ignored, bad datagrams reported as drops, socket errors as a closed link.
@Suite("UDP datagram inbound handler")
struct DatagramInboundHandlerTests {
    static let name = "udp://127.0.0.1:1337"
    static let device = try! SocketAddress(ipAddress: "127.0.0.1", port: 1337)

    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        SMPHeader(
            operation: .writeResponse, length: UInt16(payloadSize), group: .image, sequence: sequence,
            command: McuMgrCommand(rawValue: 1)
        ).bytes + random.bytes(payloadSize)
    }

    static func makeChannel(_ recorder: TransportEventRecorder) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(
            handler: DatagramInboundHandler(remote: device, name: name, handler: recorder.handler))
        try channel.connect(to: device).wait()
        return channel
    }

    static func datagram(_ bytes: [UInt8], from address: SocketAddress = device) -> AddressedEnvelope<ByteBuffer> {
        AddressedEnvelope(remoteAddress: address, data: ByteBuffer(bytes: bytes))
    }

    @Test func eachDatagramFromTheDeviceIsOnePacketAndBadOnesAreDrops() throws {
        var random = SplitMix64(seed: 0x55)
        let a = Self.packet(0, sequence: 1, using: &random), b = Self.packet(1444, sequence: 2, using: &random)
        let c = Self.packet(40, sequence: 3, using: &random)
        // The same datagrams, checked over the verifier's sequence rules too.
        FramingCodecVerifier.verifyDatagrams(
            { DatagramCodec() }, datagrams: [a, Array(b.prefix(7)), b, Array(c.dropLast()), a + c, c],
            expected: [
                .packet(a), .dropped(.invalidHeader(length: 7)), .packet(b), .dropped(.truncatedPacket(announced: 40, received: 39)),
                .dropped(.lengthOverrun(announced: 0, received: 48)), .packet(c),
            ])
        let recorder = TransportEventRecorder()
        let channel = try Self.makeChannel(recorder)
        for bytes in [a, Array(b.prefix(7)), b, Array(c.dropLast()), a + c, c, []] {
            try channel.writeInbound(Self.datagram(bytes))
        }
        #expect(
            recorder.events == [
                .packet(a), .dropped(.invalidHeader(length: 7)), .packet(b), .dropped(.truncatedPacket(announced: 40, received: 39)),
                .dropped(.lengthOverrun(announced: 0, received: 48)), .packet(c), .dropped(.invalidHeader(length: 0)),
            ])
        #expect(try channel.readInbound(as: AddressedEnvelope<ByteBuffer>.self) == nil, "nothing passes on")
        #expect(try channel.finish().isClean)
        #expect(recorder.events.count == 7, "a close we make reports nothing: the transport closed it")
    }

    @Test func datagramsFromAnotherPortAreIgnored() throws {
        var random = SplitMix64(seed: 0x66)
        let packet = Self.packet(10, sequence: 4, using: &random)
        let recorder = TransportEventRecorder()
        let channel = try Self.makeChannel(recorder)
        try channel.writeInbound(Self.datagram(packet, from: try SocketAddress(ipAddress: "127.0.0.1", port: 1338)))
        try channel.writeInbound(Self.datagram(random.bytes(3), from: try SocketAddress(ipAddress: "10.0.0.9", port: 5683)))
        #expect(recorder.events == [])
        // A device reached as "localhost" may answer from ::1: the same port is the device.
        try channel.writeInbound(Self.datagram(packet, from: try SocketAddress(ipAddress: "::1", port: 1337)))
        #expect(recorder.events == [.packet(packet)])
        _ = try channel.finish()
    }

    @Test func oversizedAndRandomDatagramsNeverCrash() throws {
        var random = SplitMix64(seed: 0x77)
        let recorder = TransportEventRecorder()
        let channel = try Self.makeChannel(recorder)
        // A 64 KiB datagram announcing the largest payload, then random ones, then a good packet.
        let largest = Self.packet(65535, sequence: 0, using: &random)
        try channel.writeInbound(Self.datagram(largest))
        for _ in 0..<500 { try channel.writeInbound(Self.datagram(random.bytes(Int(random.next(below: 64))))) }
        let good = Self.packet(3, sequence: 1, using: &random)
        try channel.writeInbound(Self.datagram(good))
        let events = recorder.events
        #expect(events.count == 502, "one event per datagram")
        #expect(events.first == .packet(largest))
        #expect(events.last == .packet(good))
        #expect(channel.isActive)
        _ = try channel.finish()
    }

    @Test func anICMPRefusalClosesTheLinkWithAHint() throws {
        let recorder = TransportEventRecorder()
        let channel = try Self.makeChannel(recorder)
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNREFUSED, reason: "recvmsg"))
        #expect(!channel.isActive)
        #expect(
            recorder.events == [
                .closed(
                    .transport,
                    "udp://127.0.0.1:1337 refused the request (ICMP port unreachable): nothing listens on that port; check the address and port (default 1337) and that the device runs SMP over UDP"
                )
            ])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test func anotherSocketErrorClosesTheLinkNamingIt() throws {
        let recorder = TransportEventRecorder()
        let channel = try Self.makeChannel(recorder)
        let error = IOError(errnoCode: ENETUNREACH, reason: "recvmsg")
        channel.pipeline.fireErrorCaught(error)
        #expect(!channel.isActive)
        #expect(recorder.events == [.closed(.transport, "UDP socket error for udp://127.0.0.1:1337: \(error)")])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }
}
