import Testing

@testable import McuMgrCore

/// Console line arithmetic checked against what `ConsoleSerialCodec` really produces.
@Suite struct LinkLimitsTests {
    typealias Lines = LinkLimits.ConsoleLines

    static func packet(_ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    @Test func zephyrDefaultsCarry182BytePacketsInTwoLines() {
        let lines = Lines.zephyrDefault
        #expect(lines.length == 127)
        #expect(lines.count == 2)
        #expect(lines.charactersPerLine == 124)
        #expect(lines.largestPacketPerBurst == 182)
        let frame = ConsoleSerialCodec(maximumLineLength: 127).encode(Self.packet(182))
        #expect(frame.count == 2)
        #expect(frame.allSatisfy { $0.count <= 127 })
        #expect(ConsoleSerialCodec(maximumLineLength: 127).encode(Self.packet(183)).count == 3)
    }

    @Test(arguments: [7, 8, 11, 64, 127, 128, 131, 255, 511, 512, 1023])
    func largestPacketIsExactForEveryLineCount(length: Int) {
        let codec = ConsoleSerialCodec(maximumLineLength: length)
        for count in 1...6 {
            let lines = Lines(length: length, count: count)
            let largest = lines.largestPacket(inLines: count)
            guard largest > 0 else { continue }
            let frame = codec.encode(Self.packet(largest))
            #expect(frame.count <= count, "\(largest) B at \(length) B lines must fit \(count) lines")
            #expect(frame.allSatisfy { $0.count <= length })
            #expect(codec.encode(Self.packet(largest + 1)).count > count, "\(largest + 1) B must not fit \(count) lines")
        }
    }

    @Test func linesForPacketMatchesTheEncoder() {
        for length in [7, 127, 511] {
            let codec = ConsoleSerialCodec(maximumLineLength: length)
            let lines = Lines(length: length, count: 2)
            for size in [0, 1, 2, 8, 100, 182, 183, 380, 1020, 2044] {
                #expect(lines.lines(forPacket: size) == codec.encode(Self.packet(size)).count, "\(size) B at \(length)")
            }
        }
    }

    @Test func burstsCutAFrameIntoGroupsOfTheLineCountOneGapApart() {
        let frame = (0..<5).map { [UInt8($0)] }
        let bursts = Lines(length: 127, count: 2).bursts(of: frame, gap: .milliseconds(20))
        #expect(bursts.map { Array($0.lines) } == [[[0], [1]], [[2], [3]], [[4]]])
        #expect(bursts.map(\.delay) == [.zero, .milliseconds(20), .milliseconds(40)])
        let single = Lines(length: 127, count: 2).bursts(of: Array(frame.prefix(2)), gap: .milliseconds(20))
        #expect(single.count == 1)
        #expect(single[0].delay == .zero)
        #expect(Lines(length: 127, count: 2).bursts(of: [], gap: .milliseconds(20)).isEmpty)
    }

    @Test func framesOfTwoBurstsAreWorthTryingWithinZephyrsDefaultBuffers() {
        let lines = Lines.zephyrDefault
        // 384-byte SMP buffers take 380-byte packets: two bursts carry 368 B (336 B of an upload's data,
        // 168 per burst, against 150 in one burst); three would carry only 380.
        #expect(lines.pacedBurstsWorthTrying(packetLimit: 380) == 2)
        #expect(lines.withBurstsPerFrame(2).largestPacketPerFrame == 368)
        #expect(lines.withBurstsPerFrame(2).largestPacketPerBurst == 182)
        #expect(lines.largestPacketPerFrame == 182)
        #expect(lines.pacedBurstsWorthTrying(packetLimit: 182) == nil, "one burst fills the buffer")
        #expect(lines.pacedBurstsWorthTrying(packetLimit: 200) == nil, "a second burst would carry 18 bytes")
        #expect(lines.withBurstsPerFrame(2).pacedBurstsWorthTrying(packetLimit: 380) == nil, "already paced")
        // 1024-byte buffers: five bursts (926 B) carry the most per burst.
        #expect(lines.pacedBurstsWorthTrying(packetLimit: 1020) == 5)
        #expect(Lines(length: 127, count: 2, burstsPerFrame: 2).description == "2 lines of 127 B, frames of up to 2 bursts")
        #expect(Lines(length: 127, count: 2, burstsPerFrame: 0).burstsPerFrame == 1)
    }

    @Test func pacingPaysOnADeviceThatReadsEvery20msNotOnOneThatFreesItsLinesAtOnce() {
        let lines = Lines.zephyrDefault
        func pays(_ one: Int, _ paced: Int, limit: Int = 380) -> Bool {
            lines.pacingPays(2, packetLimit: limit, oneBurstRoundTrip: .milliseconds(one), pacedRoundTrip: .milliseconds(paced))
        }
        // native_sim_serial: one burst is answered at the next read (20 ms), two bursts at the second.
        #expect(pays(20, 40))
        #expect(pays(19, 41))
        // A device that frees its lines at once: one burst in 3 ms, two in the 30 ms gap and 3 ms.
        #expect(!pays(3, 33))
        // Break-even: 336 B in the paced round trip against 150 B in one burst's.
        #expect(!pays(16, 41))
        #expect(!pays(0, 0), "no round trips measured")
        #expect(!pays(20, 40, limit: 182), "a buffer one burst fills")
    }

    @Test func limitsClampNonsenseAndDescribeThemselves() {
        let limits = LinkLimits(maximumPacketSize: 3, consoleLines: Lines(length: 2, count: 0), framesInFlight: 0, byteAlignment: 0)
        #expect(limits.maximumPacketSize == SMPHeader.size + 1)
        #expect(limits.consoleLines == Lines(length: 7, count: 1))
        #expect(limits.framesInFlight == 1)
        #expect(limits.byteAlignment == 1)
        let described = LinkLimits(maximumPacketSize: 182, consoleLines: .zephyrDefault, deviceBufferSize: 384, deviceBufferCount: 4)
            .description
        #expect(described.contains("packet 182 B"))
        #expect(described.contains("2 lines of 127 B"))
        #expect(described.contains("4 x 384 B"))
        #expect(LinkLimits(maximumPacketSize: 1472, framesInFlight: 255).description.contains("as the device's buffers allow"))
    }
}

/// The one refinement: what a link declares, plus `os params` and a requested window, gives the packet
/// size and the window every user of the link reads.
@Suite struct LinkLimitsRefinementTests {
    /// The links as the transports declare them (see their `linkLimits`).
    static let udp = LinkLimits(
        maximumPacketSize: 1472, framesInFlight: 255, bufferUse: .twoBuffersPerRequest, eraseResendFloor: nil)
    static let console = LinkLimits(maximumPacketSize: 182, framingOverhead: 4, consoleLines: .zephyrDefault)
    static let consoleWindow2 = LinkLimits(
        maximumPacketSize: 182, framingOverhead: 4, consoleLines: .zephyrDefault, framesInFlight: 2,
        session: SMPSessionConfiguration(window: 2))
    static let bleReassembling = LinkLimits(maximumPacketSize: 244, reassembledPacketLimit: 65543, framesInFlight: 255)
    static let bleOneWrite = LinkLimits(maximumPacketSize: 244, framesInFlight: 255)
    static let simulator = LinkLimits(
        maximumPacketSize: 2048, framesInFlight: 255, session: SMPSessionConfiguration(window: 3))

