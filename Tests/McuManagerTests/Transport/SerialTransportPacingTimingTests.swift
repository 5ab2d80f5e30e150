import Foundation
import McuManager
import McuMgrCore
@testable import McuMgrSerial
import NIOCore
import NIOEmbedded
import Testing

/// The serial transport's pacing in virtual time: the transport writes to an `EmbeddedChannel`, whose
/// event loop is the pacing's clock, and the test advances it: which lines go out at which instant.
@Suite("Serial transport: pacing of console lines in virtual time")
struct SerialTransportPacingTimingTests {
    /// A transport whose channel is an `EmbeddedChannel` (time starts at its loop's zero).
    static func transport(lines: Int = 2, gap: Duration = .milliseconds(20)) async throws -> (SerialTransport, EmbeddedChannel) {
        let transport = SerialTransport(configuration: .init(path: "/dev/ttyVIRTUAL", lines: lines, lineGap: gap))
        let channel = EmbeddedChannel()
        try await channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        transport.channel.withLockedValue { $0 = channel }
        return (transport, channel)
    }

    /// A packet whose console frame takes `lines` lines of 127 bytes (Zephyr's default line length).
    static func packet(sequence: UInt8, payload: Int) -> [UInt8] {
        SMPPacket(
            header: SMPHeader(version: .v2, operation: .write, length: 0, group: .os, sequence: sequence, command: McuMgrCommand(0)),
            payload: Array(repeating: 0x61, count: payload)
        ).bytes
    }

