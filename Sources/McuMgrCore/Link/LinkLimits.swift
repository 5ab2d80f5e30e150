/// What one link to one device can carry: the single place where transports, the session and transfers
/// read the sizes they must respect.
///
/// Each transport builds a starting value from its configuration (what is always safe for the link);
/// `os params`, probing and observed losses refine it; `-v` prints it.
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

        /// Zephyr's defaults (2 lines of 128-byte buffers): what every Zephyr and MCUboot device takes.
        public static let zephyrDefault = ConsoleLines(length: 127, count: 2)

        public init(length: Int, count: Int) {
            self.length = max(7, length)
            self.count = max(1, count)
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

        /// Lines the console frame of a `packetSize`-byte SMP packet takes.
        public func lines(forPacket packetSize: Int) -> Int {
            let characters = Base64.encodedCount(of: packetSize + 4)
            let perLine = max(4, charactersPerLine)
            return (characters + perLine - 1) / perLine
        }

        public var description: String { "\(count) lines of \(length) B" }

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

    /// The largest SMP packet (header included) that the link and the device take in one frame without
    /// pacing; requests and chunks are sized to it.
    public var maximumPacketSize: Int
    /// Serial console line limits; nil on links without console framing.
    public var consoleLines: ConsoleLines?
    /// Frames the device holds at once: the ceiling of the request window.
    public var framesInFlight: Int
    /// The device's SMP buffer (`buf_size` from `os params`) once known.
    public var deviceBufferSize: Int?
    /// The device's SMP buffer count (`buf_count`) once known.
    public var deviceBufferCount: Int?
    /// Chunk lengths are rounded to a multiple of this.
    public var byteAlignment: Int
    /// The pieces of one frame may arrive out of order (Bluetooth LE over EATT: BlueZ spreads the
    /// notifications of one answer over its bearers). Answers longer than one piece must then not
    /// overlap: downloads keep one request in flight (their answers fill the device's buffer).
    public var piecesArriveOutOfOrder: Bool

    public init(
        maximumPacketSize: Int, consoleLines: ConsoleLines? = nil, framesInFlight: Int = 1,
        deviceBufferSize: Int? = nil, deviceBufferCount: Int? = nil, byteAlignment: Int = 1,
        piecesArriveOutOfOrder: Bool = false
    ) {
        self.piecesArriveOutOfOrder = piecesArriveOutOfOrder
        self.maximumPacketSize = max(SMPHeader.size + 1, maximumPacketSize)
        self.consoleLines = consoleLines
        self.framesInFlight = max(1, framesInFlight)
        self.deviceBufferSize = deviceBufferSize
        self.deviceBufferCount = deviceBufferCount
        self.byteAlignment = max(1, byteAlignment)
    }

    public var description: String {
        let frames =
            framesInFlight >= 255
            ? "frames in flight as the device's buffers allow"
            : "\(framesInFlight) frame\(framesInFlight == 1 ? "" : "s") in flight"
        var parts = ["packet \(maximumPacketSize) B", frames]
        if let consoleLines { parts.append("console \(consoleLines)") }
        if let deviceBufferSize, let deviceBufferCount { parts.append("device buffers \(deviceBufferCount) x \(deviceBufferSize) B") }
        if byteAlignment > 1 { parts.append("alignment \(byteAlignment)") }
        if piecesArriveOutOfOrder { parts.append("pieces arrive out of order") }
        return parts.joined(separator: ", ")
    }
}
