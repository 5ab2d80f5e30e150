import Logging
import McuMgrCore

/// Learns how much a serial console link takes at once, by sending echo frames of growing size.
///
/// A Zephyr (or MCUboot) device reads a console frame line by line into a few fixed line buffers
/// (`CONFIG_UART_MCUMGR_RX_BUF_SIZE` x `CONFIG_UART_MCUMGR_RX_BUF_COUNT`, 128 B x 2 by default): a longer
/// line, or more lines at once than it holds, is dropped without an answer, and `os params` does not tell
/// these limits. The transport starts from Zephyr's defaults, which every device takes; the probe then
/// tries a whole SMP buffer in lines of that length at once (MCUboot and bigger builds take it), else
/// longer lines (511, 1023, ... bytes) and a frame of more of them, each within the device's SMP buffer,
/// and keeps what was answered. Any answer counts, an error too: it proves the frame arrived. A frame
/// still unanswered after a few round trips is followed by a short echo that every device takes: its
/// answer coming first proves the frame was dropped, the frame's own coming first that it was taken,
/// however slow the machine or the device (`echoes`). At most four probes go unanswered. A device
/// that takes a whole SMP buffer at once is also sent as many whole frames at once as its buffers take in
/// flight (`buf_count - 1`): when it answers them all, its line buffers hold them, and transfers keep that
/// many frames in flight (`LinkLimits.window(forPacket:)`; Zephyr's native_sim serial-fs build, 32 line
/// buffers of 512 B: three 1 KiB frames in lines of 511 bytes). A device that takes no more than the
/// starting lines is sent frames of several bursts, paced a line gap apart, and they are kept when they
/// carry more per round trip than frames of one burst (`ConsoleLines.burstsPerFrame`; native_sim's
/// default serial build, which reads its pty every 20 ms).
public enum LinkProbe {
    /// Line lengths tried, shortest first (buffers of 512, 1024, 2048 and 4096 bytes).
    static let lineLengths = [511, 1023, 2047, 4095]

