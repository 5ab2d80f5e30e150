import Foundation
import McuMgrCore
@testable import McuMgrSimulator
import NIOCore
import NIOEmbedded
import Testing
import TestSupport

/// The simulator's serial link handler (behind `smp-sim`'s pty) in an `EmbeddedChannel`, in virtual
/// time: requests in every read split, what it refuses, and the timing it emulates (wire speed,
/// latency, Zephyr's line buffers and the device's reads every 20 ms) asserted to the nanosecond.
@Suite("Simulator serial link handler")
struct SimulatorLinkHandlerTests {
    static func echo(_ text: String, sequence: UInt8) -> [UInt8] {
        smpRequest(.write, group: .os, command: 0, body: .textMap(["d": .text(text)]), sequence: sequence)
    }

    /// What a device answers to `request` (echo is stateless, so any device gives the same).
    static func answer(_ request: [UInt8]) -> [UInt8] { SimulatedDevice().handleUnlessRebooting(request)! }

    static func frames(_ packet: [UInt8]) -> [UInt8] { ConsoleSerialCodec().encode(packet).flatMap { $0 } }

    /// Drops the device reports, in order.
    final class Drops: @unchecked Sendable {
        private let lock = NSLock()
        private var seen: [String] = []
        var all: [String] { lock.withLock { seen } }
        func record(_ drop: String) { lock.withLock { seen.append(drop) } }
    }

    static func makeChannel(
        raw: Bool = false, baudRate: Int? = nil, latency: Duration = .zero, lineBuffers: SerialLineBuffers? = nil,
        device: SimulatedDevice = SimulatedDevice(), drops: Drops? = nil
    ) throws -> EmbeddedChannel {
        var onDrop: (@Sendable (String) -> Void)?
        if let drops { onDrop = { drops.record($0) } }
        let codec: any SMPFramingCodec = raw ? RawSerialCodec() : ConsoleSerialCodec()
        let handler = SimulatorLinkHandler(
            device: device, codec: codec, emulation: LinkEmulation(baudRate: baudRate, latency: latency),
            lineBuffers: lineBuffers, onDrop: onDrop)
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    static func written(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var bytes: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += Array(buffer.readableBytesView) }
        return bytes
    }

    @Test func consoleRequestsAreAnsweredInOrderWhateverTheReadSizes() throws {
        let requests = [Self.echo("hello", sequence: 1), Self.echo(String(repeating: "x", count: 300), sequence: 2), Self.echo("", sequence: 3)]
        let expected = requests.flatMap { Self.frames(Self.answer($0)) }
        try FramingCodecVerifier.verifySplits(input: requests.flatMap { Self.frames($0) }, expected: expected) { chunks in
            let channel = try Self.makeChannel()
            for chunk in chunks { try channel.writeInbound(ByteBuffer(bytes: chunk)) }
            defer { _ = try? channel.finish() }
            return try Self.written(channel)
        }
    }

    @Test func rawRequestsAreAnsweredWhateverTheReadSizes() throws {
        let requests = (0..<4).map { Self.echo(String(repeating: "r", count: 100 * $0), sequence: UInt8($0)) }
        try FramingCodecVerifier.verifySplits(
            input: requests.flatMap { $0 }, expected: requests.flatMap { Self.answer($0) }
        ) { chunks in
            let channel = try Self.makeChannel(raw: true)
            for chunk in chunks { try channel.writeInbound(ByteBuffer(bytes: chunk)) }
            defer { _ = try? channel.finish() }
            return try Self.written(channel)
        }
    }

