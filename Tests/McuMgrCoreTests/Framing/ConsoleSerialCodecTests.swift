@testable import McuMgrCore
import Testing
import TestSupport

@Suite("Console serial framing")
struct ConsoleSerialCodecTests {
    /// PROTOCOL.md §1.6: echo "hello", v2 write, sequence 0x42.
    static let echoPacket: [UInt8] = [0x0A, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00,
                                      0xA1, 0x61, 0x64, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F]
    /// PROTOCOL.md §5.1: its single console frame.
    static let echoFrame: [UInt8] = [0x06, 0x09] + Array("ABMKAAAJAABCAKFhZGVoZWxsb0YZ".utf8) + [0x0A]

    func frames(_ packet: [UInt8], codec: ConsoleSerialCodec = ConsoleSerialCodec()) -> [UInt8] {
        codec.encode(packet).flatMap { $0 }
    }

    // MARK: Encoding

    @Test func encodesTheEchoVector() {
        let codec = ConsoleSerialCodec()
        #expect(codec.encode(Self.echoPacket) == [Self.echoFrame])
        #expect(codec.encodedSize(ofPacket: Self.echoPacket.count) == Self.echoFrame.count)
    }

    @Test func encodedLinesRespectTheLineLength() {
        var random = SplitMix64(seed: 1)
        for lineLength in [7, 8, 10, 64, 127, 128, 131, 4096] {
            let codec = ConsoleSerialCodec(maximumLineLength: lineLength)
            for size in [0, 1, 2, 3, 88, 89, 90, 91, 92, 93, 94, 182, 183, 184, 185, 1000] {
                let packet = random.bytes(size)
                let lines = codec.encode(packet)
                #expect(lines.first?.prefix(2) == [0x06, 0x09])
                for (index, line) in lines.enumerated() {
                    #expect(line.count <= lineLength)
                    #expect(line.last == 0x0A)
                    #expect((line.count - 3) % 4 == 0)
                    if index > 0 { #expect(line.prefix(2) == [0x04, 0x14]) }
                    if index < lines.count - 1 { #expect(line.count - 3 == codec.base64CharactersPerLine) }
                }
                #expect(lines.reduce(0) { $0 + $1.count } == codec.encodedSize(ofPacket: size))
            }
        }
        #expect(ConsoleSerialCodec().base64CharactersPerLine == 124)
    }

    @Test func frameBoundariesAtTheDefaultLineLength() {
        // 124 Base64 characters carry 93 body bytes: body = packet + 4.
        let codec = ConsoleSerialCodec()
        #expect(codec.encode([UInt8](repeating: 1, count: 89)).count == 1)
        #expect(codec.encode([UInt8](repeating: 1, count: 90)).count == 2)
        #expect(codec.encode([UInt8](repeating: 1, count: 182)).count == 2)
        #expect(codec.encode([UInt8](repeating: 1, count: 183)).count == 3)
    }

    // MARK: Decoding valid input

    @Test func decodesTheEchoVector() {
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: Self.echoFrame, expected: [.packet(Self.echoPacket)])
    }

    @Test func roundTripsEveryPacketSizeUpTo3000() {
        var random = SplitMix64(seed: 2)
        var codec = ConsoleSerialCodec()
        for size in 0...3000 {
            let packet = random.bytes(size)
            let events = codec.decode(frames(packet))
            let matches = events == [.packet(packet)]
            #expect(matches, "size \(size): \(FramingCodecVerifier.difference(events, [.packet(packet)]))")
        }
        #expect(codec.bufferedByteCount == 0)
    }

    @Test func packetsOfInterestingSizesSurviveAnySplit() {
        var random = SplitMix64(seed: 3)
        let sizes = [0, 1, 2, 3, 4, 5, 8, 17, 88, 89, 90, 91, 92, 93, 181, 182, 183, 184, 185, 500, 3000]
        let packets = sizes.map { random.bytes($0) }
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: packets.flatMap { frames($0) }, expected: packets.map { .packet($0) })
    }

