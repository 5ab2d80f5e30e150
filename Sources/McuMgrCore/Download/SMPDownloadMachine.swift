/// The file-download transfer machine: which offsets to ask for, how many requests may be in flight,
/// what each answer means, in which order the data is written, and when to give up.
///
/// Pure, like `SMPUploadMachine`: events in (an answer's offset, length and data size; a request that
/// got no answer after the session's resends; a busy answer; the device's buffers), actions out (ask
/// for an offset, now or after a pause; write a piece; ask for the device's buffers; finish; fail).
/// The runner (`FileSystemManager.download`) holds the data, sends the requests and reads the clock.
///
/// A download's requests are small and its answers fill the device's buffer, so the round trip, not the
/// bytes, sets its pace: after the first answer (alone: it carries the file's length and shows the
/// device's chunk size) the machine keeps `depth` requests in flight at the offsets the chunk size
/// predicts. Zephyr's chunks are all the same size (`CONFIG_MCUMGR_GRP_FS_DL_CHUNK_SIZE`, or what its
/// buffer holds); a shorter answer before the end leaves a gap the machine asks for next. Answers may
/// arrive in any order (pieces are written in file order), may overlap (only new bytes are written),
/// and a request that got no answer is asked again, with the window halved, until nothing has arrived
/// for `stallTimeout`. A loss halves the window; a window's worth of answers grows it back by one.
public struct SMPDownloadMachine: Sendable {
    /// How the machine behaves.
    public struct Limits: Sendable, Hashable {
        /// Most requests in flight once the device's buffers are known (see `depthUnknown`); at least 1.
        public var depth: Int?
        /// What the link holds in flight (a serial console: the requests its line buffers hold); bounds `depth`, and a link of 1 never asks
        /// for the device's buffers.
        public var linkFramesInFlight: Int
        /// The largest file accepted.
        public var maximumLength: Int
        /// Give up when no data arrived for this long.
        public var stallTimeout: Duration
        /// Give up when the whole download takes longer; nil: no limit.
        public var deadline: Duration?
        /// The longest wait for one answer (the session resends within it).
        public var requestTimeout: Duration
        /// Pause before asking again for an offset the device answered busy.
        public var busyRetryDelay: Duration
        /// With `depth` unknown, the device's buffers are asked for (one round trip) only when at least
        /// this many chunks remain after the first: a pipeline saves more than the question costs.
        public var chunksWorthAskingForBuffers: Int

        public init(
            depth: Int? = nil, linkFramesInFlight: Int = 1, maximumLength: Int = 64 * 1024 * 1024,
            stallTimeout: Duration = .seconds(30), deadline: Duration? = nil, requestTimeout: Duration = .seconds(10),
            busyRetryDelay: Duration = .milliseconds(100), chunksWorthAskingForBuffers: Int = 8
        ) {
            self.depth = depth.map { max(1, $0) }
            self.linkFramesInFlight = max(1, linkFramesInFlight)
            self.maximumLength = max(0, maximumLength)
            self.stallTimeout = stallTimeout
            self.deadline = deadline
            self.requestTimeout = requestTimeout
            self.busyRetryDelay = busyRetryDelay
            self.chunksWorthAskingForBuffers = chunksWorthAskingForBuffers
        }
    }

    /// What the runner must do.
    public enum Action: Sendable, Hashable {
        /// Send a download request for `offset`, waiting at most `timeout` for its answer.
        case send(offset: Int, timeout: Duration)
        /// The same, after a pause (the device was busy).
        case sendAfter(Duration, offset: Int, timeout: Duration)
        /// Write bytes `skip..<count` of the piece answered for `offset` (the earlier ones are written
        /// already); pieces come in file order.
        case write(offset: Int, skip: Int, count: Int)
        /// Drop the piece answered for `offset` without writing it (every byte of it is written already).
        case discard(offset: Int)
        /// Ask the device for its buffers (`os params`) and report with `buffers(framesInFlight:)`.
        case askForBuffers
        /// Every byte is written.
        case finished(length: Int)
        /// The download cannot go on.
        case fail(Failure)
    }

