/// What one link to one device can carry: the single place where transports, the session and transfers
/// read the sizes they must respect.
///
/// Each transport declares what its link carries (packet size and framing overhead, frames in flight,
/// how the device's buffers turn into requests in flight, the session's retransmission, the erase resend
/// floor, console lines, out-of-order pieces) and what it learned by probing; `refined(deviceBufferSize:
/// deviceBufferCount:requestedWindow:)` adds `os params` and the user's request, and `packetSize` and
/// `window` are then the one answer the client's session, uploads, downloads and firmware upgrades read.
/// Pure: no I/O. `-v` prints it.
public struct LinkLimits: Sendable, Hashable, CustomStringConvertible {
    /// Serial console framing limits: Zephyr's `uart_mcumgr` (and MCUboot's boot_serial) receive a frame
    /// line by line into a few fixed line buffers.
    public struct ConsoleLines: Sendable, Hashable, CustomStringConvertible {
        /// Longest line the device takes, markers and newline included
        /// (`CONFIG_UART_MCUMGR_RX_BUF_SIZE` - 1: 127 for Zephyr's default 128-byte buffers).
        public var length: Int
        /// Lines the device holds at once (`CONFIG_UART_MCUMGR_RX_BUF_COUNT`, 2 by default): a burst of
        /// more lines than this is dropped. Longer frames must be paced.
        public var count: Int
        /// Bursts of `count` lines one request frame may span, paced a line gap apart (1: a request fits
        /// one burst). More than one where `LinkProbe` measured that such frames carry more per round
        /// trip: on a device that reads its console only every so often (Zephyr's native_sim reads its
        /// pty every 20 ms, two lines at a time), a frame of two bursts takes two reads and carries more
        /// than twice what a frame of one burst carries.
        public var burstsPerFrame: Int

        /// Zephyr's defaults (2 lines of 128-byte buffers): what every Zephyr and MCUboot device takes.
        public static let zephyrDefault = ConsoleLines(length: 127, count: 2)

        public init(length: Int, count: Int, burstsPerFrame: Int = 1) {
            self.length = max(7, length)
            self.count = max(1, count)
            self.burstsPerFrame = max(1, burstsPerFrame)
        }

        /// Base64 characters one line carries: whole quads between the 2-byte marker and the newline.
        public var charactersPerLine: Int { (length - 3) / 4 * 4 }

        /// The largest SMP packet whose console frame (length, packet, CRC, Base64) fits `lines` lines.
        public func largestPacket(inLines lines: Int) -> Int {
            let characters = max(0, lines) * charactersPerLine
            return max(0, characters / 4 * 3 - 4)
        }

        /// The largest SMP packet one burst (`count` lines) carries.
        public var largestPacketPerBurst: Int { largestPacket(inLines: count) }

        /// The largest SMP packet one request frame carries: `burstsPerFrame` bursts.
        public var largestPacketPerFrame: Int { largestPacket(inLines: count * burstsPerFrame) }

        /// These limits with request frames of `bursts` bursts.
        public func withBurstsPerFrame(_ bursts: Int) -> ConsoleLines {
            ConsoleLines(length: length, count: count, burstsPerFrame: bursts)
        }

        /// Bytes of an upload chunk's request besides its data (SMP header, CBOR keys and offset), as
        /// `pacedBurstsWorthTrying` counts them.
        public static let chunkOverhead = 32

        /// The bursts per frame whose frames carry the most upload data per burst, within a device buffer
        /// that takes `packetLimit`-byte packets, when that is more than one burst: the frame worth
        /// measuring against one burst (`pacingPays`). nil when one burst carries the most (the buffer
        /// ends within the next burst, or the limits already pace frames).
        public func pacedBurstsWorthTrying(packetLimit: Int) -> Int? {
            guard burstsPerFrame == 1 else { return nil }
            func dataPerBurst(_ bursts: Int) -> Double {
                Double(min(packetLimit, largestPacket(inLines: count * bursts)) - Self.chunkOverhead) / Double(bursts)
            }
            var best = 1
            var bursts = 2
            while largestPacket(inLines: count * (bursts - 1)) < packetLimit, bursts <= 64 {
                if dataPerBurst(bursts) > dataPerBurst(best) { best = bursts }
                bursts += 1
            }
            return best > 1 ? best : nil
        }

