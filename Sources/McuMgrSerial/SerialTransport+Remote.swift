#if canImport(Glibc)
import Glibc
#endif
import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Remote serial ports: a TCP connection to a port server such as ser2net, raw or with RFC 2217.
extension SerialTransport {
    func openRemote(
        host: String, port: Int, rfc2217: Bool, _ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) async throws {
        let uri = name
        let inbound = LinkInboundHandler(
            codec: Self.makeCodec(configuration, lineLength: ConsoleSerialCodec.defaultMaximumLineLength),
            name: name, messages: .remote(uri), handler: recordingTheEnd(handler))
        let timeout = Self.timeAmount(configuration.connectTimeout)
        let settings = RFC2217Codec.PortSettings(
            baudRate: configuration.baudRate, dataBits: configuration.dataBits, parity: configuration.parity,
            stopBits: configuration.stopBits, hardwareFlowControl: configuration.flowControl)
        let negotiation = NIOLockedValueBox<EventLoopFuture<Int?>?>(nil)
        let logger = self.logger
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(timeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelOption(.allowRemoteHalfClosure, value: false)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(QuickAckHandler())
                        if rfc2217 {
                            let promise = channel.eventLoop.makePromise(of: Int?.self)
                            negotiation.withLockedValue { $0 = promise.futureResult }
                            try channel.pipeline.syncOperations.addHandler(
                                RFC2217Handler(
                                    settings: settings, uri: uri, timeout: timeout, negotiated: promise, link: inbound,
                                    logger: logger))
                        }
                        try channel.pipeline.syncOperations.addHandler(inbound)
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            throw Self.connectError(error, uri: uri, host: host, port: port, timeout: configuration.connectTimeout)
        }
        if let negotiated = negotiation.withLockedValue({ $0 }) {
            do {
                let baud = try await negotiated.get()
                acknowledgedBaudRate.withLockedValue { $0 = baud }
                if let baud, baud != configuration.baudRate {
                    logger.warning("\(uri): asked for \(configuration.baudRate) baud, the server set \(baud)")
                }
            } catch {
                try? await channel.close()
                throw error as? McuMgrError ?? McuMgrError(.transport, "\(uri): RFC 2217 negotiation failed: \(error)")
            }
        }
        logger.debug("connected to \(uri)")
        self.channel.withLockedValue { $0 = channel }
    }

    /// A clear message for a failed connection: host not found, refused, timed out.
    static func connectError(_ error: any Error, uri: String, host: String, port: Int, timeout: Duration) -> McuMgrError {
        if let connection = error as? NIOConnectionError {
            if connection.connectionErrors.isEmpty && (connection.dnsAError != nil || connection.dnsAAAAError != nil) {
                return McuMgrError(
                    .transport, "cannot connect to \(uri): host \"\(host)\" not found; check the name (or use its IP address)")
            }
            let refused = connection.connectionErrors.contains { failure in
                (failure.error as? IOError)?.errnoCode == ECONNREFUSED
            }
            if refused {
                return McuMgrError(
                    .transport,
                    "cannot connect to \(uri): connection refused; is the port server (e.g. ser2net) running and listening on port \(port)?"
                )
            }
            let reasons = connection.connectionErrors.map { "\($0.error)" }.joined(separator: "; ")
            return McuMgrError(.transport, "cannot connect to \(uri): \(reasons.isEmpty ? "\(error)" : reasons)")
        }
        if let channelError = error as? ChannelError, case .connectTimeout = channelError {
            return McuMgrError(
                .transport,
                "cannot connect to \(uri): no answer within \(timeout.secondsText); is the host up and the port reachable?")
        }
        if let io = error as? IOError, io.errnoCode == ECONNREFUSED {
            return McuMgrError(
                .transport,
                "cannot connect to \(uri): connection refused; is the port server (e.g. ser2net) running and listening on port \(port)?")
        }
        return McuMgrError(.transport, "cannot connect to \(uri): \(error)")
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(clamping: duration.nanosecondsClamped))
    }
}

/// Whether `error` is the peer resetting or closing the connection (ECONNRESET, EPIPE): a server that
/// closes with our bytes unread resets instead of closing.
func isConnectionReset(_ error: any Error) -> Bool {
    guard let io = error as? IOError else { return false }
    return io.errnoCode == ECONNRESET || io.errnoCode == EPIPE
}

extension Duration {
    /// "5 s", "1.5 s".
    fileprivate var secondsText: String {
        let ms = Int64(clamping: nanosecondsClamped / 1_000_000)
        return ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
    }
}

