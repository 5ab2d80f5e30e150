/// SMP over a serial console (UART, USB CDC-ACM, Zephyr shell): PROTOCOL.md §5.1.
///
/// A packet `P` travels as `len_be16(P.count + 2) ‖ P ‖ crc16xmodem_be16(P)`, Base64-encoded and cut
/// into newline-terminated lines; the first line starts with `0x06 0x09`, each following one with
/// `0x04 0x14`.
///
/// The decoder shares the line with console output: it skips everything between frames (log lines,
/// prompts, ANSI escapes, `\r`), accepts both Zephyr's frames (each Base64-encoded on its own, CRC
/// possibly in an extra frame) and MCUboot's (one Base64 text cut into lines), and reports every
/// discarded frame once. Memory stays bounded: a packet never buffers more than its announced length
/// (at most `maximumPacketSize`), and bytes outside frames are never buffered.
public struct ConsoleSerialCodec: SMPFramingCodec {
    /// Marker that starts the first line of a packet.
    public static let startMarker: [UInt8] = [0x06, 0x09]
    /// Marker that starts each following line of a packet.
    public static let continuationMarker: [UInt8] = [0x04, 0x14]
    /// Zephyr's `MCUMGR_SERIAL_MAX_FRAME`: a line of 127 bytes including the marker and the newline.
    public static let defaultMaximumLineLength = 127
    /// Largest SMP packet: an 8-byte header and a payload of up to 65535 bytes.
    public static let defaultMaximumPacketSize = 65535 + SMPHeader.size
    /// Default longest received line (after the marker) before it is dropped as noise.
    public static let defaultMaximumReceivedLineLength = 4096
    /// Largest packet `encode` accepts: the 16-bit length field counts the packet and its 2-byte CRC.
    public static let largestEncodablePacketSize = 65535 - 2

    /// Longest line `encode` produces, in bytes, including the 2 marker bytes and the newline.
    public let maximumLineLength: Int
    /// Largest packet (header and payload) the decoder accepts; longer announced lengths are dropped
    /// as soon as the length field is read.
    public let maximumPacketSize: Int
    /// Longest received line, in bytes after the marker, before it is dropped (`.lineTooLong`).
    public let maximumReceivedLineLength: Int

    private enum Scan: Sendable {
        /// Between frames: everything but a marker's first byte is skipped.
        case noise
        /// Saw 0x06 or 0x04; the next byte decides whether it starts a frame.
        case marker(UInt8)
        /// Inside a line of the packet being received.
        case frameLine
        /// Inside a line being ignored (after a drop, or a continuation of a dropped packet).
        case skippedLine
    }

    private enum Reception: Sendable {
        /// No packet started.
        case idle
        /// A start frame came and the packet is not complete.
        case receiving
        /// The packet in progress was dropped; its continuation lines are skipped without a report.
        case discarding
    }

    private var scan = Scan.noise
    private var reception = Reception.idle
    /// Bytes of the current line after its marker.
    private var lineLength = 0
    /// Decoded bytes of the packet in progress: length field, packet, CRC.
    private var body: [UInt8] = []
    /// The length field of the packet in progress, once decoded.
    private var announcedLength: Int?
    /// Decoded bytes beyond the announced length in the current line, counted but not stored.
    private var overrun = 0
    private var base64 = Base64.StreamDecoder()

    /// - Parameters:
    ///   - maximumLineLength: longest line `encode` writes, at least 7; 127 suits every Zephyr and
    ///     MCUboot receiver.
    ///   - maximumPacketSize: largest packet the decoder accepts.
    ///   - maximumReceivedLineLength: longest line the decoder buffers before dropping it.
    public init(
        maximumLineLength: Int = defaultMaximumLineLength,
        maximumPacketSize: Int = defaultMaximumPacketSize,
        maximumReceivedLineLength: Int = defaultMaximumReceivedLineLength
    ) {
        precondition(maximumLineLength >= 7, "a console frame line needs room for a marker, 4 Base64 characters and a newline")
        precondition(maximumPacketSize >= 0, "maximumPacketSize must not be negative")
        precondition(maximumReceivedLineLength >= 4, "maximumReceivedLineLength must allow one Base64 quad")
        self.maximumLineLength = maximumLineLength
        self.maximumPacketSize = maximumPacketSize
        self.maximumReceivedLineLength = maximumReceivedLineLength
    }