    /// Probes the link once and makes the transport adopt what it learned; returns the line limits in force.
    /// - Parameters:
    ///   - deviceBufferSize: `buf_size` from `os params`; nil assumes Zephyr's default SMP buffer (384).
    ///   - deviceBufferCount: `buf_count` from `os params`; nil (or fewer than 3) tries no frames at once.
    ///   - trustRemembered: take line limits remembered for this device and buffer size without the echo
    ///     that checks them (the caller checks them with its next request, and probes again when it goes
    ///     unanswered); they are adopted, not final, so a later probe may still run.
    @discardableResult
    public static func run(
        client: McuMgrClient, transport: any McuMgrConsoleLineTransport, deviceBufferSize: Int?,
        deviceBufferCount: Int? = nil, trustRemembered: Bool = false, logger: Logger
    ) async -> LinkLimits.ConsoleLines {
        let start = transport.currentConsoleLines
        guard transport.needsConsoleProbe else { return start }
        // A device that took only the starting limits before is not probed again (nothing to gain),
        // unless its SMP buffer size changed since (another board on the port, other firmware).
        let memory = client.configuration.consoleLineMemory
        let remembered = memory?.recall(transport.name, deviceBufferSize: deviceBufferSize)
        if remembered == start {
            transport.learnConsoleLines(start, final: true)
            logger.debug("link probe: the device took \(start) before; not probing again")
            return start
        }
        if trustRemembered, let remembered {
            transport.learnConsoleLines(remembered, final: false)
            logger.debug("link probe: the device took \(remembered) before, with the same buffers; taken without a check")
            return remembered
        }
        // Frames stay within the device's SMP buffer (less 4 bytes of length and CRC), so a frame the
        // device drops is dropped for its lines, not for its size.
        let packetLimit = max(SMPHeader.size + 16, (deviceBufferSize ?? 384) - 4)
        // The pauses of a frame of several bursts.
        func pacing(_ candidate: LinkLimits.ConsoleLines, _ packetSize: Int) -> Duration {
            let bursts = (candidate.lines(forPacket: packetSize) + candidate.count - 1) / candidate.count
            return (transport.linkLimits.lineGap ?? .zero) * max(0, bursts - 1)
        }
        // What an earlier connection learned, checked at once with one frame of a whole remembered burst,
        // given the round trip measured so far (`os params`) plus the frame's wire time at the line's speed.
        let measured = await client.smoothedRoundTrip
        if let remembered, remembered != start, let rtt = measured {
            let packet = min(packetLimit, remembered.largestPacketPerFrame)
            let wire = ConsoleSerialCodec(maximumLineLength: remembered.length).encodedSize(ofPacket: packet)
            let wireTime = transport.linkLimits.bitsPerSecond.map { Duration.seconds(Double(wire * 10) / Double(max(1, $0))) } ?? .zero
            if await tries(remembered, packetSize: packet, client: client, transport: transport, predicted: rtt + wireTime + pacing(remembered, packet), logger: logger) {
                transport.learnConsoleLines(remembered, final: true)
                logger.debug("link probe: the device still takes \(remembered), as remembered")
                return remembered
            }
        }
        // Two echoes that every device takes, a short one and one of a whole default burst, give the
        // round trip and what each byte adds to it (wire time on a real UART; nothing on a pty). A probe
        // is given what its size predicts, twice over, so that a dropped frame costs little.
        let short = min(64, packetLimit)
        let burst = min(start.largestPacketPerBurst, packetLimit)
        guard let rttShort = await roundTrip(packetSize: short, client: client, timeout: client.configuration.timeout),
            let rttBurst = await roundTrip(packetSize: burst, client: client, timeout: max(rttShort * 8, .milliseconds(500)))
        else {
            logger.debug("link probe: no answer to the echo that every device takes; keeping \(start)")
            transport.learnConsoleLines(start, final: true)
            return start
        }
        let wireShort = ConsoleSerialCodec(maximumLineLength: start.length).encodedSize(ofPacket: short)
        let wireBurst = ConsoleSerialCodec(maximumLineLength: start.length).encodedSize(ofPacket: burst)
        let perByte = wireBurst > wireShort && rttBurst > rttShort ? (rttBurst - rttShort) / (wireBurst - wireShort) : .zero
        let rtt = min(rttShort, rttBurst)
        func predicted(_ candidate: LinkLimits.ConsoleLines, _ packetSize: Int) -> Duration {
            let wire = ConsoleSerialCodec(maximumLineLength: candidate.length).encodedSize(ofPacket: packetSize)
            return rtt + perByte * max(0, wire - wireShort)
        }
        // What an earlier connection learned, checked with one frame of a whole remembered burst (when there
        // was no round trip to go by above).
        if let remembered, remembered != start, measured == nil {
            let packet = min(packetLimit, remembered.largestPacketPerFrame)
            if await tries(remembered, packetSize: packet, client: client, transport: transport, predicted: predicted(remembered, packet) + pacing(remembered, packet), logger: logger) {
                transport.learnConsoleLines(remembered, final: true)
                logger.debug("link probe: the device still takes \(remembered), as remembered")
                return remembered
            }
        }
        var lines = start
        var failures = 0
        func attempt(_ candidate: LinkLimits.ConsoleLines, _ packet: Int) async -> Bool {
            if await tries(candidate, packetSize: packet, client: client, transport: transport, predicted: predicted(candidate, packet), logger: logger) {
                return true
            }
            failures += 1
            return false
        }

        // 1. A whole SMP buffer in lines of the starting length, at once: many devices hold that many
        //    lines (MCUboot, serial-fs builds), and then one probe settles it.
        let neededAtStart = start.lines(forPacket: packetLimit)
        if neededAtStart > start.count {
            let candidate = LinkLimits.ConsoleLines(length: start.length, count: neededAtStart)
            if await attempt(candidate, min(packetLimit, candidate.largestPacket(inLines: neededAtStart))) {
                lines = candidate
            }
        }

        // 1b. As many whole buffers at once as the device's buffers take in flight, each its own frame:
        //     in lines of this length, else of longer ones (fewer lines per frame). All must be answered:
        //     a device that lost one of them (the mps2 app under QEMU lost the first of three) keeps
        //     one frame in flight.
        //     Only where requests in flight follow the lines (`LinkLimits.framesFollowConsoleLines`).
        if lines != start, transport.linkLimits.framesFollowConsoleLines, let count = deviceBufferCount, count - 1 >= 2 {
            let frames = count - 1
            for length in [lines.length] + lineLengths.filter({ $0 > lines.length }) where failures < 3 {
                let perFrame = LinkLimits.ConsoleLines(length: length, count: 1).lines(forPacket: packetLimit)
                let candidate = LinkLimits.ConsoleLines(length: length, count: perFrame * frames)
                let packet = min(packetLimit, candidate.largestPacket(inLines: perFrame))
                let answered = await triesTogether(
                    candidate, frames: frames, packetSize: packet, deviceBufferSize: deviceBufferSize, deviceBufferCount: count,
                    client: client, transport: transport, predicted: predicted(candidate, packet * frames), logger: logger)
                if answered == frames {
                    lines = candidate
                    break
                }
                failures += 1
                // A device that took none of the longer lines takes no longer ones; one line per frame is the least.
                if (answered == 0 && length > lines.length) || perFrame == 1 { break }
            }
        }

        if lines == start {
            // 2. Longer lines: one line of each length, as long as the packet it carries fits the buffer.
            for length in lineLengths where length > lines.length {
                let candidate = LinkLimits.ConsoleLines(length: length, count: lines.count)
                let packet = candidate.largestPacket(inLines: 1)
                guard packet <= packetLimit else { break }
                guard await attempt(candidate, packet) else { break }
                lines = candidate
            }
            // 3. With longer lines, more of them at once: the frame of a full SMP buffer, else one line
            //    more. (With the starting length the device took no more lines in step 1.)
            if lines.length > start.length {
                let needed = lines.lines(forPacket: packetLimit)
                var counts: [Int] = []
                if needed > lines.count { counts.append(needed) }
                if needed > lines.count + 1 { counts.append(lines.count + 1) }
                for count in counts where failures < 3 {
                    let candidate = LinkLimits.ConsoleLines(length: lines.length, count: count)
                    if await attempt(candidate, min(packetLimit, candidate.largestPacket(inLines: count))) {
                        lines = candidate
                        break
                    }
                }
            }
        }
        // 4. A device that takes no more than the starting lines at once: frames of several bursts,
        //    paced a line gap apart, when they carry more per round trip than frames of one burst. On
        //    a device that reads its console every so often (native_sim: every 20 ms, two lines at a
        //    time), a frame of two bursts is answered after two reads and carries more than twice the
        //    data; on one that frees its lines at once, one-burst frames are answered sooner than any
        //    gap, and stay. The median of three round trips of each decides, each frame sent right behind
        //    an answer as an upload's chunks are (a device that reads every so often answers at a read;
        //    a frame sent behind an unanswered probe would meet its reads at random).
        if lines == start, let gap = transport.linkLimits.lineGap,
            let bursts = start.pacedBurstsWorthTrying(packetLimit: packetLimit), failures < 3
        {
            let paced = start.withBurstsPerFrame(bursts)
            let packet = min(packetLimit, paced.largestPacketPerFrame)
            let timeout = max(predicted(paced, packet) * 2, predicted(paced, packet) + .milliseconds(40)) + gap * (bursts - 1)
            let oneBurstTimeout = max(rttBurst * 8, .milliseconds(500))
            var oneBurstTrips = [rttBurst]
            var pacedTrips: [Duration] = []
            for _ in 0..<3 {
                // The first one-burst echo may follow an unanswered probe: it only puts the paced frame
                // behind an answer.
                guard let trip = await roundTrip(packetSize: burst, client: client, timeout: oneBurstTimeout) else { break }
                if !pacedTrips.isEmpty { oneBurstTrips.append(trip) }
                transport.learnConsoleLines(paced, final: false)
                let pacedTrip = await echoes(packetSize: packet, client: client, wait: timeout).first ?? nil
                transport.learnConsoleLines(start, final: false)
                guard let pacedTrip else { break }
                pacedTrips.append(pacedTrip)
            }
            let oneBurstTrip = median(oneBurstTrips)
            let pacedTrip = median(pacedTrips)
            if pacedTrips.count == 3,
                start.pacingPays(bursts, packetLimit: packetLimit, oneBurstRoundTrip: oneBurstTrip, pacedRoundTrip: pacedTrip)
            {
                lines = paced
                logger.debug("link probe: \(packet)-byte frames of \(bursts) bursts \(gap.milliseconds) ms apart carry more (round trip \(pacedTrip.milliseconds) ms, \(oneBurstTrip.milliseconds) ms for one burst of \(burst) B)")
            } else {
                if pacedTrips.count < 3 { failures += 1 }
                logger.debug("link probe: \(packet)-byte frames of \(bursts) bursts \(gap.milliseconds) ms apart carry no more (round trips \(pacedTrips.map { "\($0.milliseconds) ms" }), \(oneBurstTrip.milliseconds) ms for one burst of \(burst) B)")
            }
        }

        transport.learnConsoleLines(lines, final: true)
        memory?.remember(lines, deviceBufferSize: deviceBufferSize, for: transport.name)
        logger.debug("link probe: the device takes \(lines) (round trip \(rtt.milliseconds) ms, \(failures) probe\(failures == 1 ? "" : "s") unanswered)")
        return lines
    }