    /// The lines written since the last call, each write as its lines (newline dropped).
    static func written(_ channel: EmbeddedChannel) throws -> [[[UInt8]]] {
        var writes: [[[UInt8]]] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            writes.append(Array(buffer.readableBytesView).split(separator: 0x0A).map(Array.init))
        }
        return writes
    }

    static func frameLines(_ packet: [UInt8]) -> [[UInt8]] {
        ConsoleSerialCodec(maximumLineLength: 127).encode(packet).map { Array($0.dropLast()) }
    }

    @Test func fiveLinesGoOutAsTwoLinesThen20msThenTwoLinesThen20msThenOne() async throws {
        let (transport, channel) = try await Self.transport()
        let packet = Self.packet(sequence: 1, payload: 372)
        let frame = Self.frameLines(packet)
        #expect(frame.count == 5)
        try transport.send(packet)
        #expect(try Self.written(channel) == [Array(frame[0..<2])], "two lines at once")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(19))
        #expect(try Self.written(channel).isEmpty, "nothing before the 20 ms gap ends")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try Self.written(channel) == [Array(frame[2..<4])], "two lines at 20 ms")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(19))
        #expect(try Self.written(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(try Self.written(channel) == [Array(frame[4..<5])], "the last line at 40 ms")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(try Self.written(channel).isEmpty)
    }

    @Test func aFrameWithinTheLineBuffersGoesOutAtOnceAndLeavesNoPause() async throws {
        let (transport, channel) = try await Self.transport()
        let small = Self.packet(sequence: 2, payload: 50)
        #expect(Self.frameLines(small).count == 1)
        try transport.send(small)
        try transport.send(Self.packet(sequence: 3, payload: 50))
        #expect(try Self.written(channel).count == 2, "both frames at once: neither filled the line buffers")
    }

    @Test func aFrameSentWhileAnotherIsPacedQueuesBehindItsLastGap() async throws {
        let (transport, channel) = try await Self.transport(lines: 2, gap: .milliseconds(20))
        let long = Self.packet(sequence: 4, payload: 372)  // bursts at 0, 20 and 40 ms
        try transport.send(long)
        _ = try Self.written(channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(5))
        // The device frees the last burst's line 20 ms after it arrives (60 ms): the next frame waits
        // until then, although the link is idle from 40 ms on.
        let next = Self.packet(sequence: 5, payload: 50)
        try transport.send(next)
        #expect(try Self.written(channel).isEmpty, "queued, not written at 5 ms")
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(0) + .milliseconds(40))
        #expect(try Self.written(channel).count == 2, "the long frame's other bursts, at 20 and 40 ms")
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(0) + .milliseconds(59))
        #expect(try Self.written(channel).isEmpty, "the next frame not before 60 ms")
        channel.embeddedEventLoop.advanceTime(to: .uptimeNanoseconds(0) + .milliseconds(60))
        #expect(try Self.written(channel) == [Self.frameLines(next)], "the next frame at 60 ms")
    }

    /// A packet of 300 bytes of payload: a frame of four 127-byte lines, two bursts.
    static func twoBurstPacket(sequence: UInt8) -> [UInt8] { packet(sequence: sequence, payload: 300) }

    static func at(_ milliseconds: Int64) -> NIODeadline { .uptimeNanoseconds(0) + .milliseconds(milliseconds) }

    @Test func anAnswerAfterAPacedFramesLastBurstLetsTheNextFrameGoAtOnce() async throws {
        let (transport, channel) = try await Self.transport(lines: 2, gap: .milliseconds(30))
        let answers = transport.recordingTheEnd { _ in }
        let first = Self.twoBurstPacket(sequence: 7)
        #expect(Self.frameLines(first).count == 4)
        try transport.send(first)
        channel.embeddedEventLoop.advanceTime(to: Self.at(30))
        #expect(try Self.written(channel).count == 2, "both bursts by 30 ms")
        // The device answers at its read 10 ms later: it took both bursts, its lines are free.
        channel.embeddedEventLoop.advanceTime(to: Self.at(40))
        answers(.packet(Self.packet(sequence: 7, payload: 4)))
        let next = Self.twoBurstPacket(sequence: 8)
        try transport.send(next)
        #expect(try Self.written(channel) == [Array(Self.frameLines(next)[0..<2])], "at 40 ms, not when the pause ends at 60 ms")
        channel.embeddedEventLoop.advanceTime(to: Self.at(69))
        #expect(try Self.written(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(to: Self.at(70))
        #expect(try Self.written(channel) == [Array(Self.frameLines(next)[2..<4])], "its second burst 30 ms later")
    }

    @Test func anAnswerBeforeAPacedFramesLastBurstLeavesItsPause() async throws {
        let (transport, channel) = try await Self.transport(lines: 2, gap: .milliseconds(30))
        let answers = transport.recordingTheEnd { _ in }
        try transport.send(Self.twoBurstPacket(sequence: 9))  // bursts at 0 and 30 ms, lines free at 60 ms
        channel.embeddedEventLoop.advanceTime(to: Self.at(10))
        // An answer to an earlier request: this frame's second burst is not out yet.
        answers(.packet(Self.packet(sequence: 1, payload: 4)))
        channel.embeddedEventLoop.advanceTime(to: Self.at(45))
        #expect(try Self.written(channel).count == 2)
        let next = Self.packet(sequence: 10, payload: 50)
        try transport.send(next)
        #expect(try Self.written(channel).isEmpty, "queued until the line buffers are free")
        channel.embeddedEventLoop.advanceTime(to: Self.at(59))
        #expect(try Self.written(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(to: Self.at(60))
        #expect(try Self.written(channel) == [Self.frameLines(next)], "at 60 ms")
    }

    @Test func heldFramesGoInOneWriteWithTheLast() async throws {
        let (transport, channel) = try await Self.transport()
        let frames = (11...13).map { Self.packet(sequence: UInt8($0), payload: 50) }
        transport.holdWrites(count: 3)
        try transport.send(frames[0])
        try transport.send(frames[1])
        #expect(try Self.written(channel).isEmpty, "held until the third")
        try transport.send(frames[2])
        #expect(try Self.written(channel) == [frames.flatMap(Self.frameLines)], "one write of the three frames")
        try transport.send(frames[0])
        #expect(try Self.written(channel).count == 1, "the hold ended with the third")
        // A hold that gets fewer frames: releasing it writes them.
        transport.holdWrites(count: 2)
        try transport.send(frames[1])
        #expect(try Self.written(channel).isEmpty)
        transport.releaseWrites()
        #expect(try Self.written(channel) == [Self.frameLines(frames[1])])
    }

    @Test func aLongerGapAndMoreLinesPaceTheSameWay() async throws {
        let (transport, channel) = try await Self.transport(lines: 3, gap: .milliseconds(50))
        let packet = Self.packet(sequence: 6, payload: 700)
        let frame = Self.frameLines(packet)
        let bursts = stride(from: 0, to: frame.count, by: 3).map { Array(frame[$0..<min($0 + 3, frame.count)]) }
        #expect(bursts.count >= 3)
        try transport.send(packet)
        for (index, burst) in bursts.enumerated() {
            if index > 0 {
                channel.embeddedEventLoop.advanceTime(by: .milliseconds(49))
                #expect(try Self.written(channel).isEmpty, "burst \(index) not before \(index * 50) ms")
                channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            }
            #expect(try Self.written(channel) == [burst], "burst \(index) at \(index * 50) ms")
        }
    }
}
