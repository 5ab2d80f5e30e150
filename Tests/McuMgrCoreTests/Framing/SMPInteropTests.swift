import McuMgrCore
import Testing
import TestSupport

/// Console framing and whole messages checked against the PyPI `smp` package.
@Suite("Interoperability with PyPI smp", .enabled(if: PySMP.isAvailable, PySMP.unavailableComment))
struct SMPInteropTests {
    static let echoPacket: [UInt8] = [0x0A, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00,
                                      0xA1, 0x61, 0x64, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F]

    /// Deterministic packet contents of a given size.
    static func packet(size: Int) -> [UInt8] {
        var random = SplitMix64(seed: UInt64(size) &* 0x1234_5678 &+ 1)
        return random.bytes(size)
    }

    @Test func ourFramesDecodedBySMP() throws {
        let sizes = Array(0...2500)
        let codecs = [ConsoleSerialCodec(), ConsoleSerialCodec(maximumLineLength: 8), ConsoleSerialCodec(maximumLineLength: 256)]
        var requests: [PySMP.Request] = []
        var packets: [[UInt8]] = []
        for (index, codec) in codecs.enumerated() {
            for size in sizes where index == 0 || size % 37 == 0 || size < 200 {
                let packet = Self.packet(size: size)
                packets.append(packet)
                requests.append(PySMP.Request(operation: "serial_decode", frames: codec.encode(packet).map(\.pySMPHex)))
            }
        }
        let replies = try PySMP.run(requests)
        for (packet, reply) in zip(packets, replies) {
            #expect(reply.error == nil, "size \(packet.count): \(reply.error ?? "")")
            let matches = reply.hex.flatMap([UInt8].init(pySMPHex:)) == packet
            #expect(matches, "size \(packet.count): smp decoded something else")
        }
    }