    /// Adopts the line limits remembered for this device and buffer size, without probing or checking
    /// them (a transfer of short requests, a download's, gains from them and loses little if they no longer
    /// hold: a dropped request is asked for again); a later upload still probes. Returns them, or nil.
    @discardableResult
    public static func adoptRemembered(
        client: McuMgrClient, transport: any McuMgrConsoleLineTransport, deviceBufferSize: Int?
    ) -> LinkLimits.ConsoleLines? {
        guard transport.needsConsoleProbe,
            let remembered = client.configuration.consoleLineMemory?.recall(transport.name, deviceBufferSize: deviceBufferSize)
        else { return nil }
        transport.learnConsoleLines(remembered, final: false)
        return remembered
    }

    /// SMP buffer sizes firmware commonly has (`CONFIG_MCUMGR_TRANSPORT_NETBUF_SIZE`, MCUboot's
    /// `CONFIG_BOOT_SERIAL_MAX_RECEIVE_SIZE`), largest first.
    static let commonBufferSizes = [2048, 1024, 512, 384, 256, 128, 96]

    /// Without `os params` the device's SMP buffer is unknown, and a request larger than it is dropped
    /// without an answer. Tries echoes that fill the common buffer sizes, largest first, up to
    /// `ceiling`, and returns the largest packet the device answers (at least what the smallest common
    /// buffer, 96 bytes, takes).
    /// - Parameter overhead: what the link spends of the device's buffer (4 on a serial console).
    public static func largestAnsweredPacket(
        client: McuMgrClient, ceiling: Int, overhead: Int, logger: Logger
    ) async -> Int {
        // What every device takes: the smallest common buffer (still room for an image chunk's keys).
        let floor = min(ceiling, commonBufferSizes.last! - overhead)
        var measured: Duration?
        for _ in 0..<2 where measured == nil {  // a device that just booted may miss the first one
            measured = await roundTrip(packetSize: min(floor, 64), client: client, timeout: client.configuration.timeout)
        }
        guard let rtt = measured else { return floor }
        let link = client.transport.linkLimits
        let candidates = [ceiling] + commonBufferSizes.map { $0 - overhead }.filter { $0 < ceiling && $0 > floor }
        for size in candidates where size <= ceiling {
            // A console frame longer than one burst is paced: allow for the pauses.
            var pacing = Duration.zero
            if let lines = link.consoleLines, let gap = link.lineGap {
                pacing = gap * ((lines.lines(forPacket: size) + lines.count - 1) / lines.count)
            }
            let wait = max(rtt * 4, .milliseconds(300)) + pacing
            if await echoes(packetSize: size, client: client, wait: wait, follower: min(floor, 64)).first ?? nil != nil {
                logger.debug("link probe: the device answers \(size)-byte packets (it reports no SMP parameters)")
                return size
            }
            logger.debug("link probe: no answer to a \(size)-byte packet within \(wait.milliseconds) ms, nor before the echo sent behind it")
        }
        return floor
    }