    struct Row: Sendable, CustomTestStringConvertible {
        var name: String
        var link: LinkLimits
        var bufferSize: Int?
        var bufferCount: Int?
        var requested: Int?
        var packetSize: Int
        var window: Int
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        // Nothing known: the link's packet, the session's window.
        Row(name: "udp, nothing known", link: udp, packetSize: 1472, window: 1),
        Row(name: "simulator, nothing known", link: simulator, packetSize: 2048, window: 3),
        Row(name: "console, nothing known", link: console, packetSize: 182, window: 1),
        // Zephyr's UDP transport: a request holds two buffers, so buf_count / 2.
        Row(name: "udp 2 buffers", link: udp, bufferSize: 2048, bufferCount: 2, packetSize: 1472, window: 1),
        Row(name: "udp 4 buffers", link: udp, bufferSize: 2048, bufferCount: 4, packetSize: 1472, window: 2),
        Row(name: "udp 5 buffers", link: udp, bufferSize: 2048, bufferCount: 5, packetSize: 1472, window: 2),
        Row(name: "udp small buffer", link: udp, bufferSize: 512, bufferCount: 4, packetSize: 512, window: 2),
        Row(name: "udp asks 8 of 4 buffers", link: udp, bufferCount: 4, requested: 8, packetSize: 1472, window: 2),
        Row(name: "udp asks 1 of 4 buffers", link: udp, bufferCount: 4, requested: 1, packetSize: 1472, window: 1),
        Row(name: "udp asks 3, buffers unknown", link: udp, requested: 3, packetSize: 1472, window: 3),
        // Elsewhere one buffer answers while the others hold requests: buf_count - 1.
        Row(name: "simulator 4 buffers", link: simulator, bufferSize: 2048, bufferCount: 4, packetSize: 2048, window: 3),
        Row(name: "simulator 2 buffers", link: simulator, bufferSize: 1024, bufferCount: 2, packetSize: 1024, window: 1),
        Row(name: "simulator 1 buffer (no os params)", link: simulator, bufferCount: 1, packetSize: 2048, window: 1),
        Row(name: "simulator asks 8 of 4 buffers", link: simulator, bufferCount: 4, requested: 8, packetSize: 2048, window: 3),
        // A console spends 4 bytes of the buffer on length and CRC; the link holds one frame unless window=.
        Row(name: "console 4 x 2475", link: console, bufferSize: 2475, bufferCount: 4, packetSize: 182, window: 1),
        Row(name: "console 4 x 100", link: console, bufferSize: 100, bufferCount: 4, packetSize: 96, window: 1),
        Row(name: "console window=2, 4 buffers", link: consoleWindow2, bufferCount: 4, packetSize: 182, window: 2),
        Row(name: "console window=2, 2 buffers", link: consoleWindow2, bufferCount: 2, packetSize: 182, window: 1),
        Row(name: "console window=2, nothing known", link: consoleWindow2, packetSize: 182, window: 2),
        // Bluetooth LE: a reassembling device takes packets up to its buffer in several writes.
        Row(name: "ble reassembly", link: bleReassembling, bufferSize: 2048, bufferCount: 4, packetSize: 2048, window: 3),
        Row(name: "ble one write", link: bleOneWrite, bufferSize: 2048, bufferCount: 4, packetSize: 244, window: 3),
        Row(name: "ble one write, small buffer", link: bleOneWrite, bufferSize: 128, packetSize: 128, window: 1),
    ]