/// Acknowledges every read at once (TCP_QUICKACK, re-armed per read: Linux clears it by itself). A port
/// server that sends with Nagle's algorithm on (ser2net's accepters without `nodelay`) holds the rest of
/// an answer until the first segment is acknowledged; our delayed ACK would add up to 40 ms to every
/// round trip (measured: 58 ms instead of 20 ms per 364-byte answer through ser2net).
final class QuickAckHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var supported = true

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if supported {
            do {
                try context.channel.syncOptions?.setOption(
                    ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: TCP_QUICKACK)), value: 1)
            } catch {
                supported = false
            }
        }
        context.fireChannelRead(data)
    }
}

/// Telnet with RFC 2217 between the socket and the framing: escapes what goes out, strips and answers
/// what comes in (`RFC2217Codec`), and completes `negotiated` with the baud rate the server acknowledged
/// once it agreed to the com port option and acknowledged every setting (or fails it: refused, closed,
/// timed out).
final class RFC2217Handler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var codec: RFC2217Codec
    private let uri: String
    private let timeout: TimeAmount
    private let negotiated: EventLoopPromise<Int?>
    private let link: LinkInboundHandler
    private let logger: Logger
    private var settled = false
    private var timer: Scheduled<Void>?

    init(
        settings: RFC2217Codec.PortSettings, uri: String, timeout: TimeAmount, negotiated: EventLoopPromise<Int?>,
        link: LinkInboundHandler, logger: Logger
    ) {
        self.codec = RFC2217Codec(settings: settings)
        self.uri = uri
        self.timeout = timeout
        self.negotiated = negotiated
        self.link = link
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        send(codec.start(), context: context)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            let (handler, context) = loopBound.value
            handler.settle(
                .failure(
                    McuMgrError(
                        .transport,
                        "\(handler.uri) did not complete RFC 2217 negotiation within \(handler.timeout.nanoseconds / 1_000_000) ms; is it a raw TCP port (then use tcp://) or not a telnet(rfc2217) accepter?"
                    )))
            context.close(promise: nil)
        }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let decoded = codec.decode(Array(unwrapInboundIn(data).readableBytesView))
        if !decoded.reply.isEmpty { send(decoded.reply, context: context) }
        for event in decoded.events {
            switch event {
            case .comPortRefused:
                let error = McuMgrError(
                    .transport,
                    "\(uri) refused the RFC 2217 com port option: it is no telnet(rfc2217) accepter (use tcp:// for a raw port, or add telnet(rfc2217) to its ser2net accepter)"
                )
                if settled {
                    link.fail(error)
                    context.close(promise: nil)
                } else {
                    settle(.failure(error))
                }
            case .binaryRefused(let outbound):
                logger.debug("\(uri): the server refused binary transmission \(outbound ? "from us" : "to us"); using NVT CR NUL")
            case .acknowledged(let command, let value):
                logger.debug("\(uri): server acknowledged \(command) = \(value)")
            case .flowControl(let suspend):
                logger.debug("\(uri): server asks to \(suspend ? "suspend" : "resume") sending")
            default:
                break
            }
        }
        if !settled && codec.isNegotiated { settle(.success(codec.acknowledgedBaudRate)) }
        if !decoded.data.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: decoded.data.count)
            buffer.writeBytes(decoded.data)
            context.fireChannelRead(wrapInboundOut(buffer))
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let encoded = codec.encode(Array(unwrapOutboundIn(data).readableBytesView))
        var buffer = context.channel.allocator.buffer(capacity: encoded.count)
        buffer.writeBytes(encoded)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(.failure(closedDuringNegotiation))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if isConnectionReset(error) {
            settle(.failure(closedDuringNegotiation))
        } else {
            settle(.failure(McuMgrError(.transport, "connection to \(uri) failed during RFC 2217 negotiation: \(error)")))
        }
        context.fireErrorCaught(error)
    }

    private var closedDuringNegotiation: McuMgrError {
        McuMgrError(
            .transport,
            "\(uri) closed the connection during RFC 2217 negotiation: the port server may be busy with another client or unable to open its serial port"
        )
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        settle(.failure(McuMgrError(.transport, "connection to \(uri) closed")))
    }

    private func settle(_ result: Result<Int?, McuMgrError>) {
        guard !settled else { return }
        settled = true
        timer?.cancel()
        timer = nil
        switch result {
        case .success(let baud): negotiated.succeed(baud)
        case .failure(let error): negotiated.fail(error)
        }
    }

    /// Telnet bytes of our own (already encoded), straight to the socket.
    private func send(_ bytes: [UInt8], context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
    }
}
