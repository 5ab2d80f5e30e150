/// SMP over a raw UART (PROTOCOL.md §5.2): unencoded packets back to back, each delimited by its
/// header's length field.
///
/// With no markers, a corrupted byte can desynchronise the stream; the decoder then skips bytes one at
/// a time until it finds a header that can be valid (reserved bits clear, version v1 or v2, operation
/// 0-3, size within `maximumPacketSize`), and reports the skipped run once as `.skippedBytes`. Devices
/// discard a partial packet after an input timeout; call `reset()` for the same behaviour.
public struct RawSerialCodec: SMPFramingCodec {
    /// Largest SMP packet: an 8-byte header and a payload of up to 65535 bytes.
    public static let defaultMaximumPacketSize = 65535 + SMPHeader.size

    /// Largest packet (header and payload) the decoder accepts; a header announcing more is treated
    /// as garbage.
    public let maximumPacketSize: Int

    private var buffer: [UInt8] = []
    /// Start of the unconsumed bytes in `buffer`.
    private var readIndex = 0
    /// Bytes skipped since the last valid header, reported when the next one is found.
    private var skipped = 0

    /// - Parameter maximumPacketSize: largest packet the decoder accepts, at least the 8-byte header.
    public init(maximumPacketSize: Int = defaultMaximumPacketSize) {
        precondition(maximumPacketSize >= SMPHeader.size, "maximumPacketSize must hold an SMP header")
        self.maximumPacketSize = maximumPacketSize
    }

    /// Number of received bytes held for a packet not yet complete.
    var bufferedByteCount: Int { buffer.count - readIndex }

    /// The packet itself: raw serial adds nothing.
    public func encode(_ packet: [UInt8]) -> [[UInt8]] { [packet] }

    public func encodedSize(ofPacket packetSize: Int) -> Int { packetSize }

    public mutating func decode(_ bytes: [UInt8]) -> [SMPFramingEvent] {
        buffer.append(contentsOf: bytes)
        var events: [SMPFramingEvent] = []
        while buffer.count - readIndex >= SMPHeader.size {
            guard let size = packetSize(headerAt: readIndex) else {
                readIndex += 1
                skipped += 1
                continue
            }
            if skipped > 0 {
                events.append(.dropped(.skippedBytes(count: skipped)))
                skipped = 0
            }
            guard buffer.count - readIndex >= size else { break }
            events.append(.packet(Array(buffer[readIndex..<readIndex + size])))
            readIndex += size
        }
        compact()
        return events
    }

    /// Forgets a partial packet and any skipped bytes not yet reported (the input timeout).
    public mutating func reset() {
        buffer.removeAll()
        readIndex = 0
        skipped = 0
    }

    /// The whole packet size announced by the header at `index`, or nil when it cannot be a header.
    private func packetSize(headerAt index: Int) -> Int? {
        let first = buffer[index]
        guard first & 0b1110_0000 == 0,  // reserved bits
              (first >> 3) & 0b11 <= SMPVersion.v2.rawValue,
              first & 0b111 <= SMPOperation.writeResponse.rawValue
        else { return nil }
        let size = SMPHeader.size + (Int(buffer[index + 2]) << 8 | Int(buffer[index + 3]))
        return size <= maximumPacketSize ? size : nil
    }

    private mutating func compact() {
        if readIndex == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 4 * 65536)
            readIndex = 0
        } else if readIndex >= 4096, readIndex * 2 >= buffer.count {
            buffer.removeSubrange(0..<readIndex)
            readIndex = 0
        }
    }
}
