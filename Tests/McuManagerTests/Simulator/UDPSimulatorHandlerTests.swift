import Foundation
import McuMgrCore
@testable import McuMgrSimulator
import NIOCore
import NIOEmbedded
import Testing
import TestSupport

/// The simulator's UDP handler (behind `smp-sim --udp`) in an `EmbeddedChannel`, in virtual time: each
/// datagram answered to its sender, latency to the nanosecond, Zephyr's 1500-byte receive buffer, and
/// its two-buffer receive queue answering every other request of a burst on the 10 ms tick.
@Suite("Simulator UDP handler")
struct UDPSimulatorHandlerTests {
    static let client = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_000)

    static func echo(_ text: String, sequence: UInt8) -> [UInt8] {
        smpRequest(.write, group: .os, command: 0, body: .textMap(["d": .text(text)]), sequence: sequence)
    }

    static func answer(_ request: [UInt8]) -> [UInt8] { SimulatedDevice().handleUnlessRebooting(request)! }

    static func makeChannel(latency: Duration = .zero, receiveQueue: UDPReceiveQueue? = nil) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(
            handler: UDPSimulatorHandler(device: SimulatedDevice(), latency: latency, receiveQueue: receiveQueue))
        try channel.bind(to: SocketAddress(ipAddress: "127.0.0.1", port: 1337)).wait()
        try channel.connect(to: client).wait()
        return channel
    }

    static func send(_ bytes: [UInt8], to channel: EmbeddedChannel, from sender: SocketAddress = client) throws {
        try channel.writeInbound(AddressedEnvelope(remoteAddress: sender, data: ByteBuffer(bytes: bytes)))
    }

    /// The datagrams written since the last call: (to whom, what).
    static func answers(_ channel: EmbeddedChannel) throws -> [(SocketAddress, [UInt8])] {
        var out: [(SocketAddress, [UInt8])] = []
        while let envelope = try channel.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
            out.append((envelope.remoteAddress, Array(envelope.data.readableBytesView)))
        }
        return out
    }

    static func sleep(_ milliseconds: Int, sequence: UInt8) -> [UInt8] {
        smpRequest(.write, group: .shell, command: 0, body: ["argv": ["kernel", "sleep", .text("\(milliseconds)")]], sequence: sequence)
    }

    /// A request the device works on (`kernel sleep 1000`) is answered that much later, and holds the
    /// device and its buffers meanwhile: with Zephyr's two buffers an echo that arrives during it is
    /// dropped, as native_sim_udp 4.4.0 drops it ("Failed to allocate mcumgr buffer"), and one sent after
    /// it is answered on the next tick.
    @Test func aBusyRequestHoldsTheDeviceAndItsBuffers() throws {
        let channel = try Self.makeChannel(receiveQueue: UDPReceiveQueue(bufferCount: 2))
        try Self.send(Self.sleep(1000, sequence: 1), to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        try Self.send(Self.echo("during", sequence: 2), to: channel)
        // Taken on the 10 ms tick, answered 1000 ms later.
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_010_000_000 - 1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.answers(channel).map { $0.1[6] } == [1])
        try Self.send(Self.echo("after", sequence: 3), to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(10))
        #expect(try Self.answers(channel).map { $0.1[6] } == [3], "the echo sent during the sleep was dropped")
        _ = try channel.finish()
    }

    /// Without Zephyr's receive queue every request is answered, but in turn: one that arrives while the
    /// device works waits until it is done.
    @Test func withoutTheQueueARequestDuringABusyOneWaitsItsTurn() throws {
        let channel = try Self.makeChannel()
        try Self.send(Self.sleep(500, sequence: 1), to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        try Self.send(Self.echo("during", sequence: 2), to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(400) - .nanoseconds(1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.answers(channel).map { $0.1[6] } == [1, 2])
        _ = try channel.finish()
    }

    @Test func eachDatagramIsAnsweredToItsSender() throws {
        let channel = try Self.makeChannel()
        let other = try SocketAddress(ipAddress: "::1", port: 50_000)
        let a = Self.echo("first", sequence: 1), b = Self.echo(String(repeating: "b", count: 1000), sequence: 2)
        try Self.send(a, to: channel)
        try Self.send(b, to: channel, from: other)
        let answers = try Self.answers(channel)
        #expect(answers.map(\.0) == [Self.client, other])
        #expect(answers.map(\.1) == [Self.answer(a), Self.answer(b)])
        _ = try channel.finish()
    }

    @Test func latencyDelaysEachAnswerByExactlyThatMuch() throws {
        let channel = try Self.makeChannel(latency: .milliseconds(7))
        let a = Self.echo("a", sequence: 1), b = Self.echo("b", sequence: 2)
        try Self.send(a, to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(3))
        try Self.send(b, to: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(4) - .nanoseconds(1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(a)])
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(3) - .nanoseconds(1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(b)])
        _ = try channel.finish()
    }

    @Test func aDatagramBeyondZephyrsReceiveBufferIsAnsweredWithRC9() throws {
        let channel = try Self.makeChannel()
        // Header, map, "d" and a text of 256 to 65535 characters: 14 bytes and the text.
        let fits = Self.echo(String(repeating: "f", count: DatagramCodec.zephyrReceiveBufferSize - 14), sequence: 3)
        let cut = Self.echo(String(repeating: "c", count: DatagramCodec.zephyrReceiveBufferSize - 13), sequence: 4)
        #expect(fits.count == DatagramCodec.zephyrReceiveBufferSize && cut.count == DatagramCodec.zephyrReceiveBufferSize + 1)
        try Self.send(fits, to: channel)
        try Self.send(cut, to: channel)
        let answers = try Self.answers(channel).map(\.1)
        #expect(answers.count == 2)
        #expect(answers.first == Self.answer(fits))
        let refused = try SMPPacket(decoding: answers.last ?? [])
        #expect(refused.header.sequence == 4)
        #expect(try CBOR(decoding: refused.payload) == .textMap(["rc": 9]))
        _ = try channel.finish()
    }

    @Test func withTwoBuffersEveryOtherRequestOfABurstIsAnsweredOnTheTick() throws {
        let channel = try Self.makeChannel(receiveQueue: UDPReceiveQueue(bufferCount: 2))
        let requests = (0..<4).map { Self.echo("burst \($0)", sequence: UInt8($0)) }
        for request in requests { try Self.send(request, to: channel) }
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(10_000_000 - 1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(10_000_000))
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(requests[0])])
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(20_000_000 - 1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(20_000_000))
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(requests[2])])
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_000_000_000))
        #expect(try Self.answers(channel).isEmpty, "the second and fourth were dropped")
        // Stop and wait: a request sent when the answer arrives is always answered, a tick later.
        try Self.send(requests[1], to: channel)
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_010_000_000 - 1))
        #expect(try Self.answers(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_010_000_000))
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(requests[1])])
        _ = try channel.finish()
    }

    @Test func randomDatagramsNeverCrashOrStopTheDevice() throws {
        var random = TestSupport.SplitMix64(seed: 0xD6)
        let channel = try Self.makeChannel()
        for _ in 0..<500 { try Self.send(random.bytes(Int(random.next(below: 100))), to: channel) }
        _ = try Self.answers(channel)
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNREFUSED, reason: "recvmsg"))
        #expect(channel.isActive, "a client that went away does not stop the device")
        let request = Self.echo("still here", sequence: 9)
        try Self.send(request, to: channel)
        #expect(try Self.answers(channel).map(\.1) == [Self.answer(request)])
        _ = try channel.finish()
    }
}