    /// Base64 characters per line: what fits after the marker and before the newline, in whole quads.
    public var base64CharactersPerLine: Int { (maximumLineLength - 3) / 4 * 4 }

    /// Number of bytes the decoder holds for the packet in progress.
    var bufferedByteCount: Int { body.count }

    // MARK: Encoding

    /// Frames a packet as console lines, each with its marker and newline.
    /// - Precondition: `packet.count <= largestEncodablePacketSize`.
    public func encode(_ packet: [UInt8]) -> [[UInt8]] {
        precondition(
            packet.count <= Self.largestEncodablePacketSize,
            "a \(packet.count)-byte packet does not fit the serial length field (at most \(Self.largestEncodablePacketSize))"
        )
        let lengthField = packet.count + 2
        let crc = CRC16XMODEM.checksum(packet)
        var body: [UInt8] = []
        body.reserveCapacity(packet.count + 4)
        body.append(UInt8(truncatingIfNeeded: lengthField >> 8))
        body.append(UInt8(truncatingIfNeeded: lengthField))
        body.append(contentsOf: packet)
        body.append(UInt8(truncatingIfNeeded: crc >> 8))
        body.append(UInt8(truncatingIfNeeded: crc))
        var text: [UInt8] = []
        body.withUnsafeBufferPointer { Base64.encode($0, into: &text) }

        let perLine = base64CharactersPerLine
        var lines: [[UInt8]] = []
        lines.reserveCapacity((text.count + perLine - 1) / perLine)
        var start = 0
        while start < text.count {
            let end = min(start + perLine, text.count)
            var line: [UInt8] = []
            line.reserveCapacity(end - start + 3)
            line.append(contentsOf: start == 0 ? Self.startMarker : Self.continuationMarker)
            line.append(contentsOf: text[start..<end])
            line.append(0x0A)
            lines.append(line)
            start = end
        }
        return lines
    }

    public func encodedSize(ofPacket packetSize: Int) -> Int {
        let characters = Base64.encodedCount(of: packetSize + 4)
        let perLine = base64CharactersPerLine
        let lines = (characters + perLine - 1) / perLine
        return characters + 3 * lines
    }

    // MARK: Decoding

    public mutating func decode(_ bytes: [UInt8]) -> [SMPFramingEvent] {
        var events: [SMPFramingEvent] = []
        bytes.withUnsafeBufferPointer { input in
            Base64.decodeTable.withUnsafeBufferPointer { table in
                var index = 0
                while index < input.count {
                    switch scan {
                    case .noise:
                        while index < input.count, input[index] != 0x06, input[index] != 0x04 { index += 1 }
                        if index < input.count {
                            scan = .marker(input[index])
                            index += 1
                        }
                    case .marker(let first):
                        let byte = input[index]
                        if first == 0x06, byte == 0x09 {
                            index += 1
                            startFrame(&events)
                        } else if first == 0x04, byte == 0x14 {
                            index += 1
                            continuationFrame(&events)
                        } else {
                            scan = .noise  // look at this byte again: it may start a marker
                        }
                    case .skippedLine:
                        while index < input.count {
                            let byte = input[index]
                            if byte == 0x0A {
                                index += 1
                                scan = .noise
                                break
                            }
                            if byte == 0x06 || byte == 0x04 {
                                scan = .noise
                                break
                            }
                            index += 1
                        }
                    case .frameLine:
                        index = consumeFrameLine(input, from: index, table: table, events: &events)
                    }
                }
            }
        }
        return events
    }

    public mutating func reset() {
        scan = .noise
        reception = .idle
        lineLength = 0
        body.removeAll()
        announcedLength = nil
        overrun = 0
        base64.reset()
    }

    private mutating func startFrame(_ events: inout [SMPFramingEvent]) {
        if case .receiving = reception {
            events.append(.dropped(.incompletePacket(received: max(0, body.count - 2), expected: announcedLength ?? 0)))
        }
        reception = .receiving
        body.removeAll(keepingCapacity: true)
        announcedLength = nil
        overrun = 0
        base64.reset()
        lineLength = 0
        scan = .frameLine
    }