    /// Why a download stops.
    public enum Failure: Sendable, Hashable {
        /// The first answer has no `len`.
        case noLength
        /// The file is larger than `maximumLength`.
        case tooLarge(length: Int, limit: Int)
        /// An answer announced another length.
        case lengthChanged(from: Int, to: Int)
        /// An answer before the end carried no data.
        case noData(offset: Int, length: Int)
        /// An answer carried bytes past the announced end.
        case pastTheEnd(length: Int)
        /// No data arrived for `stallTimeout`.
        case stalled(for: Duration, written: Int, length: Int?)
        /// The whole download took longer than `deadline`.
        case deadline(Duration, written: Int, length: Int?)
    }

    public let limits: Limits
    public private(set) var length: Int?
    /// Bytes written, from offset 0 on.
    public private(set) var written = 0
    /// The data size of the first answer: the device's chunk.
    public private(set) var chunkSize: Int?
    /// Requests in flight at once now (halved by a loss, never above the depth).
    public private(set) var window = 1
    /// Requests sent, resends included.
    public private(set) var requestsSent = 0
    /// Requests that got no answer (after the session's resends) and were sent again.
    public private(set) var losses = 0
    private var depth: Int?
    private var awaitingBuffers = false
    /// Offsets asked for and not answered (including those waiting for a busy pause).
    private var inFlight: Set<Int> = []
    /// Answered pieces not yet written: offset -> data size.
    private var pending: [Int: Int] = [:]
    /// Offsets to ask for before the predicted ones (gaps a short answer left, lost requests).
    private var gaps: [Int] = []
    /// The next predicted offset.
    private var nextOffset = 0
    private var started: SMPInstant = .zero
    private var lastData: SMPInstant = .zero
    private var done = false
    /// Answers since the window last grew.
    private var cleanAnswers = 0

    public init(limits: Limits) {
        self.limits = limits
        self.depth = limits.depth.map { min($0, limits.linkFramesInFlight) }
        self.window = depth ?? 1
    }

    /// Every byte is written.
    public var isComplete: Bool { length.map { written >= $0 } ?? false }

    /// Starts: the request for offset 0 goes alone.
    public mutating func start(now: SMPInstant) -> [Action] {
        started = now
        lastData = now
        nextOffset = 0
        return [send(0, now: now)]
    }

    /// The device answered the request for `requested` with `dataCount` bytes starting there, and
    /// `length` when it sent `len`. Validation of the answer's own keys is the runner's (the offset it
    /// names must be `requested`).
    public mutating func answered(requested: Int, dataCount: Int, length announced: Int?, now: SMPInstant) -> [Action] {
        guard !done else { return [] }
        inFlight.remove(requested)
        if let announced {
            if let length, announced != length { return fail(.lengthChanged(from: length, to: announced)) }
            if length == nil {
                guard announced <= limits.maximumLength else {
                    return fail(.tooLarge(length: announced, limit: limits.maximumLength))
                }
                length = announced
            }
        } else if length == nil {
            return fail(.noLength)
        }
        let total = length ?? 0
        if dataCount == 0, requested < total { return fail(.noData(offset: requested, length: total)) }
        guard requested + dataCount <= total else { return fail(.pastTheEnd(length: total)) }
        var actions: [Action] = []
        if dataCount > 0 {
            lastData = now
            if let depth, window < depth {
                cleanAnswers += 1
                if cleanAnswers >= window {
                    cleanAnswers = 0
                    window += 1
                }
            }
            if chunkSize == nil {
                chunkSize = dataCount
                nextOffset = max(nextOffset, requested + dataCount)
            }
            pending[requested] = dataCount
            // A short answer before the end (or one for a gap) leaves bytes nobody asked for: ask for them next.
            let end = requested + dataCount
            if end < total, !isCovered(end) { gaps.append(end) }
            actions += writeReady()
        }
        if isComplete {
            done = true
            return actions + [.finished(length: total)]
        }
        if depth == nil, !awaitingBuffers, let chunk = chunkSize {
            let remaining = (total - written + chunk - 1) / chunk
            if limits.linkFramesInFlight > 1, remaining >= limits.chunksWorthAskingForBuffers {
                awaitingBuffers = true
                return actions + [.askForBuffers]
            }
            depth = 1
        }
        return actions + fill(now: now)
    }

    /// The device's buffers allow this many requests in flight (nil: it did not say; one at a time).
    public mutating func buffers(framesInFlight: Int?, now: SMPInstant) -> [Action] {
        guard !done else { return [] }
        awaitingBuffers = false
        depth = min(max(1, framesInFlight ?? 1), limits.linkFramesInFlight)
        window = depth ?? 1
        return fill(now: now)
    }

