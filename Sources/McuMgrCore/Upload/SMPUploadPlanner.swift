/// Plans a chunked upload (image, file or SUIT): which byte range to send next, how many chunks may be
/// in flight, and where to continue when the device reports another offset than expected.
///
/// Pure bookkeeping: the caller sends the chunks and reports each answer's `off`. The device's offset
/// always wins (PROTOCOL.md 4.2, 4.4): after an unexpected offset every outstanding chunk is void, the
/// planner waits for them to drain and continues from what the device reported.
public struct SMPUploadPlanner: Sendable, Hashable {
    /// One range of the file to send.
    public struct Chunk: Sendable, Hashable, CustomStringConvertible {
        public var offset: Int
        public var length: Int
        public var end: Int { offset + length }
        public var description: String { "[\(offset)..<\(end)]" }
    }

    /// What an answer meant.
    public enum Acknowledgement: Sendable, Hashable {
        /// The device took the chunk; the upload goes on.
        case accepted
        /// The device reported another offset; the planner continues from there once in-flight chunks drain.
        case resynchronising(deviceOffset: Int)
        /// The device's offset lies outside the file: the device is confused or lying.
        case invalidOffset(Int)
    }

    /// Total bytes to upload.
    public let totalSize: Int
    /// Most chunks in flight at once.
    public var window: Int
    /// Chunk lengths (except the last) are rounded down to a multiple of this.
    public let alignment: Int
    /// Bytes the device has confirmed.
    public private(set) var confirmedOffset: Int
    /// The next byte to send.
    public private(set) var nextOffset: Int
    private var outstanding: [Chunk] = []
    private var resyncOffset: Int?

    public init(totalSize: Int, startOffset: Int = 0, window: Int = 1, alignment: Int = 1) {
        self.totalSize = max(0, totalSize)
        self.window = max(1, window)
        self.alignment = max(1, alignment)
        let start = min(max(0, startOffset), self.totalSize)
        self.confirmedOffset = start
        self.nextOffset = start
    }

    /// Whether every byte is confirmed and nothing is in flight.
    public var isComplete: Bool { confirmedOffset >= totalSize && outstanding.isEmpty && resyncOffset == nil }

    /// Chunks sent and not answered.
    public var inFlight: [Chunk] { outstanding }

    /// The next chunk to send, or nil when the window is full, the planner is draining, or all is sent.
    /// - Parameter maximumLength: the largest data length that fits one request at `nextOffset`
    ///   (see `SMPChunkSizer`).
    public mutating func nextChunk(maximumLength: Int) -> Chunk? {
        guard resyncOffset == nil, outstanding.count < window, nextOffset < totalSize else { return nil }
        let remaining = totalSize - nextOffset
        var length = min(max(1, maximumLength), remaining)
        if length < remaining, length >= alignment {
            length -= length % alignment
        }
        let chunk = Chunk(offset: nextOffset, length: length)
        outstanding.append(chunk)
        nextOffset = chunk.end
        return chunk
    }

    /// Records the device's answer to `chunk`: the `off` it reported.
    public mutating func acknowledge(_ chunk: Chunk, deviceOffset: Int) -> Acknowledgement {
        outstanding.removeAll { $0 == chunk }
        guard deviceOffset >= 0, deviceOffset <= totalSize else {
            return .invalidOffset(deviceOffset)
        }
        if resyncOffset == nil, deviceOffset == chunk.end {
            confirmedOffset = max(confirmedOffset, deviceOffset)
            return .accepted
        }
        // Unexpected offset (or draining after one): the latest report wins.
        resyncOffset = deviceOffset
        finishDrainIfDone()
        return .resynchronising(deviceOffset: deviceOffset)
    }

    /// The chunks still outstanding that the device's confirmed offset covers: their own answers were
    /// lost, but a later chunk's answer shows the device holds them. They are no longer waited for.
    public mutating func settleCovered() -> [Chunk] {
        guard resyncOffset == nil else { return [] }
        let covered = outstanding.filter { $0.end <= confirmedOffset }
        outstanding.removeAll { $0.end <= confirmedOffset }
        return covered
    }

    /// A chunk got no usable answer (timeout after the session's resends): continue from the last
    /// confirmed offset once the others drain.
    public mutating func chunkLost(_ chunk: Chunk) {
        outstanding.removeAll { $0 == chunk }
        resyncOffset = min(resyncOffset ?? confirmedOffset, confirmedOffset)
        finishDrainIfDone()
    }

    private mutating func finishDrainIfDone() {
        guard outstanding.isEmpty, let offset = resyncOffset else { return }
        resyncOffset = nil
        confirmedOffset = offset
        nextOffset = offset
    }
}

/// Works out how many data bytes fit one upload request.
public enum SMPChunkSizer {
    /// The largest `n` such that a request of `sizeWithEmptyData - 1 + headSize(n) + n` bytes fits
    /// `messageLimit`, where `sizeWithEmptyData` is the whole SMP packet (header included) encoded with
    /// an empty `data` byte string (whose head is 1 byte).
    public static func maximumDataLength(messageLimit: Int, sizeWithEmptyData: Int) -> Int {
        let budget = messageLimit - (sizeWithEmptyData - 1)
        guard budget > 1 else { return 0 }
        var n = budget - 1
        while n > 0, CBORWriter.headSize(argument: UInt64(n)) + n > budget { n -= 1 }
        return n
    }
}