    @Test(arguments: rows)
    func refinement(_ row: Row) {
        let refined = row.link.refined(
            deviceBufferSize: row.bufferSize, deviceBufferCount: row.bufferCount, requestedWindow: row.requested)
        #expect(refined.packetSize == row.packetSize)
        #expect(refined.window == row.window)
        #expect(refined.deviceBufferSize == row.bufferSize)
        #expect(refined.deviceBufferCount == row.bufferCount)
    }

    @Test func refiningAgainKeepsWhatIsKnownAndIgnoresNonsense() {
        let learned = Self.udp.refined(deviceBufferSize: 1024, deviceBufferCount: 6)
        #expect(learned.window == 3)
        let again = learned.refined()
        #expect(again == learned)
        let nonsense = learned.refined(deviceBufferSize: 4, deviceBufferCount: 0, requestedWindow: -1)
        #expect(nonsense == learned)
        let replaced = learned.refined(deviceBufferCount: 2, requestedWindow: 5)
        #expect(replaced.deviceBufferSize == 1024)
        #expect(replaced.window == 1)
        #expect(replaced.description.contains("1 frame in flight"))
        #expect(Self.udp.refined(deviceBufferCount: 4).description.contains("2 frames in flight"))
        #expect(
            Self.console.refined(deviceBufferSize: 1024, deviceBufferCount: 4).description
                == "packet 182 B, 1 frame in flight, framing 4 B, console 2 lines of 127 B, device buffers 4 x 1024 B (buf_count - 1 in flight)")
        #expect(Self.consoleWindow2.refined(deviceBufferCount: 2).description.contains("1 frame in flight, the link holds 2"))
        #expect(replaced.description.contains("device buffers 2 x 1024 B (buf_count / 2 in flight)"))
    }