        /// Whether frames of `paced` bursts move more upload data per second than frames of one burst,
        /// given the round trip measured for each (`LinkProbe`), within a device buffer that takes
        /// `packetLimit`-byte packets.
        public func pacingPays(_ paced: Int, packetLimit: Int, oneBurstRoundTrip: Duration, pacedRoundTrip: Duration) -> Bool {
            let one = Double(min(packetLimit, largestPacketPerBurst) - Self.chunkOverhead)
            let more = Double(min(packetLimit, largestPacket(inLines: count * paced)) - Self.chunkOverhead)
            let oneTime = Double(oneBurstRoundTrip.nanosecondsClamped)
            let moreTime = Double(pacedRoundTrip.nanosecondsClamped)
            guard one > 0, more > one, oneTime > 0, moreTime > 0 else { return false }
            return more / moreTime > one / oneTime
        }

        /// Lines the console frame of a `packetSize`-byte SMP packet takes.
        public func lines(forPacket packetSize: Int) -> Int {
            let characters = Base64.encodedCount(of: packetSize + 4)
            let perLine = max(4, charactersPerLine)
            return (characters + perLine - 1) / perLine
        }

        public var description: String {
            "\(count) lines of \(length) B" + (burstsPerFrame > 1 ? ", frames of up to \(burstsPerFrame) bursts" : "")
        }

        /// Cuts a frame's lines into the bursts the device takes: `count` lines each, the first at once
        /// and each next one `gap` later (the device frees its line buffers as it handles them).
        /// - Returns: each burst's lines and its delay after the first.
        public func bursts(of lines: [[UInt8]], gap: Duration) -> [(delay: Duration, lines: ArraySlice<[UInt8]>)] {
            var result: [(delay: Duration, lines: ArraySlice<[UInt8]>)] = []
            var start = lines.startIndex
            var delay = Duration.zero
            while start < lines.endIndex {
                let end = min(start + count, lines.endIndex)
                result.append((delay, lines[start..<end]))
                start = end
                delay += gap
            }
            return result
        }
    }

    /// How a device's SMP buffers (`buf_count`) turn into requests in flight over a link.
    public enum BufferUse: Sendable, Hashable, CustomStringConvertible {
        /// A request takes one buffer and its answer one more: `buf_count - 1` requests in flight (one
        /// buffer answers while the others hold requests). Serial, Bluetooth LE, the in-memory simulator.
        case oneBufferPerRequest
        /// A request holds its buffer until it is answered, and the answer takes a second one:
        /// `buf_count / 2` requests in flight (Zephyr's UDP transport, see `UDPTransport`).
        case twoBuffersPerRequest

        /// Requests a device with `bufferCount` buffers takes in flight, at least 1.
        public func requestsInFlight(bufferCount: Int) -> Int {
            switch self {
            case .oneBufferPerRequest: return max(1, bufferCount - 1)
            case .twoBuffersPerRequest: return max(1, bufferCount / 2)
            }
        }

        public var description: String {
            switch self {
            case .oneBufferPerRequest: return "buf_count - 1 in flight"
            case .twoBuffersPerRequest: return "buf_count / 2 in flight"
            }
        }
    }

    // MARK: What the transport declares

