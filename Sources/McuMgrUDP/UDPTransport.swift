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

    /// The open socket's link: a thread of its own reads the device's datagrams (as the Bluetooth LE
    /// sockets are read: no event loop to start and register with, which cost a command about a
    /// millisecond before its first request and another at its end); requests go out with one send(2) on
    /// the caller's thread, and only when the socket buffer is full through that thread.
    private let link = NIOLockedValueBox<PacketSocketLink?>(nil)

    public init(configuration: Configuration) {
        self.configuration = configuration
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
        closeLink()
        // A connected socket hears ICMP "port unreachable" (ECONNREFUSED) and takes datagrams from the
        // device's address only.
        let socket = try Self.connectedSocket(to: remote, name: name)
        let name = self.name
        let codec = NIOLockedValueBox(DatagramCodec())
        let opened: PacketSocketLink
        do {
            opened = try PacketSocketLink(
                readFD: socket, writeFD: socket, receiveSize: Self.receiveCapacity(mtu: configuration.mtu),
                emptyPacketEnds: false,
                onPacket: { datagram in
                    for event in codec.withLockedValue({ $0.decode(datagram) }) {
                        switch event {
                        case .packet(let packet): handler(.packet(packet))
                        case .dropped(let drop): handler(.dropped(drop))
                        }
                    }
                },
                onClose: { end in handler(.closed(McuMgrError(.transport, Self.message(for: end, name: name)))) })
        } catch {
            SystemCall.close(socket)
            throw McuMgrError(.transport, "cannot open a UDP socket for \(name): \(error)")
        }
        link.withLockedValue { $0 = opened }
    }

    /// What ended the link, for the user.
    static func message(for end: PacketSocketLink.End, name: String) -> String {
        switch end.error?.code {
        case ECONNREFUSED: return refusedMessage(name)
        case EMSGSIZE: return "\(name) cannot take a datagram this large; lower the MTU (`mtu=` in the device URI)"
        default: return "UDP socket error for \(name): \(end.reason ?? "the socket closed")"
        }
    }

    static func refusedMessage(_ name: String) -> String {
        "\(name) refused the request (ICMP port unreachable): nothing listens on that port; check the address and port (default 1337) and that the device runs SMP over UDP"
    }

    /// The largest UDP payload (IPv4: 65535 - 20 - 8).
    public static let largestDatagram = 65507

    /// Bytes read per datagram. A device sizes its answers from its own buffers, not from our MTU (an fs
    /// download chunk fills its `buf_size`), and a datagram longer than the read buffer is cut: so every
    /// datagram UDP can carry fits, and a larger MTU too.
    static func receiveCapacity(mtu: Int) -> Int {
        max(mtu, largestDatagram)
    }

    /// A non-blocking UDP socket connected to `remote`.
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
        guard let current = link.withLockedValue({ $0 }), current.send([packet]) else {
            throw McuMgrError(.transport, "the UDP socket for \(name) is closed")
        }
    }

    public func close() async {
        closeLink()
    }

    /// Ends the current link, if any (its thread closes the socket).
    private func closeLink() {
        link.withLockedValue { link in
            link?.close()
            link = nil
        }
    }
}