    /// Where frames follow the console lines, a request holds its frame's lines until answered: requests
    /// in flight are whole frames within the lines the device holds, and within its buffers.
    @Test(arguments: [
        // (lines held, line length, buffers, packet, window for it)
        (2, 127, 4, 182, 1),  // a frame that fills Zephyr's 2 lines
        (2, 127, 4, 89, 2),  // one-line requests (89 B fit one 127-byte line)
        (2, 127, 4, 90, 1),  // 90 B take two lines
        (2, 127, 2, 40, 1),  // two buffers: one request (buf_count - 1)
        (12, 127, 4, 1020, 1),  // a 12-line frame in 12 lines
        (12, 127, 4, 40, 3),  // one-line requests: the buffers decide
        (12, 127, 8, 368, 3),  // 4-line frames: 3 in 12 lines
        (32, 511, 4, 1020, 3),  // 3-line frames in 32 long lines: the buffers decide
    ])
    func consoleRequestsHoldTheirLines(held: Int, length: Int, buffers: Int, packet: Int, window: Int) {
        let link = LinkLimits(
            maximumPacketSize: 4096, framingOverhead: 4, consoleLines: .init(length: length, count: held),
            framesInFlight: held, framesFollowConsoleLines: true
        ).refined(deviceBufferCount: buffers)
        #expect(link.window(forPacket: packet) == window)
        #expect(link.framesInFlight(forPacket: packet) == min(held, max(1, held / link.consoleLines!.lines(forPacket: packet))))
        // Without console lines (or with window= given) the packet's size does not matter.
        #expect(Self.udp.refined(deviceBufferCount: buffers).window(forPacket: packet) == Self.udp.refined(deviceBufferCount: buffers).window)
        var fixed = link
        fixed.framesFollowConsoleLines = false
        #expect(fixed.window(forPacket: packet) == fixed.window)
    }

    @Test(arguments: [(1, 1, 1), (2, 1, 1), (3, 2, 1), (4, 3, 2), (5, 4, 2), (8, 7, 4)])
    func bufferUse(count: Int, oneBuffer: Int, twoBuffers: Int) {
        #expect(LinkLimits.BufferUse.oneBufferPerRequest.requestsInFlight(bufferCount: count) == oneBuffer)
        #expect(LinkLimits.BufferUse.twoBuffersPerRequest.requestsInFlight(bufferCount: count) == twoBuffers)
    }
}

@Suite struct RoundTripEstimatorTests {
    @Test func firstSampleSetsSmoothedAndHalfVariation() {
        var e = RoundTripEstimator(initial: .seconds(1), floor: .milliseconds(10), ceiling: .seconds(60))
        #expect(e.timeout == .seconds(1))
        e.record(.milliseconds(100))
        #expect(e.smoothed == .milliseconds(100))
        #expect(e.variation == .milliseconds(50))
        #expect(e.timeout == .milliseconds(300))
    }