    /// The largest SMP packet (header included) the link carries as one frame without pacing (a UDP
    /// datagram, a console burst, one Bluetooth LE write). Before the device's buffer is known, requests
    /// and chunks are sized to it; `packetSize` is the size to send.
    public var maximumPacketSize: Int
    /// Bytes of the device's SMP buffer the link's framing spends beside the packet (a serial console's
    /// length and CRC: 4).
    public var framingOverhead: Int
    /// The largest packet the link carries in several frames that the device joins again (Bluetooth LE
    /// towards a device with SMP reassembly); nil when a packet must fit one frame.
    public var reassembledPacketLimit: Int?
    /// Serial console line limits; nil on links without console framing.
    public var consoleLines: ConsoleLines?
    /// The pause between bursts of one console frame's lines (the device frees its line buffers as it
    /// handles them); nil on links without console framing.
    public var lineGap: Duration?
    /// The line's speed in bits per second when known (a UART's baud rate): it bounds a frame's wire time.
    public var bitsPerSecond: Int?
    /// Frames the link holds at once: the ceiling of every request window on it.
    public var framesInFlight: Int
    /// On a console link without a fixed window: a request takes as many of the device's line buffers
    /// (`consoleLines.count`) as its frame has lines until it is answered, so requests in flight are
    /// bounded by their lines (`window(forPacket:)`): two one-line requests in Zephyr's default 2 lines,
    /// one frame that fills them.
    public var framesFollowConsoleLines: Bool
    /// How the device's buffer count turns into requests in flight on this link.
    public var bufferUse: BufferUse
    /// The session's settings on this link (retransmission, the window before anything is known about
    /// the device).
    public var session: SMPSessionConfiguration
    /// The shortest wait before resending a request the device may take seconds to answer because it
    /// erases flash first (the first chunk of an image upload): a copy sent sooner only queues behind the
    /// erase, on a serial line in buffers the device needs for what follows. nil: resend it after the
    /// measured timeout like any other request (datagram links, where a copy costs nothing, the device
    /// drops what it has no buffer for, and a lost first chunk would otherwise cost the whole wait).
    public var eraseResendFloor: Duration?
    /// Chunk lengths are rounded to a multiple of this.
    public var byteAlignment: Int
    /// The pieces of one frame may arrive out of order (Bluetooth LE over EATT: BlueZ spreads the
    /// notifications of one answer over its bearers). Answers longer than one piece must then not
    /// overlap: downloads keep one request in flight (their answers fill the device's buffer).
    public var piecesArriveOutOfOrder: Bool

    // MARK: What was learned

    /// The device's SMP buffer (`buf_size` from `os params`) once known.
    public var deviceBufferSize: Int?
    /// The device's SMP buffer count (`buf_count`) once known; 1 for a device that does not report its
    /// buffers (one request at a time).
    public var deviceBufferCount: Int?
    /// Requests in flight the user asked for (a transfer's `pipelineDepth`); nil lets the device's buffers
    /// decide. Never more than the device's buffers take over this link, nor than the link holds.
    public var requestedWindow: Int?

    public init(
        maximumPacketSize: Int, framingOverhead: Int = 0, reassembledPacketLimit: Int? = nil,
        consoleLines: ConsoleLines? = nil, lineGap: Duration? = nil, bitsPerSecond: Int? = nil,
        framesInFlight: Int = 1, framesFollowConsoleLines: Bool = false, bufferUse: BufferUse = .oneBufferPerRequest,
        session: SMPSessionConfiguration = SMPSessionConfiguration(), eraseResendFloor: Duration? = .seconds(2),
        deviceBufferSize: Int? = nil, deviceBufferCount: Int? = nil, byteAlignment: Int = 1,
        piecesArriveOutOfOrder: Bool = false
    ) {
        self.framesFollowConsoleLines = framesFollowConsoleLines && consoleLines != nil
        self.piecesArriveOutOfOrder = piecesArriveOutOfOrder
        self.maximumPacketSize = max(SMPHeader.size + 1, maximumPacketSize)
        self.framingOverhead = max(0, framingOverhead)
        self.reassembledPacketLimit = reassembledPacketLimit
        self.consoleLines = consoleLines
        self.lineGap = lineGap
        self.bitsPerSecond = bitsPerSecond
        self.framesInFlight = max(1, framesInFlight)
        self.bufferUse = bufferUse
        self.session = session
        self.eraseResendFloor = eraseResendFloor
        self.deviceBufferSize = deviceBufferSize
        self.deviceBufferCount = deviceBufferCount
        self.byteAlignment = max(1, byteAlignment)
    }

    // MARK: The one answer