    @Test func corruptFramesAndPacketsBeyondTheBufferGetNoAnswer() throws {
        let device = SimulatedDevice()
        let channel = try Self.makeChannel(device: device)
        // A frame with one Base64 character changed fails its CRC; noise is skipped.
        var corrupt = Self.frames(Self.echo("bad", sequence: 1))
        corrupt[10] = corrupt[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        try channel.writeInbound(ByteBuffer(bytes: corrupt + Array("noise\n".utf8)))
        #expect(try Self.written(channel) == [])
        // uart_mcumgr holds length, packet and CRC in one buf_size buffer: buf_size - 4 is the largest packet.
        let overhead = Self.echo("", sequence: 0).count
        let fits = Self.echo(String(repeating: "f", count: device.currentBufferSize - 4 - overhead - 2), sequence: 2)
        let tooLarge = Self.echo(String(repeating: "t", count: device.currentBufferSize - 4 - overhead - 1), sequence: 3)
        #expect(fits.count == device.currentBufferSize - 4 && tooLarge.count == device.currentBufferSize - 3)
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(tooLarge) + Self.frames(fits)))
        #expect(try Self.written(channel) == Self.frames(Self.answer(fits)))
        _ = try channel.finish()
    }

    @Test func atAnEmulatedBaudRateTheAnswerLeavesWhenBothDirectionsHadTheirWireTime() throws {
        let channel = try Self.makeChannel(baudRate: 115_200)
        let request = Self.frames(Self.echo("timed", sequence: 4))
        let response = Self.frames(Self.answer(Self.echo("timed", sequence: 4)))
        func wire(_ count: Int) -> Int64 { Int64(count) * 10 * 1_000_000_000 / 115_200 }
        let done = TimeAmount.nanoseconds(wire(request.count) + wire(response.count))
        try channel.writeInbound(ByteBuffer(bytes: request))
        channel.embeddedEventLoop.advanceTime(by: done - .nanoseconds(1))
        #expect(try Self.written(channel) == [], "still on the wire")
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.written(channel) == response)
        _ = try channel.finish()
    }

    @Test func latencyDelaysEveryAnswerByExactlyThatMuch() throws {
        let channel = try Self.makeChannel(latency: .milliseconds(20))
        let requests = [Self.echo("a", sequence: 1), Self.echo("b", sequence: 2)]
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(requests[0])))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(5))
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(requests[1])))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(15) - .nanoseconds(1))
        #expect(try Self.written(channel) == [])
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.written(channel) == Self.frames(Self.answer(requests[0])), "20 ms after the first")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(5) - .nanoseconds(1))
        #expect(try Self.written(channel) == [])
        channel.embeddedEventLoop.advanceTime(by: .nanoseconds(1))
        #expect(try Self.written(channel) == Self.frames(Self.answer(requests[1])), "20 ms after the second")
        _ = try channel.finish()
    }

    @Test func withZephyrsLineBuffersARequestIsAnsweredAtTheDevicesNextRead() throws {
        let channel = try Self.makeChannel(lineBuffers: SerialLineBuffers(lineSize: 128, lineCount: 2))
        let request = Self.echo("tick", sequence: 5)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(3))
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(request)))
        // Read, handled and answered at the device's next read of its console, at 20 ms.
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(20_000_000 - 1))
        #expect(try Self.written(channel) == [])
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(20_000_000))
        #expect(try Self.written(channel) == Self.frames(Self.answer(request)))
        _ = try channel.finish()
    }

    @Test func aThreeLineFrameOverflowsTwoLineBuffersAndIsNeverAnswered() throws {
        let drops = Drops()
        let channel = try Self.makeChannel(lineBuffers: SerialLineBuffers(lineSize: 128, lineCount: 2), drops: drops)
        let long = Self.echo(String(repeating: "L", count: 200), sequence: 6)
        #expect(ConsoleSerialCodec().encode(long).count == 3)
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(long)))
        #expect(drops.all == ["Insufficient buffers, fragment dropped"])
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try Self.written(channel) == [])
        // Two one-line frames back to back both fit, and both are answered at the same read.
        let a = Self.echo("one", sequence: 7), b = Self.echo("two", sequence: 8)
        try channel.writeInbound(ByteBuffer(bytes: Self.frames(a) + Self.frames(b)))
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_020_000_000 - 1))
        #expect(try Self.written(channel) == [])
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(1_020_000_000))
        #expect(try Self.written(channel) == Self.frames(Self.answer(a)) + Self.frames(Self.answer(b)))
        #expect(drops.all.count == 1)
        _ = try channel.finish()
    }

    @Test func randomBytesNeverCrashAndAGoodRequestIsStillAnswered() throws {
        var random = TestSupport.SplitMix64(seed: 0x5111)
        for raw in [false, true] {
            let channel = try Self.makeChannel(raw: raw)
            for _ in 0..<200 { try channel.writeInbound(ByteBuffer(bytes: random.bytes(Int(random.next(below: 200))))) }
            _ = try Self.written(channel)
            #expect(channel.isActive)
            _ = try channel.finish()
        }
        let channel = try Self.makeChannel()
        try channel.writeInbound(ByteBuffer(bytes: random.bytes(5000) + [0x0A] + Self.frames(Self.echo("after", sequence: 9))))
        #expect(try Self.written(channel).suffix(Self.frames(Self.answer(Self.echo("after", sequence: 9))).count)
            == Self.frames(Self.answer(Self.echo("after", sequence: 9)))[...])
        _ = try channel.finish()
    }
}
