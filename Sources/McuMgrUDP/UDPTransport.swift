#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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
        /// Largest SMP packet per request datagram (at most 65507). Zephyr truncates datagrams above 1500
        /// bytes; 1472 stays within one Ethernet frame over IPv4. Answers of any size up to 65507 bytes
        /// are read whole, whatever this says.
        public var mtu: Int
        /// Resend an unanswered request after this fixed interval; nil (the default) resends after a
        /// timeout measured from round trips (smoothed RTT + 4 x variation, doubled on each resend).
        public var retransmitInterval: Duration?
        public var maximumRetransmits: Int

        public init(
            host: String, port: Int = 1337, mtu: Int = 1472, retransmitInterval: Duration? = nil,
            maximumRetransmits: Int = 16
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
    /// What the link carries: datagrams of up to `mtu` bytes, as many in flight as the device's buffers take
    /// (`LinkLimits.BufferUse.twoBuffersPerRequest`, see below), resends after a measured timeout above
    /// `retransmitFloor`, and no erase resend floor.
    ///
    /// Zephyr's UDP transport holds a request's buffer until its answer, which takes a second one: with
    /// `buf_count` buffers, half as many requests fit. Measured on the real native_sim_udp build (Zephyr
    /// 4.4.0, 2 x 2048 B buffers; raw echo datagrams of 10 and 1400 bytes, 2026-11): of 2 requests sent
    /// back to back, 20 of 20 times only the first was answered (the second dropped, no answer ever); of 3,
    /// the first and third; a second request 2 ms after the first was dropped 15 of 15 times, 5 ms after
    /// 12 of 15, 12 ms after (one 10 ms tick: the first was answered by then) never. So on two buffers a
    /// second request in flight is lost and costs a resend timeout: the window stays 1 (`buf_count / 2`).
    ///
    /// A first image chunk is resent after the measured timeout like any other (`eraseResendFloor` nil): a
    /// copy that reaches a device still erasing waits in its queue or is dropped for want of a buffer, and
    /// Zephyr answers a repeated first chunk of the same image (same `sha`) with its offset instead of
    /// erasing again. At 10% loss the 2 s wait made one image upload in five take 2 s longer.
    public var linkLimits: LinkLimits {
        LinkLimits(
            maximumPacketSize: configuration.mtu, framesInFlight: 255, bufferUse: .twoBuffersPerRequest,
            session: SMPSessionConfiguration(
                window: 1, retransmitInterval: configuration.retransmitInterval, adaptiveRetransmit: true,
                retransmitFloor: Self.retransmitFloor, initialRetransmit: Self.initialRetransmit,
                maximumRetransmits: configuration.maximumRetransmits),
            eraseResendFloor: nil)
    }
    /// The shortest resend timeout: the measured round trip (smoothed + 4 x variation, as TCP) rules
    /// above it. Low enough that a lost datagram on a fast path costs little (on loopback, with 100 ms,
    /// a 1 MiB upload at 10% loss took 2.5 times as long as without loss), above the ~10-20 ms a Zephyr
    /// device's tick adds to an answer.
    public static var retransmitFloor: Duration { .milliseconds(25) }

    /// The resend timeout of a session's first requests, before a round trip was measured: a lost first
    /// datagram costs this (TCP's 1 s made one short command in five take a second longer at 10% loss);
    /// above the round trips of LANs and of most low-power mesh links.
    public static var initialRetransmit: Duration { .milliseconds(250) }

    private let group: any EventLoopGroup
    private let state = NIOLockedValueBox<Link?>(nil)

    /// The open socket. NIO owns `channel` (and reads through it); `sendDescriptor` is our own duplicate of
    /// the same connected socket, so requests go out with one send(2) on the caller's thread instead of a
    /// hop onto the event loop per datagram. It is closed under the lock, so a send never reaches a
    /// descriptor number the system has handed out again.
    private struct Link {
        var channel: any Channel
        var remote: SocketAddress
        var sendDescriptor: CInt
        /// Datagrams handed to the channel (the socket buffer was full) and not yet written: later ones
        /// take the same path so they stay in order.
        var channelWrites = 0
    }

    public init(configuration: Configuration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.configuration = configuration
        self.group = group
    }

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let remote: SocketAddress
        do {
            // An address literal (the usual case) is parsed as it is: resolving it costs a netlink
            // address dump and the name service's lookups before the first request.
            remote =
                try (try? SocketAddress(ipAddress: configuration.host, port: configuration.port))
                ?? SocketAddress.makeAddressResolvingHost(configuration.host, port: configuration.port)
        } catch {
            throw McuMgrError(
                .transport, "cannot resolve \(configuration.host): \(error); check the host name or use an address literal")
        }
        releaseLink()?.close(promise: nil)
        let inbound = DatagramInboundHandler(remote: remote, name: name, handler: handler)
        // A connected socket hears ICMP "port unreachable" (ECONNREFUSED) and ignores other senders.
        let socket = try Self.connectedSocket(to: remote, name: name)
        let sendDescriptor: CInt
        do throws(SystemCallError) {
            sendDescriptor = try SystemCall.duplicate(socket)
        } catch {
            SystemCall.close(socket)
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): \(error)")
        }
        do {
            let channel = try await DatagramBootstrap(group: group)
                .channelOption(
                    ChannelOptions.recvAllocator,
                    value: FixedSizeRecvByteBufferAllocator(capacity: Self.receiveCapacity(mtu: configuration.mtu)))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(inbound)
                    }
                }
                .withBoundSocket(socket).get()
            state.withLockedValue { $0 = Link(channel: channel, remote: remote, sendDescriptor: sendDescriptor) }
            // However the channel ends (a read error, the device refusing), our duplicate goes with it.
            channel.closeFuture.whenComplete { [state] _ in
                state.withLockedValue { link in
                    guard let current = link, current.channel === channel else { return }
                    SystemCall.close(current.sendDescriptor)
                    link = nil
                }
            }
        } catch {
            SystemCall.close(sendDescriptor)
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): \(error)")
        }
    }

    /// The largest UDP payload (IPv4: 65535 - 20 - 8).
    public static let largestDatagram = 65507

    /// Bytes read per datagram. A device sizes its answers from its own buffers, not from our MTU (an fs
    /// download chunk fills its `buf_size`), and a datagram longer than the read buffer is cut (NIO's
    /// default is 2048 bytes): so every datagram UDP can carry fits, and a larger MTU too.
    static func receiveCapacity(mtu: Int) -> Int {
        max(mtu, largestDatagram)
    }

    /// A non-blocking UDP socket connected to `remote` (NIO takes it over).
    private static func connectedSocket(to remote: SocketAddress, name: String) throws -> CInt {
        let family: CInt
        switch remote {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        case .unixDomainSocket:
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): not an IP address")
        }
        var fd: CInt = -1
        do {
            fd = try SystemCall.socket(family, CInt(SOCK_DGRAM.rawValue) | CInt(SOCK_NONBLOCK.rawValue) | CInt(SOCK_CLOEXEC.rawValue))
            // No SO_REUSEADDR: connect(2) picks the local port, and with the option Linux may give two of
            // our sockets (a fleet of devices in one process) the same one.
            try SystemCall.setSocketOption(fd, SOL_SOCKET, SO_RCVBUF, to: 1 << 20)
            try remote.withSockAddr { try SystemCall.connectDatagram(fd, to: $0, length: $1) }
            return fd
        } catch let error as SystemCallError {
            if fd >= 0 { SystemCall.close(fd) }
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): \(error.call): \(error)")
        }
    }

    public func send(_ packet: [UInt8]) throws {
        enum Outcome {
            case sent
            case viaChannel(any Channel, SocketAddress)
            case failed(McuMgrError, any Channel)
        }
        let outcome = try state.withLockedValue { link -> Outcome in
            guard let current = link, current.channel.isActive else {
                throw McuMgrError(.transport, "the UDP socket for \(name) is closed")
            }
            if current.channelWrites == 0 {
                do throws(SystemCallError) {
                    if try SystemCall.send(current.sendDescriptor, packet) != nil { return .sent }
                } catch {
                    // Fatal for this link: fail now and let the next request reopen it.
                    SystemCall.close(current.sendDescriptor)
                    link = nil
                    let message =
                        error.code == ECONNREFUSED
                        ? DatagramInboundHandler.refusedMessage(name)
                        : error.code == EMSGSIZE
                            ? "\(name) cannot take a \(packet.count)-byte datagram; lower the MTU"
                            : "UDP socket error for \(name): \(error)"
                    return .failed(McuMgrError(.transport, message), current.channel)
                }
            }
            link!.channelWrites += 1
            return .viaChannel(current.channel, current.remote)
        }
        switch outcome {
        case .sent:
            return
        case .failed(let error, let channel):
            channel.close(promise: nil)
            throw error
        case .viaChannel(let channel, let remote):
            // The socket buffer is full: the event loop writes when it drains.
            let buffer = channel.allocator.buffer(bytes: packet)
            let promise = channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenComplete { [state] _ in
                state.withLockedValue { link in
                    if link != nil, link!.channel === channel { link!.channelWrites -= 1 }
                }
            }
            channel.writeAndFlush(AddressedEnvelope(remoteAddress: remote, data: buffer), promise: promise)
        }
    }

    public func close() async {
        try? await releaseLink()?.close()
    }

    /// Forgets the link and closes our descriptor; the caller closes the channel.
    private func releaseLink() -> (any Channel)? {
        state.withLockedValue { link -> (any Channel)? in
            defer { link = nil }
            guard let current = link else { return nil }
            SystemCall.close(current.sendDescriptor)
            return current.channel
        }
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

    static func refusedMessage(_ name: String) -> String {
        "\(name) refused the request (ICMP port unreachable): nothing listens on that port; check the address and port (default 1337) and that the device runs SMP over UDP"
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        let message: String
        if let error = error as? IOError, error.errnoCode == ECONNREFUSED {
            message = Self.refusedMessage(name)
        } else {
            message = "UDP socket error for \(name): \(error)"
        }
        handler(.closed(McuMgrError(.transport, message)))
        context.close(promise: nil)
    }
}
