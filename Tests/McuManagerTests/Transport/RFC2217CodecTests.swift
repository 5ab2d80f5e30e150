import McuMgrSerial
import Testing
import TestSupport

/// The Telnet / RFC 2217 client codec, byte by byte: the negotiation ser2net 4.3 really sends (recorded
/// from `ser2net -n` with a `telnet(rfc2217)` accepter), escapes, refusals, subnegotiations split
/// anywhere, NVT CR NUL when binary is refused, and random streams cut at random places.
@Suite struct RFC2217CodecTests {
    typealias Codec = RFC2217Codec
    static let iac: UInt8 = 255

    /// ser2net 4.3.11's greeting: WILL SGA, DO SGA, WILL ECHO, DONT ECHO, DO BINARY, WILL BINARY, DO COM-PORT.
    static let ser2netGreeting: [UInt8] = [
        255, 251, 3, 255, 253, 3, 255, 251, 1, 255, 254, 1, 255, 253, 0, 255, 251, 0, 255, 253, 44,
    ]
    /// Its acknowledgements of 115200 8N1, no flow control (as recorded), after NOTIFY-MODEMSTATE 0.
    static let ser2netAcks: [UInt8] = [
        255, 250, 44, 107, 0, 255, 240,
        255, 250, 44, 101, 0, 1, 194, 0, 255, 240, 255, 250, 44, 102, 8, 255, 240, 255, 250, 44, 103, 1, 255, 240,
        255, 250, 44, 104, 1, 255, 240, 255, 250, 44, 105, 1, 255, 240,
    ]
    static let settingsFor115200: [UInt8] = [
        255, 250, 44, 1, 0, 1, 194, 0, 255, 240, 255, 250, 44, 2, 8, 255, 240, 255, 250, 44, 3, 1, 255, 240,
        255, 250, 44, 4, 1, 255, 240, 255, 250, 44, 5, 1, 255, 240,
    ]

    @Test func startOffersBinarySGAAndComPort() {
        var codec = Codec(settings: .init())
        #expect(codec.start() == [255, 251, 0, 255, 251, 3, 255, 251, 44, 255, 253, 0, 255, 253, 3])
        #expect(codec.start() == [], "options already requested are not requested again")
        #expect(!codec.isNegotiated)
    }