    @Test func acceptsZephyrStyleFramesWithPerFramePaddingAndSpilledCRC() {
        var random = SplitMix64(seed: 4)
        let sizes = [0, 1, 2, 3, 4, 89, 90, 91, 92, 93, 94, 200, 1000]
        let packets = sizes.map { random.bytes($0) }
        let input = packets.flatMap { zephyrFrames($0) }
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: input, expected: packets.map { .packet($0) })
    }

    @Test func acceptsLinesThatAreNotWholeQuadsWhenConcatenated() {
        // Some encoders cut the Base64 text anywhere; decoding the concatenation still works.
        let text = Array(Self.echoFrame.dropFirst(2).dropLast())
        let input = [0x06, 0x09] + text[0..<5] + [0x0A, 0x04, 0x14] + text[5..<11] + [0x0A, 0x04, 0x14] + text[11...] + [0x0A]
        FramingCodecVerifier.verifyStream({ ConsoleSerialCodec() }, input: input, expected: [.packet(Self.echoPacket)])
    }

    @Test func skipsConsoleNoiseBetweenFrames() {
        var random = SplitMix64(seed: 5)
        let noises: [[UInt8]] = [
            Array("[00:00:01.234,000] <inf> main: Booting Zephyr OS build v3.7.0\r\n".utf8),
            Array("uart:~$ ".utf8),
            Array("\u{1B}[1;32muart:~$ \u{1B}[m\u{1B}[8D\u{1B}[J".utf8),
            Array("\r\n\r\n".utf8),
            [0x06, 0x06, 0x41, 0x04, 0x04, 0x0A, 0x06],  // marker-like bytes that are not markers
            random.bytes(300).map { $0 == 0x06 || $0 == 0x04 ? 0x20 : $0 },
        ]
        var input: [UInt8] = []
        var expected: [SMPFramingEvent] = []
        for (index, size) in [17, 0, 300, 93, 1500, 5].enumerated() {
            input += noises[index % noises.count]
            let packet = random.bytes(size)
            input += frames(packet)
            expected.append(.packet(packet))
        }
        input += noises[0]
        FramingCodecVerifier.verifyStream({ ConsoleSerialCodec() }, input: input, expected: expected)
    }

    @Test func toleratesCarriageReturnsInFrames() {
        let frame = [0x06, 0x09] + Array("ABMKAAAJAABCAKFhZGVoZWxsb0YZ\r\n".utf8)
        FramingCodecVerifier.verifyStream({ ConsoleSerialCodec() }, input: frame, expected: [.packet(Self.echoPacket)])
    }

    // MARK: Drops

    @Test func corruptCRCIsDroppedAndTheNextPacketDecodes() {
        let body: [UInt8] = [0x00, 0x13] + Self.echoPacket + [0x46, 0x18]  // CRC off by one
        let bad = [0x06, 0x09] + base64(body) + [0x0A]
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: bad + Self.echoFrame,
            expected: [.dropped(.crcMismatch(expected: 0x4618, actual: 0x4619)), .packet(Self.echoPacket)])
    }

    @Test func corruptedPayloadFailsTheCRC() {
        var random = SplitMix64(seed: 6)
        let packet = random.bytes(400)
        var input = frames(packet)
        // Flip one Base64 character of the second line into another valid one.
        let position = 127 + 2 + 10
        input[position] = input[position] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let events = FramingCodecVerifier.verifyStream({ ConsoleSerialCodec() }, input: input + frames(packet))
        #expect(events.count == 2)
        if case .dropped(.crcMismatch) = events.first {} else { Issue.record("expected a CRC mismatch, got \(events)") }
        #expect(events.last == .packet(packet))
    }

    @Test func truncatedPacketFollowedByANewStartFrame() {
        var random = SplitMix64(seed: 7)
        let long = random.bytes(500)
        let lines = ConsoleSerialCodec().encode(long)
        let cut = lines[0] + lines[1]  // 2 of 6 lines
        let next = random.bytes(30)
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: cut + frames(next),
            expected: [.dropped(.incompletePacket(received: 93 * 2 - 2, expected: 502)), .packet(next)])
    }

    @Test func orphanContinuationIsDroppedOnce() {
        var random = SplitMix64(seed: 8)
        let lines = ConsoleSerialCodec().encode(random.bytes(500))
        let next = random.bytes(30)
        // The start frame was lost: its four continuations make one drop.
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: lines.dropFirst().flatMap { $0 } + frames(next),
            expected: [.dropped(.orphanContinuation), .packet(next)])
        // After a complete packet, a stray continuation is an orphan too.
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: frames(next) + lines[3] + Self.echoFrame,
            expected: [.packet(next), .dropped(.orphanContinuation), .packet(Self.echoPacket)])
    }

    @Test func hugeClaimedLengthWithNothingFollowingThenAValidPacket() {
        // Length field 65000, a few bytes, then silence, then a real packet.
        let claim = [0x06, 0x09] + base64([0xFD, 0xE8, 0x0A, 0x00, 0x00, 0x09]) + [0x0A]
        var codec = ConsoleSerialCodec()
        _ = codec.decode(claim)
        #expect(codec.bufferedByteCount == 6)
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: claim + Self.echoFrame,
            expected: [.dropped(.incompletePacket(received: 4, expected: 65000)), .packet(Self.echoPacket)])
    }

    @Test func lengthBeyondTheConfiguredLimitIsDroppedAtOnce() {
        var random = SplitMix64(seed: 9)
        let big = random.bytes(2000)
        let small = random.bytes(100)
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec(maximumPacketSize: 1024) }, input: frames(big) + frames(small),
            expected: [.dropped(.lengthTooLarge(announced: 2000, limit: 1024)), .packet(small)])
    }

    @Test func lengthFieldTooSmallForTheCRC() {
        let input = [0x06, 0x09] + base64([0x00, 0x01, 0xAA]) + [0x0A] + Self.echoFrame
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: input,
            expected: [.dropped(.invalidLength(announced: 1)), .packet(Self.echoPacket)])
    }

    @Test func moreDataThanAnnouncedIsAnOverrun() {
        let body: [UInt8] = [0x00, 0x13] + Self.echoPacket + [0x46, 0x19, 0x01, 0x02, 0x03]
        let input = [0x06, 0x09] + base64(body) + [0x0A] + Self.echoFrame
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: input,
            expected: [.dropped(.lengthOverrun(announced: 19, received: 22)), .packet(Self.echoPacket)])
    }

    @Test func invalidBase64IsDropped() {
        for text in ["ABMKAA*JAABCAKFhZGVoZWxsb0YZ", "ABMKAAAJ\u{7F}", "A=MKAAAJ", "ABMK AAAJ", "AB=KAAAJ"] {
            let input = [0x06, 0x09] + Array(text.utf8) + [0x0A] + Self.echoFrame
            FramingCodecVerifier.verifyStream(
                { ConsoleSerialCodec() }, input: input, expected: [.dropped(.invalidBase64), .packet(Self.echoPacket)])
        }
    }

    @Test func frameCutByAnotherFrameIsDropped() {
        let cut = Array(Self.echoFrame.prefix(12))
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: cut + Self.echoFrame,
            expected: [.dropped(.truncatedFrame(length: 10)), .packet(Self.echoPacket)])
    }

    @Test func lineWithoutNewlineStaysBounded() {
        // A start frame announcing 65000 bytes whose line never ends.
        var codec = ConsoleSerialCodec()
        var events = codec.decode([0x06, 0x09] + base64([0xFD, 0xE8, 0x00]))
        let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 1000)
        for _ in 0..<1000 { events += codec.decode(chunk) }  // 1 MB
        #expect(events == [.dropped(.lineTooLong(length: ConsoleSerialCodec.defaultMaximumReceivedLineLength + 1))])
        #expect(codec.bufferedByteCount == 0)
        #expect(codec.decode([0x0A] + Self.echoFrame) == [.packet(Self.echoPacket)])

        // The same through the verifier, with a smaller limit.
        let input = [0x06, 0x09] + base64([0xFD, 0xE8, 0x00]) + [UInt8](repeating: UInt8(ascii: "Q"), count: 3000)
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec(maximumReceivedLineLength: 1000) }, input: input + Self.echoFrame,
            expected: [.dropped(.lineTooLong(length: 1001)), .packet(Self.echoPacket)])
    }

    @Test func noiseWithoutNewlinesIsNeverBuffered() {
        var codec = ConsoleSerialCodec()
        let chunk = Array(String(repeating: "log text without end ", count: 50).utf8)
        for _ in 0..<1000 { #expect(codec.decode(chunk).isEmpty) }
        #expect(codec.bufferedByteCount == 0)
        #expect(codec.decode(Self.echoFrame) == [.packet(Self.echoPacket)])
    }

    @Test func resetForgetsAPartialPacket() {
        var codec = ConsoleSerialCodec()
        let lines = codec.encode([UInt8](repeating: 7, count: 300))
        #expect(codec.decode(lines[0] + lines[1]).isEmpty)
        codec.reset()
        #expect(codec.bufferedByteCount == 0)
        #expect(codec.decode(lines[2]) == [.dropped(.orphanContinuation)])
        #expect(codec.decode(Self.echoFrame) == [.packet(Self.echoPacket)])
    }

    @Test func manyDropsAndPacketsInterleaved() {
        // A long randomized stream: good packets, corrupted lines, lost lines and noise.
        var random = SplitMix64(seed: 10)
        let codec = ConsoleSerialCodec()
        var input: [UInt8] = []
        var goodPackets: [[UInt8]] = []
        for _ in 0..<40 {
            let packet = random.bytes(Int(random.next(below: 700)))
            var lines = codec.encode(packet)
            switch random.next(below: 4) {
            case 0 where lines.count > 1:
                lines.remove(at: Int(random.next(below: UInt64(lines.count))))
            case 1:
                let line = Int(random.next(below: UInt64(lines.count)))
                let at = 2 + Int(random.next(below: UInt64(lines[line].count - 3)))
                lines[line][at] = UInt8(ascii: "!")
            default:
                goodPackets.append(packet)
            }
            input += Array("log \(random.next(below: 1000))\r\n".utf8) + lines.flatMap { $0 }
        }
        input += Self.echoFrame
        goodPackets.append(Self.echoPacket)
        let events = FramingCodecVerifier.verifyStream({ ConsoleSerialCodec() }, input: input, randomSplits: 20)
        let packets = events.compactMap { event -> [UInt8]? in
            if case .packet(let bytes) = event { return bytes }
            return nil
        }
        #expect(packets == goodPackets)
    }

    // MARK: Helpers

    func base64(_ bytes: [UInt8]) -> [UInt8] {
        var text: [UInt8] = []
        bytes.withUnsafeBufferPointer { Base64.encode($0, into: &text) }
        return text
    }

    /// Frames as Zephyr's UART transport writes them: at most 93 raw bytes per frame (the first holds
    /// the length), each frame Base64-encoded on its own, and the CRC in the last frame or an extra one.
    func zephyrFrames(_ packet: [UInt8]) -> [UInt8] {
        let crc = CRC16XMODEM.checksum(packet)
        var chunks: [[UInt8]] = []
        var data = [UInt8(truncatingIfNeeded: (packet.count + 2) >> 8), UInt8(truncatingIfNeeded: packet.count + 2)] + packet[...]
        while !data.isEmpty {
            chunks.append(Array(data.prefix(93)))
            data = Array(data.dropFirst(93))
        }
        if chunks[chunks.count - 1].count <= 91 {
            chunks[chunks.count - 1] += [UInt8(crc >> 8), UInt8(crc & 0xFF)]
        } else {
            chunks.append([UInt8(crc >> 8), UInt8(crc & 0xFF)])
        }
        var output: [UInt8] = []
        for (index, chunk) in chunks.enumerated() {
            output += (index == 0 ? [0x06, 0x09] : [0x04, 0x14]) + base64(chunk) + [0x0A]
        }
        return output
    }
}