    /// Sends one echo frame under `candidate` limits; keeps them on the transport only when answered.
    private static func tries(
        _ candidate: LinkLimits.ConsoleLines, packetSize: Int, client: McuMgrClient,
        transport: any McuMgrConsoleLineTransport, predicted: Duration, logger: Logger
    ) async -> Bool {
        let previous = transport.currentConsoleLines
        transport.learnConsoleLines(candidate, final: false)
        let wait = max(predicted * 2, predicted + .milliseconds(40))
        let count = candidate.lines(forPacket: packetSize)
        let shape = "\(packetSize)-byte frame in \(count) line\(count == 1 ? "" : "s") of \(candidate.length) B"
        if let trip = await echoes(packetSize: packetSize, client: client, wait: wait).first ?? nil {
            logger.debug("link probe: \(shape) answered in \(trip.milliseconds) ms")
            return true
        }
        logger.debug("link probe: \(shape) dropped (no answer within \(wait.milliseconds) ms, nor before the echo sent behind it)")
        transport.learnConsoleLines(previous, final: false)
        return false
    }

    /// Sends `frames` echo frames of `packetSize` bytes at once under `candidate` limits (the session's
    /// window raised for them); keeps the limits on the transport only when every frame is answered.
    /// - Returns: how many frames were answered.
    private static func triesTogether(
        _ candidate: LinkLimits.ConsoleLines, frames: Int, packetSize: Int, deviceBufferSize: Int?, deviceBufferCount: Int,
        client: McuMgrClient, transport: any McuMgrConsoleLineTransport, predicted: Duration, logger: Logger
    ) async -> Int {
        let previous = transport.currentConsoleLines
        let requested = await client.linkLimits.requestedWindow
        transport.learnConsoleLines(candidate, final: false)
        await client.refineLinkLimits(
            deviceBufferSize: deviceBufferSize, deviceBufferCount: deviceBufferCount, requestedWindow: frames)
        let wait = max(predicted * 2, predicted + .milliseconds(40))
        // In one write: the frames must reach the device together, as a burst of their lines.
        let answered = await echoes(frames, packetSize: packetSize, client: client, wait: wait, together: transport)
            .filter { $0 != nil }.count
        let all = answered == frames
        let perFrame = LinkLimits.ConsoleLines(length: candidate.length, count: 1).lines(forPacket: packetSize)
        let shape = "\(frames) \(packetSize)-byte frames of \(perFrame) line\(perFrame == 1 ? "" : "s") of \(candidate.length) B at once"
        logger.debug("link probe: \(shape) \(all ? "answered" : "\(answered) answered (within \(wait.milliseconds) ms or before the echo sent behind them)")")
        if !all { transport.learnConsoleLines(previous, final: false) }
        await client.refineLinkLimits(requestedWindow: requested)
        return answered
    }

