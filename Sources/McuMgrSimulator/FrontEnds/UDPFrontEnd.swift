import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Serves a simulated device over UDP: one request per datagram, the answer to the sender, as
/// Zephyr's UDP transport does (port 1337 by default; IPv4 or IPv6 by the bind address).
public final class UDPFrontEnd: Sendable {
    public let device: SimulatedDevice
    public let host: String
    public let port: Int
    /// Delay added before every answer.
    public let latency: Duration
    private let group: any EventLoopGroup
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    public init(
        device: SimulatedDevice, host: String = "127.0.0.1", port: Int = 1337, latency: Duration = .zero,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.device = device
        self.host = host
        self.port = port
        self.latency = latency
        self.group = group
    }

    /// The bound address (with the real port when 0 was asked for).
    public var localAddress: SocketAddress? { channel.withLockedValue { $0?.localAddress } }

    @discardableResult
    public func start() async throws -> SocketAddress {
        let handler = UDPSimulatorHandler(device: device, latency: latency)
        let channel = try await DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: host, port: port).get()
        self.channel.withLockedValue { $0 = channel }
        guard let address = channel.localAddress else {
            throw SimulatorFrontEndError("UDP socket has no local address")
        }
        return address
    }

    public func stop() async {
        let c = channel.withLockedValue { c -> (any Channel)? in
            defer { c = nil }
            return c
        }
        try? await c?.close()
    }
}

final class UDPSimulatorHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let device: SimulatedDevice
    private let latency: Duration

    init(device: SimulatedDevice, latency: Duration) {
        self.device = device
        self.latency = latency
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        // Zephyr's UDP transport receives into a 1500-byte buffer and truncates beyond it; the SMP layer
        // then answers a header whose length runs past the data with rc 9, and handles several packets
        // in one datagram one after the other (measured on native_sim_udp 4.4.0: a datagram of 1501
        // bytes or more gets `{"rc": 9}` in a response with the request's header, v1 or v2).
        let bytes = Array(envelope.data.readableBytesView.prefix(DatagramCodec.zephyrReceiveBufferSize))
        for response in device.responsesUnlessRebooting(bytes) {
            let out = AddressedEnvelope(
                remoteAddress: envelope.remoteAddress, data: context.channel.allocator.buffer(bytes: response))
            if latency == .zero {
                context.writeAndFlush(wrapOutboundOut(out), promise: nil)
            } else {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: latency.nanosecondsClamped))) {
                    let (handler, context) = loopBound.value
                    context.writeAndFlush(handler.wrapOutboundOut(out), promise: nil)
                }
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client that went away (ICMP unreachable) must not stop the device.
    }
}