    @Test func ser2netsGreetingIsAnsweredWithTheSettingsAndItsAcksCompleteTheNegotiation() {
        var codec = Codec(settings: .init(baudRate: 115_200))
        _ = codec.start()
        let greeting = codec.decode(Self.ser2netGreeting)
        #expect(greeting.data == [])
        // Only ECHO needs an answer (refused); the rest answer our own requests. Then the settings.
        #expect(greeting.reply == [255, 254, 1] + Self.settingsFor115200)
        #expect(greeting.events == [.comPortAccepted])
        #expect(codec.sendsBinary && codec.receivesBinary)
        #expect(!codec.isNegotiated)
        #expect(codec.pendingAcknowledgements.count == 5)
        let acks = codec.decode(Self.ser2netAcks)
        #expect(acks.reply == [])
        #expect(acks.data == [])
        #expect(
            acks.events == [
                .modemState(0), .acknowledged(.setBaudRate, value: 115_200), .acknowledged(.setDataSize, value: 8),
                .acknowledged(.setParity, value: 1), .acknowledged(.setStopSize, value: 1),
                .acknowledged(.setControl, value: 1),
            ])
        #expect(codec.isNegotiated)
        #expect(codec.acknowledgedBaudRate == 115_200)
    }

    @Test func settingsCarryDataBitsParityStopBitsAndFlowControl() {
        var codec = Codec(
            settings: .init(baudRate: 9600, dataBits: 7, parity: .even, stopBits: .two, hardwareFlowControl: true))
        _ = codec.start()
        let reply = codec.decode([255, 253, 44]).reply
        #expect(
            reply == [
                255, 250, 44, 1, 0, 0, 0x25, 0x80, 255, 240, 255, 250, 44, 2, 7, 255, 240, 255, 250, 44, 3, 3, 255, 240,
                255, 250, 44, 4, 2, 255, 240, 255, 250, 44, 5, 3, 255, 240,
            ])
    }

    @Test func aBaudRateWithAn0xFFByteIsEscapedInTheRequestAndUnescapedInTheAck() {
        var codec = Codec(settings: .init(baudRate: 0x0001_C2FF))
        _ = codec.start()
        let reply = codec.decode([255, 253, 44]).reply
        #expect(Array(reply.prefix(11)) == [255, 250, 44, 1, 0, 1, 194, 255, 255, 255, 240])
        let ack = codec.decode([255, 250, 44, 101, 0, 1, 194, 255, 255, 255, 240])
        #expect(ack.events == [.acknowledged(.setBaudRate, value: 0x0001_C2FF)])
        #expect(codec.acknowledgedBaudRate == 0x0001_C2FF)
    }

    @Test func dataEscapes() {
        var codec = Codec(settings: .init())
        _ = codec.start()
        _ = codec.decode(Self.ser2netGreeting)
        #expect(codec.encode([1, 255, 2, 255, 255, 13, 10, 0]) == [1, 255, 255, 2, 255, 255, 255, 255, 13, 10, 0])
        #expect(codec.decode([1, 255, 255, 2, 13, 0, 10]).data == [1, 255, 2, 13, 0, 10], "binary: CR NUL stays")
        #expect(codec.encode([]) == [])
        // Random data with every byte value: well-formed Telnet that carries exactly the data.
        var random = SplitMix64(seed: 0xFF)
        let data = random.bytes(4000) + [255, 255, 13, 0, 13, 10, 255]
        FramingCodecVerifier.verifyTelnet(codec.encode(data), carrying: data, binary: true, commands: [])
    }

    @Test func otherCommandsAreStripped() {
        var codec = Codec(settings: .init())
        // NOP, DM, BRK, IP, AO, AYT, EC, EL, GA and a stray SE between data bytes.
        var input: [UInt8] = [0x41]
        for command: UInt8 in [241, 242, 243, 244, 245, 246, 247, 248, 249, 240] { input += [255, command, 0x42] }
        let decoded = codec.decode(input)
        #expect(decoded.data == [0x41] + [UInt8](repeating: 0x42, count: 10))
        #expect(decoded.reply == [])
    }

    @Test func unsupportedOptionsAreRefusedAndNothingLoops() {
        var codec = Codec(settings: .init())
        _ = codec.start()
        // DO TERMINAL-TYPE, WILL STATUS, DO ECHO: refused.
        #expect(codec.decode([255, 253, 24]).reply == [255, 252, 24])
        #expect(codec.decode([255, 251, 5]).reply == [255, 254, 5])
        #expect(codec.decode([255, 253, 1]).reply == [255, 252, 1])
        // WONT/DONT of options not in force: no answer (RFC 1143).
        #expect(codec.decode([255, 252, 24, 255, 254, 24]).reply == [])
        // Our requests acknowledged: no answer; a repeated agreement: no answer either.
        #expect(codec.decode([255, 253, 0, 255, 251, 0, 255, 253, 0, 255, 251, 0]).reply == [])
        // The server turns SGA off after it was on: we agree once.
        #expect(codec.decode([255, 251, 3]).reply == [])
        #expect(codec.decode([255, 252, 3]).reply == [255, 254, 3])
        #expect(codec.decode([255, 252, 3]).reply == [])
        // And offers it again: accepted again.
        #expect(codec.decode([255, 251, 3]).reply == [255, 253, 3])
    }

    @Test func aServerThatOffersOptionsFirstGetsTheSameAnswers() {
        // Options the server requests before our start(): we agree to what we support.
        var codec = Codec(settings: .init())
        let decoded = codec.decode([255, 253, 44, 255, 251, 0, 255, 253, 0])
        #expect(Array(decoded.reply.prefix(3)) == [255, 251, 44])
        #expect(Array(decoded.reply.suffix(6)) == [255, 253, 0, 255, 251, 0])
        #expect(decoded.events == [.comPortAccepted])
        #expect(codec.start() == [255, 251, 3, 255, 253, 3], "only what is not yet agreed")
    }

    @Test func refusedComPortIsReported() {
        var codec = Codec(settings: .init())
        _ = codec.start()
        let refused = codec.decode([255, 254, 44])
        #expect(refused.events == [.comPortRefused])
        #expect(refused.reply == [], "a refused request is not answered")
        #expect(codec.comPortRefused)
        #expect(!codec.isNegotiated)
        // After agreeing, a server that withdraws it is answered WONT.
        var second = Codec(settings: .init())
        _ = second.start()
        _ = second.decode([255, 253, 44])
        let withdrawn = second.decode([255, 254, 44])
        #expect(withdrawn.reply == [255, 252, 44])
        #expect(withdrawn.events == [.comPortRefused])
    }

    @Test func nvtModeWhenBinaryIsRefused() {
        var codec = Codec(settings: .init())
        _ = codec.start()
        let refused = codec.decode([255, 252, 0, 255, 254, 0])
        #expect(refused.events == [.binaryRefused(outbound: false), .binaryRefused(outbound: true)])
        #expect(!codec.sendsBinary && !codec.receivesBinary)
        // Out: a CR is followed by NUL (RFC 854), also in CR LF; 0xFF still doubled.
        #expect(codec.encode([0x61, 13, 0x62, 13, 10, 255]) == [0x61, 13, 0, 0x62, 13, 0, 10, 255, 255])
        // In: CR NUL is CR, CR LF stays, a NUL elsewhere is data; a CR at the end of a read, NUL in the next.
        #expect(codec.decode([0x61, 13, 0, 0x62, 13, 10, 0, 0x63]).data == [0x61, 13, 0x62, 13, 10, 0, 0x63])
        #expect(codec.decode([0x64, 13]).data == [0x64, 13])
        #expect(codec.decode([0, 0x65]).data == [0x65])
        // CR then IAC IAC: the 0xFF is data.
        #expect(codec.decode([13, 255, 255]).data == [13, 255])
        // Random data with every byte value: well-formed NVT (no CR without NUL or LF after it).
        var random = SplitMix64(seed: 0x0D)
        let data = random.bytes(4000) + [13, 13, 10, 13, 0, 255, 13]
        FramingCodecVerifier.verifyTelnet(codec.encode(data), carrying: data, binary: false, commands: [])
    }

    @Test func subnegotiationsOfOtherOptionsAndNotificationsAreReported() {
        var codec = Codec(settings: .init())
        let decoded = codec.decode([
            0x41, 255, 250, 24, 1, 255, 240, 0x42, 255, 250, 44, 106, 0x60, 255, 240, 255, 250, 44, 108, 255, 240,
            255, 250, 44, 109, 255, 240, 255, 250, 255, 240,
        ])
        #expect(decoded.data == [0x41, 0x42])
        #expect(
            decoded.events == [
                .otherSubnegotiation(option: 24, bytes: [1]), .lineState(0x60), .flowControl(suspend: true),
                .flowControl(suspend: false),
            ])
    }

    @Test func aSubnegotiationWithoutSEEndsAtTheNextCommand() {
        var codec = Codec(settings: .init())
        _ = codec.start()
        _ = codec.decode([255, 253, 44])
        // IAC SB ... IAC WILL BINARY: the SB ends there, WILL BINARY is read (our request: no answer).
        let decoded = codec.decode([255, 250, 44, 101, 0, 1, 194, 0, 255, 251, 0, 0x41])
        #expect(decoded.events == [.acknowledged(.setBaudRate, value: 115_200)])
        #expect(decoded.data == [0x41])
        #expect(codec.receivesBinary)
    }

    @Test func anOverlongSubnegotiationIsCut() {
        var codec = Codec(settings: .init())
        let decoded = codec.decode([255, 250, 24] + [UInt8](repeating: 7, count: 5000) + [255, 240, 0x41])
        guard case .otherSubnegotiation(let option, let bytes) = decoded.events.first else {
            Issue.record("no event: \(decoded.events)")
            return
        }
        #expect(option == 24)
        #expect(bytes.count == Codec.maximumSubnegotiationLength - 1)
        #expect(decoded.data == [0x41])
    }

    /// The whole recorded session plus data with every escape, fed whole, byte by byte, and in random cuts:
    /// the same data, replies and events every time.
    @Test(arguments: 0..<40)
    func splitsDoNotMatter(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var payload: [UInt8] = []
        for _ in 0..<300 { payload.append(UInt8(truncatingIfNeeded: random.next())) }
        payload += [255, 255, 13, 0, 13, 10, 255]
        let stream = Self.ser2netGreeting + Self.serverEncode(payload.prefix(150)) + Self.ser2netAcks
            + [255, 241] + Self.serverEncode(payload.dropFirst(150)) + [255, 250, 44, 106, 0x20, 255, 255, 255, 240]
        func run(_ cuts: [[UInt8]]) -> Codec.Decoded {
            var codec = Codec(settings: .init())
            _ = codec.start()
            var all = Codec.Decoded()
            for cut in cuts {
                let decoded = codec.decode(cut)
                all.data += decoded.data
                all.reply += decoded.reply
                all.events += decoded.events
            }
            #expect(codec.isNegotiated)
            return all
        }
        let whole = run([stream])
        #expect(whole.data == payload)
        #expect(whole.events.last == .lineState(0x20))
        #expect(run(stream.map { [$0] }) == whole)
        var cuts: [[UInt8]] = []
        var index = 0
        while index < stream.count {
            let length = Int(random.next() % 12)
            cuts.append(Array(stream[index..<min(stream.count, index + length)]))
            index += length
        }
        #expect(run(cuts) == whole)
    }

    /// Random bytes (any command, any option, broken subnegotiations) neither trap nor loop; whatever
    /// is decoded, data escaped by the server comes back intact after the noise.
    @Test(arguments: 0..<20)
    func randomStreamsAreSafe(seed: UInt64) {
        var random = SplitMix64(seed: seed &+ 1000)
        var codec = Codec(settings: .init())
        _ = codec.start()
        for _ in 0..<50 {
            var noise: [UInt8] = []
            for _ in 0..<Int(random.next() % 64) {
                let r = random.next()
                noise.append(r % 3 == 0 ? 255 : UInt8(truncatingIfNeeded: r >> 8))
            }
            let decoded = codec.decode(noise)
            #expect(decoded.data.count <= noise.count)
            #expect(decoded.reply.count <= 3 * noise.count + 64)
        }
        // Resynchronize: end any SB and any pending command, then data.
        _ = codec.decode([255, 240, 0x30, 0x30, 255, 240])
        let payload: [UInt8] = [1, 2, 255, 3]
        #expect(codec.decode(Self.serverEncode(payload[...])).data.suffix(4) == payload[...])
    }

    /// What a binary-mode server sends for `data`.
    static func serverEncode(_ data: ArraySlice<UInt8>) -> [UInt8] {
        data.flatMap { $0 == 255 ? [255, 255] : [$0] }
    }
}
