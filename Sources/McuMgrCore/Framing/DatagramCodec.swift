/// SMP over datagrams (UDP, PROTOCOL.md §5.4): one whole packet per datagram, nothing added.
///
/// Each `decode` call is one datagram. A datagram shorter than a header, or whose header length
/// disagrees with its size, is dropped (`.invalidHeader`, `.truncatedPacket`, `.lengthOverrun`); the
/// rest of the header is left to the SMP layer.
public struct DatagramCodec: SMPFramingCodec {
    /// Zephyr's `CONFIG_MCUMGR_TRANSPORT_UDP_MTU` default: the device truncates longer datagrams.
    public static let zephyrReceiveBufferSize = 1500
    /// Default `maximumDatagramSize`: the UDP payload that fits a 1500-byte Ethernet MTU over IPv6
    /// (1500 − 40 IPv6 − 8 UDP) and so also over IPv4, avoiding IP fragmentation, which many device
    /// stacks do not reassemble; also below `zephyrReceiveBufferSize`.
    public static let defaultMaximumDatagramSize = 1452

    /// Largest datagram (SMP header and payload) the planner should send; `encode` does not enforce
    /// it and `decode` accepts larger datagrams.
    public let maximumDatagramSize: Int

    /// - Parameter maximumDatagramSize: largest SMP packet to put in one datagram.
    public init(maximumDatagramSize: Int = defaultMaximumDatagramSize) {
        precondition(maximumDatagramSize >= SMPHeader.size, "a datagram must hold an SMP header")
        self.maximumDatagramSize = maximumDatagramSize
    }

    /// The packet as one datagram.
    public func encode(_ packet: [UInt8]) -> [[UInt8]] { [packet] }

    public func encodedSize(ofPacket packetSize: Int) -> Int { packetSize }

    /// Decodes one datagram.
    public mutating func decode(_ bytes: [UInt8]) -> [SMPFramingEvent] {
        guard bytes.count >= SMPHeader.size else {
            return [.dropped(.invalidHeader(length: bytes.count))]
        }
        let announced = Int(bytes[2]) << 8 | Int(bytes[3])
        let received = bytes.count - SMPHeader.size
        if received < announced {
            return [.dropped(.truncatedPacket(announced: announced, received: received))]
        }
        if received > announced {
            return [.dropped(.lengthOverrun(announced: announced, received: received))]
        }
        return [.packet(bytes)]
    }

    /// Datagrams carry no state between them; nothing to forget.
    public mutating func reset() {}
}