    /// Sends `count` echo frames of `packetSize` bytes at once (in one write when `together` holds writes)
    /// and returns each one's round trip on the client's clock, nil for each the device dropped.
    ///
    /// The verdict does not depend on the machine's speed. An answer within `wait` counts at once. After
    /// `wait`, an echo of `follower` bytes, which every device takes, goes right behind the frames still
    /// unanswered: a device answers in order, so an answer that comes before the follower's proves its
    /// frame was taken, however late (a loaded machine, a device busy with its flash), and the follower's
    /// answer without it proves the frame was dropped. A dropped frame costs one short round trip more
    /// than `wait`. Without an answer to the follower either (within the client's timeout), the frames
    /// count as dropped.
    static func echoes(
        _ count: Int = 1, packetSize: Int, client: McuMgrClient, wait: Duration, follower: Int = 64,
        together transport: (any McuMgrConsoleLineTransport)? = nil
    ) async -> [Duration?] {
        enum Event: Sendable {
            case answer(Int, Duration?)
            case waited
            case followerAnswered
        }
        let clock = client.clock
        let followerTimeout = client.configuration.timeout
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        let payload = echoPayload(packetSize: packetSize)
        let began = clock.now
        var handles: [McuMgrRequestHandle] = []
        if count > 1 { transport?.holdWrites(count: count) }
        for index in 0..<count {
            // The frame's own timeout only ends a wait that the follower would have ended first.
            // (On the client's timer, as timeouts: in virtual time, a test moves straight to it.)
            let handle = try? await client.submit(
                operation: EchoRequest.operation, group: EchoRequest.group, command: EchoRequest.command,
                payload: payload, timeout: wait + followerTimeout * 2, retransmittable: false, name: "link probe (echo)",
                overdueAfter: wait
            ) { event in
                switch event {
                case .answered(let result):
                    sink.yield(.answer(index, (try? result.get()) == nil ? nil : began.duration(to: clock.now)))
                case .overdue: sink.yield(.waited)
                case .resent: break
                }
            }
            guard let handle else { break }
            handles.append(handle)
        }
        if count > 1 { transport?.releaseWrites() }
        guard handles.count == count else {
            for handle in handles { await client.cancel(handle) }
            return Array(repeating: nil, count: count)
        }
        var trips = [Duration?](repeating: nil, count: count)
        var unanswered = count
        var follows: McuMgrRequestHandle?
        loop: for await event in events {
            switch event {
            case .answer(let index, let trip):
                trips[index] = trip
                unanswered -= 1
                // Once the follower is out, its answer (right behind) ends the wait, and is not left to
                // arrive unmatched.
                if unanswered == 0, follows == nil { break loop }
            case .waited:
                guard unanswered > 0, follows == nil else { break }
                follows = try? await client.submit(
                    operation: EchoRequest.operation, group: EchoRequest.group, command: EchoRequest.command,
                    payload: echoPayload(packetSize: follower), timeout: followerTimeout, retransmittable: false,
                    name: "link probe (echo behind a late frame)", beyondWindow: true
                ) { event in
                    if case .answered = event { sink.yield(.followerAnswered) }
                }
                if follows == nil { break loop }
            case .followerAnswered:
                break loop
            }
        }
        sink.finish()
        for handle in handles { await client.cancel(handle) }
        return trips
    }