    @Test func aRememberedRoundTripReplacesTheInitialTimeoutUntilSamplesRefineIt() {
        var e = RoundTripEstimator(initial: .milliseconds(250), floor: .milliseconds(5), ceiling: .seconds(4))
        #expect(e.measured == nil)
        e.seed(SMPRoundTrip(smoothed: .milliseconds(8), variation: .milliseconds(3)))
        #expect(e.timeout == .milliseconds(20), "8 + 4 x 3, not the initial 250")
        #expect(e.measured == nil, "a seed alone is not a measurement to remember")
        #expect(e.timeout(attempt: 2) == .milliseconds(40))
        e.record(.milliseconds(16))  // smoothed into the seed like any later sample
        #expect(e.smoothed == .milliseconds(9))
        #expect(e.variation == .microseconds(4250))
        #expect(e.measured == SMPRoundTrip(smoothed: .milliseconds(9), variation: .microseconds(4250)))
        e.seed(SMPRoundTrip(smoothed: .seconds(1), variation: .zero))
        #expect(e.smoothed == .milliseconds(9), "a seed never overrides what this connection measured")
        var floored = RoundTripEstimator(initial: .milliseconds(250), floor: .milliseconds(25))
        floored.seed(SMPRoundTrip(smoothed: .microseconds(400), variation: .microseconds(100)))
        #expect(floored.timeout == .milliseconds(25))
    }

    @Test func steadyRoundTripsShrinkTheTimeoutTowardsTheRoundTripButNotBelowTheFloor() {
        var e = RoundTripEstimator(floor: .milliseconds(150))
        for _ in 0..<50 { e.record(.milliseconds(100)) }
        #expect(e.smoothed == .milliseconds(100))
        #expect(e.timeout >= .milliseconds(150))
        #expect(e.timeout < .milliseconds(160))
        var fast = RoundTripEstimator(floor: .milliseconds(200))
        for _ in 0..<50 { fast.record(.milliseconds(10)) }
        #expect(fast.timeout == .milliseconds(200))
    }

    @Test func aSlowOutlierWidensTheTimeout() {
        var e = RoundTripEstimator(floor: .milliseconds(1))
        for _ in 0..<20 { e.record(.milliseconds(20)) }
        let before = e.timeout
        e.record(.milliseconds(400))
        #expect(e.timeout > before + .milliseconds(150))
    }

    @Test func backoffDoublesPerResendUpToTheCeiling() {
        var e = RoundTripEstimator(floor: .milliseconds(100), ceiling: .seconds(1))
        e.record(.milliseconds(40))  // rto = 40 + 4 * 20 = 120
        #expect(e.timeout(attempt: 1) == .milliseconds(120))
        #expect(e.timeout(attempt: 2) == .milliseconds(240))
        #expect(e.timeout(attempt: 3) == .milliseconds(480))
        #expect(e.timeout(attempt: 4) == .milliseconds(960))
        #expect(e.timeout(attempt: 5) == .seconds(1))
        #expect(e.timeout(attempt: 40) == .seconds(1))
    }
}

@Suite struct CongestionWindowTests {
    @Test func startsAtTheCeilingHalvesOnLossAndNeverGoesBelowOne() {
        var w = CongestionWindow(ceiling: 8)
        #expect(w.value == 8)
        let halved = w.lost()
        #expect(halved)
        #expect(w.value == 4)
        w.lost()
        #expect(w.value == 2)
        w.lost()
        #expect(w.value == 1)
        let changed = w.lost()
        #expect(!changed)
        #expect(w.value == 1)
    }

    @Test func growsByAboutOnePerWindowOfAnswersUpToTheCeiling() {
        var w = CongestionWindow(ceiling: 6, initial: 2)
        #expect(w.value == 2)
        for _ in 0..<3 { w.acknowledged() }  // 2 + 1/2 + 1/2.5 + 1/2.9
        #expect(w.value == 3)
        for _ in 0..<3 { w.acknowledged() }
        #expect(w.value == 4)
        for _ in 0..<100 { w.acknowledged() }
        #expect(w.value == 6)
        w.setCeiling(3)
        #expect(w.value == 3)
        #expect(CongestionWindow(ceiling: 0).value == 1)
        #expect(CongestionWindow(ceiling: 4, initial: 9).value == 4)
    }
}
