/// The fragment/reassembly protocol every link codec conforms to.
///
/// Outbound, one SMP packet becomes the link units the link carries (serial lines, a datagram, ATT
/// writes). Inbound, link bytes arrive in any split and whole SMP packets come out; what cannot be
/// used is reported as a drop, never thrown, because a link keeps going after a bad frame.
public protocol SMPFramingCodec: Sendable {
    /// Splits one whole SMP packet (header and payload) into link units, in order.
    func encode(_ packet: [UInt8]) -> [[UInt8]]

    /// Feeds bytes received from the link. Returns, in order, the whole packets completed by them and
    /// the frames that had to be dropped.
    mutating func decode(_ bytes: [UInt8]) -> [SMPFramingEvent]

    /// Forgets any partially received packet (after a reconnect, say).
    mutating func reset()

    /// Number of link bytes `encode` produces for an SMP packet of `packetSize` bytes; used to work out
    /// link ceilings and timeouts.
    func encodedSize(ofPacket packetSize: Int) -> Int
}

/// What a codec produced from received bytes.
public enum SMPFramingEvent: Sendable, Hashable {
    /// A whole SMP packet: header and payload.
    case packet([UInt8])
    /// A frame or partial packet that was discarded, and why.
    case dropped(SMPFramingDrop)
}

/// Why received bytes were discarded.
public enum SMPFramingDrop: Sendable, Hashable, CustomStringConvertible {
    /// The CRC over a reassembled serial packet did not match.
    case crcMismatch(expected: UInt16, actual: UInt16)
    /// A frame line was not valid Base64.
    case invalidBase64
    /// A continuation frame came with no packet in progress.
    case orphanContinuation
    /// A new packet started before the previous one was complete.
    case incompletePacket(received: Int, expected: Int)
    /// More bytes arrived than the packet's length announced.
    case lengthOverrun(announced: Int, received: Int)
    /// A packet announced a length beyond what the codec accepts.
    case lengthTooLarge(announced: Int, limit: Int)
    /// A packet too short to hold an SMP header, or whose header is invalid.
    case invalidHeader(length: Int)
    /// A line longer than the frame limit.
    case lineTooLong(length: Int)
    /// A serial packet whose length field is too small to hold even its CRC.
    case invalidLength(announced: Int)
    /// A frame line cut short by the marker of another frame before its newline.
    case truncatedFrame(length: Int)
    /// Fewer bytes arrived than the packet's length announced (a datagram cut short).
    case truncatedPacket(announced: Int, received: Int)
    /// Stream bytes skipped while looking for the next valid SMP header (raw serial resynchronisation).
    case skippedBytes(count: Int)

    public var description: String {
        switch self {
        case .crcMismatch(let expected, let actual):
            return "CRC mismatch (frame says 0x\(String(expected, radix: 16)), data gives 0x\(String(actual, radix: 16)))"
        case .invalidBase64: return "frame is not valid Base64"
        case .orphanContinuation: return "continuation frame without a start frame"
        case .incompletePacket(let received, let expected):
            return "packet cut short: \(received) of \(expected) bytes before a new packet started"
        case .lengthOverrun(let announced, let received):
            return "packet longer than announced (\(received) > \(announced) bytes)"
        case .lengthTooLarge(let announced, let limit):
            return "packet announces \(announced) bytes, more than the limit of \(limit)"
        case .invalidHeader(let length): return "\(length)-byte packet without a valid SMP header"
        case .lineTooLong(let length): return "frame line of \(length) bytes exceeds the limit"
        case .invalidLength(let announced):
            return "serial packet announces \(announced) bytes, fewer than its 2-byte CRC"
        case .truncatedFrame(let length):
            return "frame line cut short after \(length) bytes by the start of another frame"
        case .truncatedPacket(let announced, let received):
            return "packet shorter than announced (\(received) < \(announced) bytes)"
        case .skippedBytes(let count):
            return "skipped \(count) bytes that do not start a valid SMP packet"
        }
    }
}