    /// The middle one of `trips` (the later of the two middle ones of an even count); zero for none.
    static func median(_ trips: [Duration]) -> Duration {
        let sorted = trips.sorted()
        return sorted.isEmpty ? .zero : sorted[sorted.count / 2]
    }

    /// The round trip of an echo of `packetSize` bytes (on the client's clock, as its timeout); nil
    /// without an answer.
    private static func roundTrip(packetSize: Int, client: McuMgrClient, timeout: Duration) async -> Duration? {
        let clock = client.clock
        let began = clock.now
        do {
            _ = try await echo(packetSize: packetSize, client: client, timeout: timeout)
            return began.duration(to: clock.now)
        } catch {
            return nil
        }
    }

    /// An echo request whose SMP packet is `packetSize` bytes (at least 12); any answer returns.
    static func echo(packetSize: Int, client: McuMgrClient, timeout: Duration) async throws -> SMPPacket {
        let payload = echoPayload(packetSize: packetSize)
        return try await client.send(
            operation: EchoRequest.operation, group: EchoRequest.group, command: EchoRequest.command,
            payload: payload, timeout: timeout, retransmittable: false, name: "link probe (echo)")
    }

    /// The CBOR payload `{"d": "aaa…"}` of an echo request whose whole packet is `packetSize` bytes
    /// (or the nearest size below that CBOR allows).
    public static func echoPayload(packetSize: Int) -> [UInt8] {
        // Header 8, map head 1, key "d" 2, then the text head and the text.
        let budget = max(1, packetSize - SMPHeader.size - 3)
        var length = budget - 1
        while length > 0, CBORWriter.headSize(argument: UInt64(length)) + length > budget { length -= 1 }
        var bytes: [UInt8] = []
        CBORWriter.write(.map([CBORMapEntry(key: "d", value: .text(String(repeating: "a", count: max(0, length))))]), into: &bytes)
        return bytes
    }
}
