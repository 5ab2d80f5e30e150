import Foundation
@testable import McuMgrSerial
import NIOCore
import NIOEmbedded
import Testing

/// The remote port's quick-ACK handler in an `EmbeddedChannel` (which records the options set on it):
/// TCP_QUICKACK is armed again on every read, since Linux clears it by itself, and every read passes
/// on unchanged and in order.
@Suite("Quick-ACK handler")
struct QuickAckHandlerTests {
    static let quickAck = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_QUICKACK))

    @Test func everyReadArmsQuickAckAndPassesOnUnchanged() throws {
        let channel = EmbeddedChannel(handler: QuickAckHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3000)).wait()
        let reads: [[UInt8]] = [[0x06, 0x09, 0x41], [], [0xFF, 0xFF, 0x00], Array(repeating: 0x5A, count: 4096)]
        for read in reads {
            // As the kernel does after acknowledging: the flag is clear again before the next segment.
            try channel.setOption(Self.quickAck, value: 0).wait()
            try channel.writeInbound(ByteBuffer(bytes: read))
            #expect(try channel.getOption(Self.quickAck).wait() == 1, "armed for the read of \(read.count) bytes")
            #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(bytes: read))
        }
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "it writes nothing")
        #expect(try channel.finish().isClean)
    }

    @Test func otherEventsPassThrough() throws {
        let channel = EmbeddedChannel(handlers: [QuickAckHandler(), ErrorCatcher()])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 3000)).wait()
        channel.pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        let catcher = try channel.pipeline.syncOperations.handler(type: ErrorCatcher.self)
        #expect(catcher.errors.map { ($0 as? IOError)?.errnoCode } == [ECONNRESET])
        try channel.writeOutbound(ByteBuffer(bytes: [1, 2, 3]))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(bytes: [1, 2, 3]), "writes pass unchanged")
        #expect(try channel.finish().isClean)
        #expect(catcher.inactive, "channelInactive reaches the next handler")
    }
}

/// Records the errors and the closure that reach the end of a pipeline.
final class ErrorCatcher: ChannelInboundHandler {
    typealias InboundIn = Any
    var errors: [any Error] = []
    var inactive = false

    func errorCaught(context: ChannelHandlerContext, error: any Error) { errors.append(error) }
    func channelInactive(context: ChannelHandlerContext) { inactive = true }
}