    private mutating func continuationFrame(_ events: inout [SMPFramingEvent]) {
        lineLength = 0
        switch reception {
        case .receiving:
            scan = .frameLine
        case .idle:
            events.append(.dropped(.orphanContinuation))
            reception = .discarding
            scan = .skippedLine
        case .discarding:
            scan = .skippedLine
        }
    }

    /// Drops the packet in progress; the rest of the line and its continuations are skipped.
    private mutating func dropPacket(_ reason: SMPFramingDrop, _ events: inout [SMPFramingEvent]) {
        events.append(.dropped(reason))
        reception = .discarding
        body.removeAll(keepingCapacity: true)
        announcedLength = nil
        overrun = 0
        base64.reset()
        scan = .skippedLine
    }

    /// Decodes line bytes until the line ends, is cut, fails, or the input runs out; returns the index
    /// of the first byte not consumed.
    private mutating func consumeFrameLine(
        _ input: UnsafeBufferPointer<UInt8>, from start: Int, table: UnsafeBufferPointer<UInt8>,
        events: inout [SMPFramingEvent]
    ) -> Int {
        var index = start
        while index < input.count {
            let byte = input[index]
            if byte == 0x0A {
                endFrameLine(&events)
                return index + 1
            }
            if byte == 0x06 || byte == 0x04 {
                // Never part of Base64: another frame begins before this line ended.
                dropPacket(.truncatedFrame(length: lineLength), &events)
                scan = .noise
                return index
            }
            index += 1
            lineLength += 1
            if lineLength > maximumReceivedLineLength {
                dropPacket(.lineTooLong(length: lineLength), &events)
                return index
            }
            if byte == 0x0D { continue }  // a stray carriage return
            guard let decoded = base64.feed(table[Int(byte)]) else {
                dropPacket(.invalidBase64, &events)
                return index
            }
            if decoded.count > 0, !append(decoded, &events) {
                return index
            }
        }
        return index
    }

    /// Appends decoded bytes; reads the length field when it completes. Returns false after a drop.
    @inline(__always)
    private mutating func append(_ decoded: (count: Int, bytes: UInt32), _ events: inout [SMPFramingEvent]) -> Bool {
        for position in 0..<decoded.count {
            let byte = UInt8(truncatingIfNeeded: decoded.bytes >> (16 - 8 * position))
            if let announced = announcedLength {
                if body.count < announced + 2 {
                    body.append(byte)
                } else {
                    overrun += 1
                }
                continue
            }
            body.append(byte)
            guard body.count == 2 else { continue }
            let announced = Int(body[0]) << 8 | Int(body[1])
            guard announced >= 2 else {
                dropPacket(.invalidLength(announced: announced), &events)
                return false
            }
            guard announced - 2 <= maximumPacketSize else {
                dropPacket(.lengthTooLarge(announced: announced - 2, limit: maximumPacketSize), &events)
                return false
            }
            announcedLength = announced
            body.reserveCapacity(announced + 2)
        }
        return true
    }

    private mutating func endFrameLine(_ events: inout [SMPFramingEvent]) {
        scan = .noise
        guard let announced = announcedLength else { return }  // length not complete yet
        if overrun > 0 {
            dropPacket(.lengthOverrun(announced: announced, received: announced + overrun), &events)
            scan = .noise
            return
        }
        guard body.count == announced + 2 else { return }  // more frames to come
        if base64.pendingCount != 0 {
            dropPacket(.invalidBase64, &events)
            scan = .noise
            return
        }
        let packetEnd = body.count - 2
        let expected = UInt16(body[packetEnd]) << 8 | UInt16(body[packetEnd + 1])
        let actual = CRC16XMODEM.checksum(body[2..<packetEnd])
        if expected == actual {
            events.append(.packet(Array(body[2..<packetEnd])))
        } else {
            events.append(.dropped(.crcMismatch(expected: expected, actual: actual)))
        }
        reception = .idle
        body.removeAll(keepingCapacity: true)
        announcedLength = nil
        base64.reset()
    }
}