    @Test func framesEncodedBySMPDecodedByOurs() throws {
        // smp's own default line length (127, which gives it 120 Base64 characters a line) and others.
        var cases: [(packet: [UInt8], lineLength: Int)] = []
        for size in 0...2500 { cases.append((Self.packet(size: size), 127)) }
        for lineLength in [8, 9, 12, 64, 128, 131, 256, 1024] {
            for size in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 89, 90, 91, 92, 93, 94, 95, 96, 97, 180, 181, 182, 183, 184, 1000, 2500] {
                cases.append((Self.packet(size: size), lineLength))
            }
        }
        let replies = try PySMP.run(cases.map {
            PySMP.Request(operation: "serial_encode", hex: $0.packet.pySMPHex, lineLength: $0.lineLength)
        })
        var stream: [UInt8] = []
        var expected: [SMPFramingEvent] = []
        var codec = ConsoleSerialCodec()
        for (testCase, reply) in zip(cases, replies) {
            let frames = (reply.frames ?? []).compactMap([UInt8].init(pySMPHex:))
            #expect(!frames.isEmpty, "size \(testCase.packet.count): \(reply.error ?? "no frames")")
            let events = codec.decode(frames.flatMap { $0 })
            let matches = events == [.packet(testCase.packet)]
            #expect(matches,
                    "size \(testCase.packet.count), line \(testCase.lineLength): \(FramingCodecVerifier.difference(events, [.packet(testCase.packet)]))")
            if testCase.packet.count % 97 == 0 || testCase.lineLength != 127 {
                stream += Array("uart:~$ \r\n".utf8) + frames.flatMap { $0 }
                expected.append(.packet(testCase.packet))
            }
        }
        // A selection again, as one noisy stream, through the split verifier (no byte-by-byte: it is long).
        FramingCodecVerifier.verifyStream(
            { ConsoleSerialCodec() }, input: stream, expected: expected, randomSplits: 10, byteByByte: false)
    }

    @Test func echoRequestBuiltBySMP() throws {
        let replies = try PySMP.run([
            PySMP.Request(operation: "echo_request", version: 1, sequence: 0x42, text: "hello"),
            PySMP.Request(operation: "echo_request", version: 0, sequence: 7, text: String(repeating: "é", count: 300)),
            PySMP.Request(operation: "serial_encode", hex: Self.echoPacket.pySMPHex, lineLength: 127),
        ])
        // The §1.6 vector, byte for byte.
        let echo = try #require(replies[0].hex.flatMap([UInt8].init(pySMPHex:)))
        #expect(echo == Self.echoPacket)
        let packet = try SMPPacket(decoding: echo)
        #expect(packet.header == SMPHeader(operation: .write, length: 9, group: .os, sequence: 0x42, command: McuMgrCommand(0)))
        #expect(try CBOR(decoding: packet.payload)["d"]?.string == "hello")

        // A v1 request with a longer payload.
        let long = try SMPPacket(decoding: try #require(replies[1].hex.flatMap([UInt8].init(pySMPHex:))))
        #expect(long.header.version == .v1)
        #expect(long.header.sequence == 7)
        #expect(try CBOR(decoding: long.payload)["d"]?.string == String(repeating: "é", count: 300))

        // smp's serial frames of the echo request are exactly the §5.1 frame.
        let frames = try #require(replies[2].frames).compactMap([UInt8].init(pySMPHex:))
        #expect(frames == [[0x06, 0x09] + Array("ABMKAAAJAABCAKFhZGVoZWxsb0YZ".utf8) + [0x0A]])
    }

    @Test func ourMessagesParsedBySMP() throws {
        let request = SMPPacket(
            header: SMPHeader(operation: .write, length: 0, group: .os, sequence: 0x42, command: McuMgrCommand(0)),
            payload: CBOR.textMap(["d": "hello"]).encoded)
        let response = SMPPacket(
            header: SMPHeader(operation: .writeResponse, length: 0, group: .os, sequence: 0x42, command: McuMgrCommand(0)),
            payload: [0xBF, 0x61, 0x72, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F, 0xFF])  // indefinite map, as zcbor
        var random = SplitMix64(seed: 40)
        let chunk = random.bytes(300)
        let upload = SMPPacket(
            header: SMPHeader(operation: .write, length: 0, group: .image, sequence: 9, command: McuMgrCommand(1)),
            payload: CBOR.textMap(["off": .int(4096), "data": .bytes(chunk), "len": .int(100_000)]).encoded)
        let replies = try PySMP.run([
            PySMP.Request(operation: "echo_request_loads", hex: request.bytes.pySMPHex),
            PySMP.Request(operation: "echo_response_loads", hex: response.bytes.pySMPHex),
            PySMP.Request(operation: "upload_request_loads", hex: upload.bytes.pySMPHex),
            PySMP.Request(operation: "upload_request", hex: chunk.pySMPHex, length: 100_000, sequence: 9, offset: 4096),
        ])
        #expect(request.bytes == Self.echoPacket)
        #expect(replies[0].error == nil, "\(replies[0].error ?? "")")
        #expect(replies[0].text == "hello" && replies[0].sequence == 0x42 && replies[0].version == 1)
        #expect(replies[1].error == nil, "\(replies[1].error ?? "")")
        #expect(replies[1].text == "hello" && replies[1].sequence == 0x42 && replies[1].op == 3)
        #expect(replies[2].error == nil, "\(replies[2].error ?? "")")
        #expect(replies[2].offset == 4096 && replies[2].length == 100_000 && replies[2].data == chunk.pySMPHex)

        // smp's upload request, through our console framing and back.
        let built = try #require(replies[3].hex.flatMap([UInt8].init(pySMPHex:)), "\(replies[3].error ?? "")")
        var codec = ConsoleSerialCodec()
        #expect(codec.decode(codec.encode(built).flatMap { $0 }) == [.packet(built)])
        let parsed = try SMPPacket(decoding: built)
        #expect(parsed.header.group == .image && parsed.header.sequence == 9)
        let body = try CBOR(decoding: parsed.payload)
        #expect(body["off"]?.int == 4096)
        #expect(body["len"]?.int == 100_000)
        #expect(body["data"]?.byteString == chunk)
    }
}