    /// The request for `offset` got no answer (after the session's resends): it is asked again, and the
    /// window halves (the device may have had no buffer for it).
    public mutating func lost(offset: Int, now: SMPInstant) -> [Action] {
        guard !done else { return [] }
        inFlight.remove(offset)
        if let failure = overdue(now: now) { return fail(failure) }
        losses += 1
        window = max(1, window / 2)
        cleanAnswers = 0
        // Before the first answer nothing else is known: ask for offset 0 again.
        if chunkSize == nil { return [send(offset, now: now)] }
        if !isAnswered(offset) { gaps.insert(offset, at: 0) }
        return fill(now: now)
    }

    /// The device answered the request for `offset` busy: it is asked again after a pause.
    public mutating func busy(offset: Int, now: SMPInstant) -> [Action] {
        guard !done else { return [] }
        if let failure = overdue(now: now) {
            inFlight.remove(offset)
            return fail(failure)
        }
        requestsSent += 1
        return [.sendAfter(limits.busyRetryDelay, offset: offset, timeout: timeout(now: now + limits.busyRetryDelay))]
    }

    // MARK: - Internals

    private mutating func fail(_ failure: Failure) -> [Action] {
        done = true
        return [.fail(failure)]
    }

    private func overdue(now: SMPInstant) -> Failure? {
        if let deadline = limits.deadline, now - started >= deadline {
            return .deadline(deadline, written: written, length: length)
        }
        if now - lastData >= limits.stallTimeout {
            return .stalled(for: limits.stallTimeout, written: written, length: length)
        }
        return nil
    }

    /// The wait for one answer: the request timeout, within the stall timeout and the deadline.
    private func timeout(now: SMPInstant) -> Duration {
        var timeout = min(limits.requestTimeout, limits.stallTimeout - (now - lastData))
        if let deadline = limits.deadline { timeout = min(timeout, deadline - (now - started)) }
        return max(timeout, .milliseconds(1))
    }

    private mutating func send(_ offset: Int, now: SMPInstant) -> Action {
        inFlight.insert(offset)
        requestsSent += 1
        return .send(offset: offset, timeout: timeout(now: now))
    }

    /// Whether the byte at `offset` is written, held, or asked for.
    private func isCovered(_ offset: Int) -> Bool {
        if offset < written || isAnswered(offset) || gaps.contains(offset) || offset >= nextOffset { return true }
        let chunk = chunkSize ?? 1
        return inFlight.contains { $0 <= offset && offset < $0 + chunk }
    }

    private func isAnswered(_ offset: Int) -> Bool {
        offset < written || pending.contains { $0.key <= offset && offset < $0.key + $0.value }
    }

    /// Requests up to the window: gaps first, then the predicted offsets.
    private mutating func fill(now: SMPInstant) -> [Action] {
        guard let total = length, let chunk = chunkSize, let depth else { return [] }
        window = min(max(1, window), depth)
        var actions: [Action] = []
        while inFlight.count < window {
            if let gap = gaps.first {
                gaps.removeFirst()
                if isAnswered(gap) || inFlight.contains(gap) { continue }
                actions.append(send(gap, now: now))
            } else if nextOffset < total {
                let offset = nextOffset
                nextOffset += chunk
                if isAnswered(offset) || inFlight.contains(offset) { continue }
                actions.append(send(offset, now: now))
            } else {
                break
            }
        }
        if actions.isEmpty, inFlight.isEmpty, !isComplete {
            // Nothing asked for and bytes missing (a gap lost track of): ask from the written end.
            actions.append(send(written, now: now))
        }
        return actions
    }

    /// Writes the pieces that continue the written bytes, in order; drops pieces already covered.
    private mutating func writeReady() -> [Action] {
        var actions: [Action] = []
        var progressed = true
        while progressed {
            progressed = false
            for (offset, count) in pending.sorted(by: { $0.key < $1.key }) {
                if offset + count <= written {
                    pending[offset] = nil
                    actions.append(.discard(offset: offset))
                } else if offset <= written {
                    pending[offset] = nil
                    actions.append(.write(offset: offset, skip: written - offset, count: count))
                    written = offset + count
                    progressed = true
                }
            }
        }
        return actions
    }
}
