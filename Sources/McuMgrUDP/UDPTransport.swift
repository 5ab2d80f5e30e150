import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// SMP over UDP (IPv4 or IPv6): one packet per datagram, retransmission keyed on sequence number,
/// duplicate answers ignored by the session.
public final class UDPTransport: McuMgrTransport {
    /// UDP settings.
    public struct Configuration: Sendable, Hashable {
        /// Host name or address literal (IPv4 or IPv6, without brackets).
        public var host: String
        /// The device's SMP port; Zephyr's default is 1337.
        public var port: Int
        /// Largest SMP packet per datagram. Zephyr truncates datagrams above 1500 bytes; 1472 stays within
        /// one Ethernet frame over IPv4.
        public var mtu: Int
        /// Resend an unanswered request after this long.
        public var retransmitInterval: Duration
        public var maximumRetransmits: Int

        public init(
            host: String, port: Int = 1337, mtu: Int = 1472, retransmitInterval: Duration = .milliseconds(1000),
            maximumRetransmits: Int = 6
        ) {
            self.host = host
            self.port = port
            self.mtu = mtu
            self.retransmitInterval = retransmitInterval
            self.maximumRetransmits = maximumRetransmits
        }
    }

    public let configuration: Configuration
    public var name: String {
        configuration.host.contains(":")
            ? "udp:[\(configuration.host)]:\(configuration.port)" : "udp:\(configuration.host):\(configuration.port)"
    }
    public var mtu: Int { configuration.mtu }
    public var sessionDefaults: SMPSessionConfiguration {
        SMPSessionConfiguration(
            window: 1, retransmitInterval: configuration.retransmitInterval,
            maximumRetransmits: configuration.maximumRetransmits)
    }

    private let group: any EventLoopGroup
    private let state = NIOLockedValueBox<(channel: any Channel, remote: SocketAddress)?>(nil)

    public init(configuration: Configuration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.configuration = configuration
        self.group = group
    }

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let remote: SocketAddress
        do {
            remote = try SocketAddress.makeAddressResolvingHost(configuration.host, port: configuration.port)
        } catch {
            throw McuMgrError(
                .transport, "cannot resolve \(configuration.host): \(error); check the host name or use an address literal")
        }
        let inbound = DatagramInboundHandler(remote: remote, name: name, handler: handler)
        do {
            let channel = try await DatagramBootstrap(group: group)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(inbound)
                    }
                }
                // A connected socket hears ICMP "port unreachable" (ECONNREFUSED) and ignores other senders.
                .connect(to: remote).get()
            state.withLockedValue { $0 = (channel, remote) }
        } catch {
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): \(error)")
        }
    }

    public func send(_ packet: [UInt8]) throws {
        guard let (channel, remote) = state.withLockedValue({ $0 }), channel.isActive else {
            throw McuMgrError(.transport, "the UDP socket for \(name) is closed")
        }
        let buffer = channel.allocator.buffer(bytes: packet)
        channel.writeAndFlush(AddressedEnvelope(remoteAddress: remote, data: buffer), promise: nil)
    }

    public func close() async {
        let channel = state.withLockedValue { s -> (any Channel)? in
            defer { s = nil }
            return s?.channel
        }
        try? await channel?.close()
    }
}

/// Turns datagrams from the device into SMP packets; datagrams from other senders are ignored.
final class DatagramInboundHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    private let remote: SocketAddress
    private let name: String
    private let handler: @Sendable (McuMgrTransportEvent) -> Void
    private let codec = NIOLockedValueBox(DatagramCodec())

    init(remote: SocketAddress, name: String, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) {
        self.remote = remote
        self.name = name
        self.handler = handler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        // Only the device's address/port; loopback devices may answer from 127.0.0.1 for "localhost".
        guard envelope.remoteAddress.port == remote.port else { return }
        let events = codec.withLockedValue { $0.decode(Array(envelope.data.readableBytesView)) }
        for event in events {
            switch event {
            case .packet(let p): handler(.packet(p))
            case .dropped(let d): handler(.dropped(d))
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let message: String
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED {
            message =
                "\(name) refused the request (ICMP port unreachable): nothing listens on that port; check the address and port (default 1337) and that the device runs SMP over UDP"
        } else {
            message = "UDP socket error for \(name): \(error)"
        }
        handler(.closed(McuMgrError(.transport, message)))
        context.close(promise: nil)
    }
}
