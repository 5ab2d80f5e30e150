/// SMP over Bluetooth LE GATT (PROTOCOL.md §5.5): a packet travels as consecutive ATT payloads of at
/// most `maximumWriteLength` bytes (ATT MTU − 3), with nothing added; the receiver concatenates them
/// until the 8-byte header's length is reached.
///
/// Both directions use the same rules, so the codec serves the client (writes out, notifications in)
/// and a peripheral (notifications out, writes in). Each `decode` call is one ATT payload: one
/// notification or one write. A packet always starts in a fresh payload (Zephyr's reassembly refuses
/// a fragment that runs past the end of its packet, and its sender never packs two messages into one
/// notification), so a payload that overruns the packet in progress drops that packet, and a payload
/// that should start a packet but carries no valid header is dropped on its own. A header split over
/// two payloads (only possible below Bluetooth's 23-byte minimum MTU) is accepted.
public struct BLEFramingCodec: SMPFramingCodec {
    /// ATT payload of the minimum LE ATT MTU (23 − 3 bytes).
    public static let minimumWriteLength = 20
    /// Largest SMP packet: an 8-byte header and a payload of up to 65535 bytes.
    public static let defaultMaximumPacketSize = 65535 + SMPHeader.size

    /// Largest ATT payload per write or notification: the negotiated ATT MTU − 3.
    public let maximumWriteLength: Int
    /// Largest packet (header and payload) the decoder accepts.
    public let maximumPacketSize: Int

    /// Bytes of the packet in progress (empty when between packets).
    private var pending: [UInt8] = []
    /// Size of the packet in progress (header included), once its header is complete.
    private var expectedSize: Int?

    /// - Parameters:
    ///   - maximumWriteLength: largest ATT payload (ATT MTU − 3), at least 1.
    ///   - maximumPacketSize: largest packet the decoder accepts, at least the 8-byte header.
    public init(maximumWriteLength: Int, maximumPacketSize: Int = defaultMaximumPacketSize) {
        precondition(maximumWriteLength >= 1, "an ATT payload holds at least one byte")
        precondition(maximumPacketSize >= SMPHeader.size, "maximumPacketSize must hold an SMP header")
        self.maximumWriteLength = maximumWriteLength
        self.maximumPacketSize = maximumPacketSize
    }

    /// Largest value of one ATT write or notification (`BT_ATT_MAX_VALUE_LEN`).
    public static let attributeValueLimit = 512
    /// Largest write value a BlueZ peripheral takes: its bluetoothd (5.66) checks the write PDU's
    /// length, handle included, against 512 and drops a longer Write Command without a word (510), and
    /// between two bluetoothd the EATT bearers carry at most 509 (measured: 510-byte writes vanish
    /// there, 509-byte ones arrive).
    public static let blueZPeripheralWriteLimit = 509

    /// The longest write a client should send over a link whose ATT MTU is `attMTU`: the ATT payload
    /// (MTU − 3), at most an attribute value (512 bytes: BlueZ's AcquireWrite socket reads 512 bytes
    /// and sends a longer write cut short), and at most 509 toward a peripheral that runs BlueZ.
    public static func maximumWriteLength(attMTU: Int, peripheralRunsBlueZ: Bool = false) -> Int {
        let limit = peripheralRunsBlueZ ? blueZPeripheralWriteLimit : attributeValueLimit
        return max(minimumWriteLength, min(attMTU - 3, limit))
    }

    /// The packet cut into consecutive ATT payloads of `maximumWriteLength` bytes (the last shorter).
    public func encode(_ packet: [UInt8]) -> [[UInt8]] {
        guard packet.count > maximumWriteLength else { return [packet] }
        return stride(from: 0, to: packet.count, by: maximumWriteLength).map { start in
            Array(packet[start..<min(packet.count, start + maximumWriteLength)])
        }
    }

    /// BLE adds no bytes; a packet needs `ceil(packetSize / maximumWriteLength)` writes.
    public func encodedSize(ofPacket packetSize: Int) -> Int { packetSize }

    /// Number of ATT payloads (writes or notifications) that carry an SMP packet of `packetSize` bytes.
    public func fragmentCount(ofPacket packetSize: Int) -> Int {
        max(1, (packetSize + maximumWriteLength - 1) / maximumWriteLength)
    }

    /// Decodes one ATT payload (a notification or a write).
    public mutating func decode(_ bytes: [UInt8]) -> [SMPFramingEvent] {
        guard !bytes.isEmpty else { return [] }
        pending.append(contentsOf: bytes)
        if expectedSize == nil {
            guard pending.count >= SMPHeader.size else { return [] }  // header split over payloads
            switch Self.packetSize(headerOf: pending, limit: maximumPacketSize) {
            case .invalid:
                let length = pending.count
                pending.removeAll(keepingCapacity: true)
                return [.dropped(.invalidHeader(length: length))]
            case .tooLarge(let announced):
                pending.removeAll(keepingCapacity: true)
                return [.dropped(.lengthTooLarge(announced: announced, limit: maximumPacketSize))]
            case .size(let size):
                expectedSize = size
                pending.reserveCapacity(size)
            }
        }
        guard let size = expectedSize else { return [] }
        if pending.count < size { return [] }
        let packet = pending
        pending = []
        expectedSize = nil
        if packet.count > size {
            return [.dropped(.lengthOverrun(announced: size - SMPHeader.size, received: packet.count - SMPHeader.size))]
        }
        return [.packet(packet)]
    }

    /// Forgets a partial packet (after a disconnect or reconnect).
    public mutating func reset() {
        pending = []
        expectedSize = nil
    }

    private enum HeaderCheck {
        case size(Int), tooLarge(announced: Int), invalid
    }

    /// What the header at the start of `bytes` (at least 8 of them) announces.
    private static func packetSize(headerOf bytes: [UInt8], limit: Int) -> HeaderCheck {
        let first = bytes[0]
        guard first & 0b1110_0000 == 0,  // reserved bits
              (first >> 3) & 0b11 <= SMPVersion.v2.rawValue,
              first & 0b111 <= SMPOperation.writeResponse.rawValue
        else { return .invalid }
        let size = SMPHeader.size + (Int(bytes[2]) << 8 | Int(bytes[3]))
        return size <= limit ? .size(size) : .tooLarge(announced: size)
    }
}