    /// These limits with what the device reported (`os params`: `buf_size`, `buf_count`) and what the user
    /// asked for. A nil argument keeps what is known; values below 1 are ignored. The result's
    /// `packetSize` and `window` are what the session, uploads, downloads and firmware upgrades use.
    public func refined(
        deviceBufferSize: Int? = nil, deviceBufferCount: Int? = nil, requestedWindow: Int? = nil
    ) -> LinkLimits {
        var limits = self
        if let deviceBufferSize, deviceBufferSize > SMPHeader.size { limits.deviceBufferSize = deviceBufferSize }
        if let deviceBufferCount, deviceBufferCount > 0 { limits.deviceBufferCount = deviceBufferCount }
        if let requestedWindow, requestedWindow > 0 { limits.requestedWindow = requestedWindow }
        return limits
    }

    /// The largest SMP packet (header included) to send: what the link carries (`maximumPacketSize`, or
    /// `reassembledPacketLimit` when the device joins frames), within the device's buffer less the
    /// framing's overhead once that buffer is known.
    public var packetSize: Int {
        guard let deviceBufferSize, deviceBufferSize > SMPHeader.size else { return maximumPacketSize }
        let link = reassembledPacketLimit ?? maximumPacketSize
        return max(SMPHeader.size + 1, min(link, deviceBufferSize - framingOverhead))
    }

    /// Requests in flight at once, never more than the link holds (`framesInFlight`): the requested window
    /// within what the device's buffers take over this link (`bufferUse`); without a request, what the
    /// buffers take; with neither known, the session's own window.
    public var window: Int {
        let fromDevice = deviceBufferCount.map { bufferUse.requestsInFlight(bufferCount: $0) }
        let wanted: Int
        switch (requestedWindow, fromDevice) {
        case (let requested?, let device?): wanted = min(requested, device)
        case (let requested?, nil): wanted = requested
        case (nil, let device?): wanted = device
        case (nil, nil): wanted = session.window
        }
        return max(1, min(framesInFlight, wanted))
    }

    /// Requests of `packetSize` bytes (header included) in flight at once: `window`, and where frames
    /// follow the console lines, no more whole frames than the device's line buffers hold (a download's
    /// one-line requests two at a time in Zephyr's default 2 lines, upload chunks that fill them one).
    public func window(forPacket packetSize: Int) -> Int {
        min(window, framesInFlight(forPacket: packetSize))
    }

    /// Frames of requests of `packetSize` bytes the link holds at once, whatever the device's buffers:
    /// `framesInFlight`, and where frames follow the console lines, the whole frames its line buffers hold.
    public func framesInFlight(forPacket packetSize: Int) -> Int {
        guard framesFollowConsoleLines, let consoleLines else { return framesInFlight }
        return max(1, min(framesInFlight, consoleLines.count / max(1, consoleLines.lines(forPacket: packetSize))))
    }

    public var description: String {
        let full = window(forPacket: packetSize)
        var frames =
            framesInFlight >= 255 && deviceBufferCount == nil && requestedWindow == nil
            ? "frames in flight as the device's buffers allow"
            : "\(full) frame\(full == 1 ? "" : "s") in flight"
        if full < window { frames += " (\(window) of one line)" }
        var parts = ["packet \(packetSize) B", frames]
        if framesInFlight < 255, framesInFlight != window, !framesFollowConsoleLines { parts.append("the link holds \(framesInFlight)") }
        if framingOverhead > 0 { parts.append("framing \(framingOverhead) B") }
        if let reassembledPacketLimit { parts.append("reassembled up to \(reassembledPacketLimit) B") }
        if let consoleLines {
            parts.append("console \(consoleLines)" + (lineGap.map { ", \($0.milliseconds) ms apart" } ?? ""))
        }
        if let deviceBufferSize, let deviceBufferCount {
            parts.append("device buffers \(deviceBufferCount) x \(deviceBufferSize) B (\(bufferUse))")
        }
        if let requestedWindow { parts.append("asked for \(requestedWindow) in flight") }
        if byteAlignment > 1 { parts.append("alignment \(byteAlignment)") }
        if piecesArriveOutOfOrder { parts.append("pieces arrive out of order") }
        return parts.joined(separator: ", ")
    }
}
