/// The chunked-upload transfer machine (images, files, SUIT envelopes): which chunk to send, how many
/// may be in flight, what each answer means, and when to give up.
///
/// Pure, like `SMPSession`: events in (a chunk's answer as read, `handle(_:to:now:)`: the device's
/// offset, an error's return code, no answer; a resend the session made), actions out (send a chunk,
/// send it again after a pause, report progress or a resumed upload, finish, fail with a reason and how
/// to report it, or ask for the device's buffers and start again). It owns the offset plan (`SMPUploadPlanner`: the
/// device's offset always wins), the window (`CongestionWindow`: grows on clean answers, halves when
/// the link loses something, never above what the device holds), each request's timeout (`Timing`)
/// and the counters that decide failure. Resend timers live in the session; the runner
/// (`ChunkedUploader`) only reads data, builds requests, waits for answers and reads the clock.
public struct SMPUploadMachine: Sendable {
    public typealias Chunk = SMPUploadPlanner.Chunk

    /// Data bytes that fit one request: the requests at offset 0 carry extra keys, and the offset's CBOR
    /// head grows with it.
    public struct ChunkLengths: Sendable, Hashable {
        /// For the chunk at offset 0.
        public var first: Int
        /// By the size of the offset's CBOR head (1, 2, 3, 5 or 9 bytes).
        public var byOffsetHeadSize: [Int: Int]

        public init(first: Int, byOffsetHeadSize: [Int: Int]) {
            self.first = first
            self.byOffsetHeadSize = byOffsetHeadSize
        }

        /// The largest data length of a chunk starting at `offset`.
        public func length(at offset: Int) -> Int {
            offset == 0 ? first : byOffsetHeadSize[CBORWriter.headSize(argument: UInt64(offset))] ?? first
        }
    }

    /// How the machine behaves.
    public struct Limits: Sendable, Hashable {
        /// Most chunks in flight (the device's buffers, the link's frames).
        public var depth: Int
        /// Chunk lengths (except the last) are a multiple of this.
        public var alignment: Int
        public var chunkLengths: ChunkLengths
        /// Most chunks lost in a row (each after the session's resends) before the upload fails.
        public var maximumConsecutiveLosses: Int
        /// Most busy answers to one chunk.
        public var maximumBusyRetries: Int
        /// Pause before sending a chunk the device answered busy.
        public var busyRetryDelay: Duration
        /// The longest time without progress: a chunk lost again (sent twice) when the device has confirmed
        /// nothing for this long ends the upload (`--timeout`). Nil leaves it to `maximumConsecutiveLosses`.
        public var progressTimeout: Duration?
        /// How long each request waits for its answer.
        public var timing: Timing

        public init(
            depth: Int, alignment: Int = 1, chunkLengths: ChunkLengths, maximumConsecutiveLosses: Int = 3,
            maximumBusyRetries: Int = 50, busyRetryDelay: Duration = .milliseconds(100), progressTimeout: Duration? = nil,
            timing: Timing = .init()
        ) {
            self.progressTimeout = progressTimeout
            self.timing = timing
            self.depth = max(1, depth)
            self.alignment = max(1, alignment)
            self.chunkLengths = chunkLengths
            self.maximumConsecutiveLosses = maximumConsecutiveLosses
            self.maximumBusyRetries = maximumBusyRetries
            self.busyRetryDelay = busyRetryDelay
        }
    }

    /// How long a chunk's request waits for its answer, and how soon the session may send it again.
    public struct Timing: Sendable, Hashable {
        /// For the chunk at offset 0, which may erase a whole slot.
        public var firstChunkTimeout: Duration
        /// For every other chunk.
        public var chunkTimeout: Duration
        /// The link's `LinkLimits.eraseResendFloor`: a chunk that may erase is not resent sooner (nor
        /// sooner than a quarter of its timeout). Nil: the session's own timer decides.
        public var eraseResendFloor: Duration?
        /// The chunk at offset 0 may erase (an image slot).
        public var firstChunkMayErase: Bool
        /// Every chunk may erase (MCUboot's serial recovery erases sector by sector as the upload reaches it).
        public var everyChunkMayErase: Bool
        /// Set when the device's buffers are remembered rather than asked: the chunk at offset 0 waits this
        /// long only, and before the device confirmed a byte, no answer to it (or another failure that may
        /// mean the buffers no longer hold) asks the device for them (`askForBuffers`).
        public var rememberedBuffersCheck: Duration?

        public init(
            firstChunkTimeout: Duration = .seconds(40), chunkTimeout: Duration = .seconds(10), eraseResendFloor: Duration? = nil,
            firstChunkMayErase: Bool = true, everyChunkMayErase: Bool = false, rememberedBuffersCheck: Duration? = nil
        ) {
            self.firstChunkTimeout = firstChunkTimeout
            self.chunkTimeout = chunkTimeout
            self.eraseResendFloor = eraseResendFloor
            self.firstChunkMayErase = firstChunkMayErase
            self.everyChunkMayErase = everyChunkMayErase
            self.rememberedBuffersCheck = rememberedBuffersCheck
        }

        /// How long the first chunk under remembered buffers may take before the device is asked for them:
        /// a few round trips (at least 1 s, 2 s on a serial console, whose frames are paced in bursts), never
        /// more than the first chunk's own timeout.
        public static func rememberedBuffersCheck(
            smoothedRoundTrip: Duration?, consoleLink: Bool, firstChunkTimeout: Duration
        ) -> Duration {
            let least: Duration = consoleLink ? .seconds(2) : .seconds(1)
            return min(firstChunkTimeout, max(least, (smoothedRoundTrip ?? .milliseconds(100)) * 8))
        }
    }

    /// A chunk's answer as the runner read it, before any judgement.
    public enum Answer: Sendable, Hashable {
        /// The device's next offset. `refusesChunk`: the answer refuses the chunk for its offset and names
        /// the device's own instead (Zephyr's fs error 11 with `len`): the device took none of the chunk.
        case offset(Int, refusesChunk: Bool = false)
        /// A device error with this return code (`rc 10`, busy, is sent again after a pause).
        case deviceError(McuMgrReturnCode?)
        /// No answer within the request's timeout, after the session's resends.
        case noAnswer
    }

    /// What the runner must do.
    public enum Action: Sendable, Hashable {
        /// Read the chunk's data and send its request.
        case send(Chunk)
        /// Send the chunk's request again after a pause (the device was busy).
        case sendAgain(Chunk, after: Duration)
        /// Stop waiting for this chunk's answer: a later chunk's answer shows the device holds it.
        case abandon(Chunk)
        /// Send this chunk again now, as a new request (the old one is abandoned): a later chunk's answer
        /// shows the device still waits for it, so the request was lost (fast retransmit, without waiting
        /// for the round-trip timeout).
        case resendNow(Chunk)
        /// The device confirmed this many bytes.
        case progress(confirmed: Int)
        /// The device already held this many bytes of this upload (same image or file): it continues there.
        case resumed(offset: Int)
        /// The device asked for an offset before what it had confirmed: it lost data (it reset, or its
        /// upload session ended). The upload continues from there.
        case wentBack(from: Int, to: Int)
        /// The window changed.
        case window(CongestionWindow)
        /// Every byte is confirmed.
        case finished
        /// The upload cannot go on (under these limits: see `Failure.buffersInDoubt`).
        case fail(Failure)
    }

    /// Why an upload stops.
    public enum Failure: Sendable, Hashable, CustomStringConvertible {
        /// The device reported an offset outside the upload.
        case offsetOutside(Int, total: Int)
        /// Chunks were lost (after the session's resends) this many times in a row.
        case lostInARow(Int, confirmed: Int, total: Int)
        /// Nothing moved the upload on for this long.
        case noAnswer(for: Duration, confirmed: Int, total: Int)
        /// The link loses too large a share of the chunks.
        case lossy(lost: Int, sent: Int, confirmed: Int, total: Int)
        /// The device keeps answering without moving its offset.
        case noProgress(confirmed: Int)
        /// The device answered busy too often for one chunk.
        case busy(Chunk)
        /// Nothing in flight, nothing to send, and not complete (a planner invariant broke).
        case stalled(confirmed: Int, total: Int)
        /// The device rejected this chunk (an error other than busy) when no copy of it could have confused
        /// the device, or again after every resynchronisation: its own error says why.
        case rejected(Chunk)
        /// The device refused this chunk, sent once and never resent, yet holds bytes past its offset: bytes
        /// no request of this upload put there (Zephyr appended a late copy of the first chunk to its file).
        case appendedCopy(Chunk, deviceOffset: Int)
        /// The chunk at offset 0 got no answer within `Timing.rememberedBuffersCheck`.
        case firstChunkUnanswered
        /// Under remembered buffers (`Timing.rememberedBuffersCheck`), before the device confirmed a byte,
        /// the upload failed in a way that may mean they no longer hold (no answer, or a request refused
        /// for its size): the runner abandons what is in flight, asks the device for its buffers and starts
        /// again under them (reported as `askForBuffers`). The failure says what happened.
        indirect case buffersInDoubt(Failure)

        public var description: String {
            switch self {
            case .offsetOutside(let offset, let total):
                return "the device reported offset \(offset), outside the \(total)-byte upload; reset the device and retry"
            case .lostInARow(let count, let confirmed, let total):
                return "\(count) chunks in a row got no answer; the upload reached offset \(confirmed) of \(total) bytes; run the same command again to resume from there"
            case .noAnswer(let duration, let confirmed, let total):
                return "no progress for \(duration.milliseconds / 1000) s; the upload reached offset \(confirmed) of \(total) bytes; run the same command again to resume from there"
            case .lossy(let lost, let sent, let confirmed, let total):
                return "the link lost \(lost) of \(sent) chunks; the upload reached offset \(confirmed) of \(total) bytes. Check the link (cable, baud rate, interference) and run the same command again to resume"
            case .noProgress(let confirmed):
                return "makes no progress: the device keeps answering offset \(confirmed); reset the device and retry"
            case .busy(let chunk):
                return "the device stayed busy at offset \(chunk.offset); retry when it is idle"
            case .stalled(let confirmed, let total):
                return "stalled at offset \(confirmed) of \(total); retry the upload"
            case .rejected(let chunk):
                return "the device rejected the chunk at offset \(chunk.offset)"
            case .appendedCopy(let chunk, let offset):
                return "the device refused the chunk at offset \(chunk.offset) but holds \(offset) bytes, which this upload did not send there (a repeated first chunk was appended)"
            case .firstChunkUnanswered:
                return "no answer to the first chunk under the device's remembered buffers"
            case .buffersInDoubt(let failure):
                return failure.description
            }
        }

        /// How the runner reports a failure (the error kinds live above the core).
        public enum Report: Sendable, Hashable {
            /// With the device's own error for the chunk.
            case devicesError
            /// With the chunk request's own timeout error.
            case requestTimeout
            /// As a timeout of the upload, after the last request timeout's words.
            case timeout
            /// As a timeout of the link, which loses too much.
            case lossyLink
            /// As the device breaking the protocol.
            case protocolViolation
            /// Not at all: ask the device for its buffers and start again (`buffersInDoubt`).
            case askForBuffers
        }

        /// How the runner reports this failure.
        public var report: Report {
            switch self {
            case .rejected: return .devicesError
            case .firstChunkUnanswered: return .requestTimeout
            case .lostInARow, .noAnswer: return .timeout
            case .lossy: return .lossyLink
            case .offsetOutside, .noProgress, .busy, .stalled, .appendedCopy: return .protocolViolation
            case .buffersInDoubt: return .askForBuffers
            }
        }
    }

    public let total: Int
    public let limits: Limits
    private var planner: SMPUploadPlanner
    public private(set) var window: CongestionWindow
    private var firstChunkPending = false
    private var busyCounts: [Chunk: Int] = [:]
    /// Chunks sent again at once after a later answer showed them lost; not again until answered.
    private var fastResent: Set<Chunk> = []
    public private(set) var resumedFrom: Int?
    public private(set) var chunksSent = 0
    public private(set) var largestChunk = 0
    private var consecutiveLosses = 0
    public private(set) var losses = 0
    private var answersWithoutProgress = 0
    /// Rejections answered by a resynchronisation since the last clean answer.
    private var consecutiveRejections = 0
    private var lastProgress: SMPInstant?
    private var failed = false
    /// Resends the session made during the upload (`linkResent`).
    private var linkResends = 0
    /// A resend since the last answer: the window already halved for it, and the next answer does not
    /// grow it again.
    private var resentSinceAnswer = false
    /// The device confirmed a byte of this upload.
    private var confirmedAny = false
    /// The return code of the last device error handed to `handle` (`rejected`).
    private var lastRejection: McuMgrReturnCode?
    /// `linkResends` when each chunk was first sent.
    private var resendsWhenFirstSent: [Chunk: Int] = [:]
    /// Chunks sent (or resent by the session) more than once: a copy of each may reach the device.
    private var sentAgain: Set<Chunk> = []

    public init(total: Int, limits: Limits, startOffset: Int = 0) {
        self.total = max(0, total)
        self.limits = limits
        self.planner = SMPUploadPlanner(
            totalSize: total, startOffset: startOffset, window: limits.depth, alignment: limits.alignment)
        self.window = CongestionWindow(ceiling: limits.depth)
    }

    /// Bytes the device confirmed.
    public var confirmedOffset: Int { planner.confirmedOffset }
    /// Requests on the link (sent and unanswered, or about to be sent again).
    public var inFlightCount: Int { planner.inFlight.count }
    /// Every byte confirmed.
    public var isComplete: Bool { planner.isComplete }

    /// The chunks to send now: as many as the window allows, none while `paused`; the chunk at offset 0
    /// goes alone and is waited for (it may erase a slot, or find an upload to resume).
    public mutating func fill(paused: Bool = false, now: SMPInstant = .zero) -> [Action] {
        guard !failed else { return [] }
        if lastProgress == nil || paused { lastProgress = max(lastProgress ?? now, now) }
        if planner.isComplete { return [.finished] }
        var actions: [Action] = []
        planner.window = window.value
        while !paused, !firstChunkPending {
            guard let chunk = planner.nextChunk(maximumLength: limits.chunkLengths.length(at: planner.nextOffset)) else { break }
            if chunk.offset == 0 { firstChunkPending = true }
            sending(chunk)
            chunksSent += 1
            largestChunk = max(largestChunk, chunk.length)
            actions.append(.send(chunk))
        }
        if actions.isEmpty, planner.inFlight.isEmpty, !paused {
            failed = true
            return [.fail(.stalled(confirmed: planner.confirmedOffset, total: total))]
        }
        return actions
    }

    /// How long `chunk`'s request waits for its answer, and the earliest the session may resend it (nil:
    /// its own timer decides). The chunk at offset 0 of an image may erase a slot for seconds: it waits
    /// `firstChunkTimeout` and is not resent within the link's erase floor (a late copy is harmless: the
    /// device answers it with its offset, or rewrites the same first bytes); with `everyChunkMayErase`, no
    /// chunk is. A first chunk that erases nothing (a file's) waits `chunkTimeout` like the others.
    public func requestTiming(for chunk: Chunk) -> (timeout: Duration, resendFloor: Duration?) {
        let timing = limits.timing
        let first = chunk.offset == 0
        let firstTimeout = timing.firstChunkMayErase ? timing.firstChunkTimeout : timing.chunkTimeout
        let timeout = first ? (timing.rememberedBuffersCheck ?? firstTimeout) : timing.chunkTimeout
        let mayErase = first ? timing.firstChunkMayErase : timing.everyChunkMayErase
        return (timeout, mayErase ? timing.eraseResendFloor.map { min($0, timeout / 4) } : nil)
    }

    /// The device answered `chunk` (or did not): an offset goes to `answered` (unless it shows bytes this
    /// upload did not send, below), rc 10 to `busy`, another error to `rejected`, no answer to `lost`.
    ///
    /// A refusal (`refusesChunk`) of a chunk past offset 0, sent once and never resent, that names an offset
    /// past the chunk's means the device holds bytes no request of this upload put there: Zephyr appends a
    /// late copy of the first chunk to the file it has open (a resend whose original was only late), and
    /// its offset then covers both copies, which reads like this chunk's acknowledgement when the chunks
    /// have the same length. The upload fails (`.appendedCopy`); the caller starts again.
    ///
    /// Under remembered buffers, no answer to the first chunk (before any other answer) asks for the
    /// device's buffers at once, and so does a failure that may mean they no longer hold (`buffersInDoubt`).
    public mutating func handle(_ answer: Answer, to chunk: Chunk, now: SMPInstant = .zero) -> [Action] {
        guard !failed else { return [] }
        switch answer {
        case .offset(let offset, let refusesChunk):
            if refusesChunk, chunk.offset > 0, offset > chunk.offset, !mayHaveCopies(chunk) {
                failed = true
                return [.fail(.appendedCopy(chunk, deviceOffset: offset))]
            }
            return answered(chunk, deviceOffset: offset, now: now)
        case .deviceError(let code) where code == .busy:
            return busy(chunk)
        case .deviceError(let code):
            lastRejection = code
            return doubtingBuffers(rejected(chunk))
        case .noAnswer:
            if limits.timing.rememberedBuffersCheck != nil, chunk.offset == 0, resumedFrom == nil {
                failed = true
                return [.fail(.buffersInDoubt(.firstChunkUnanswered))]
            }
            return doubtingBuffers(lost(chunk, now: now))
        }
    }

    /// Under remembered buffers, before the device confirmed a byte, a failure that may mean the buffers
    /// no longer hold asks for them instead: no answer (`lostInARow`, `noAnswer`, `lossy`), or a rejection
    /// with rc 2 (ENOMEM), 7 (EMSGSIZE) or 9 (ECORRUPT: Zephyr's UDP transport truncates a datagram larger
    /// than its buffer, and the header then announces more than arrived).
    private func doubtingBuffers(_ actions: [Action]) -> [Action] {
        guard limits.timing.rememberedBuffersCheck != nil, !confirmedAny, case .fail(let failure)? = actions.last else {
            return actions
        }
        switch failure {
        case .lostInARow, .noAnswer, .lossy: break
        case .rejected where [.noMemory, .messageTooLarge, .corrupt].contains(lastRejection): break
        default: return actions
        }
        return actions.dropLast() + [.fail(.buffersInDoubt(failure))]
    }

    /// The session sent `chunk`'s request again: no answer came within the round-trip timeout, so the
    /// link lost it, lost its answer, or is slower than measured. The window halves, once until the next
    /// answer (one loss often costs several requests in flight their answers), and the chunk counts as
    /// sent twice (see `rejected`).
    public mutating func linkResent(_ chunk: Chunk) -> [Action] {
        guard !failed else { return [] }
        linkResends += 1
        sentAgain.insert(chunk)
        guard !resentSinceAnswer else { return [] }
        resentSinceAnswer = true
        return window.lost() ? [.window(window)] : []
    }

    /// Whether a copy of `chunk`'s request may have reached the device besides the one answered: the
    /// chunk was sent more than once, or the session resent some request since the chunk went out (a
    /// late copy of an earlier chunk can change what the device answers to this one).
    public func mayHaveCopies(_ chunk: Chunk) -> Bool {
        sentAgain.contains(chunk) || linkResends > resendsWhenFirstSent[chunk, default: linkResends]
    }

    /// The device answered `chunk` with its next expected offset.
    public mutating func answered(_ chunk: Chunk, deviceOffset: Int, now: SMPInstant = .zero) -> [Action] {
        guard !failed else { return [] }
        busyCounts[chunk] = nil
        fastResent.remove(chunk)
        var actions: [Action] = []
        if chunk.offset == 0 { firstChunkPending = false }
        if chunk.offset == 0, resumedFrom == nil {
            // Only an offset past the first chunk is a resume; less is a partial acceptance (MCUboot takes
            // the 4-byte-aligned part and asks for the rest).
            resumedFrom = deviceOffset > chunk.end ? deviceOffset : 0
            if deviceOffset > chunk.end, deviceOffset <= total { actions.append(.resumed(offset: deviceOffset)) }
        }
        consecutiveLosses = 0
        consecutiveRejections = 0
        let before = planner.confirmedOffset
        var fastResend: Chunk?
        switch planner.acknowledge(chunk, deviceOffset: deviceOffset) {
        case .invalidOffset(let bad):
            failed = true
            return actions + [.fail(.offsetOutside(bad, total: total))]
        case .accepted:
            // Earlier chunks whose answers were lost: the device holds them.
            for covered in planner.settleCovered() {
                busyCounts[covered] = nil
                fastResent.remove(covered)
                actions.append(.abandon(covered))
            }
        case .resynchronising(let offset):
            // A later chunk found the device still waiting for an earlier one that is in flight: that
            // request was lost (or is late). Send it again now rather than after the timeout; a late copy
            // is harmless (the device answers it with its offset).
            if chunk.offset > offset, let lost = planner.inFlight.first(where: { $0.offset == offset }),
                !fastResent.contains(lost)
            {
                fastResent.insert(lost)
                fastResend = lost
                sending(lost)
                actions.append(.resendNow(lost))
            }
        }
        if deviceOffset < before { actions.append(.wentBack(from: before, to: deviceOffset)) }
        if planner.confirmedOffset > before { lastProgress = now }
        // The window grows only on answers that moved the upload on, and not on the first answer after
        // a resend (which halved it). A request lost on the way (fast resend) does not shrink it: the
        // device answered the chunks behind it, so its buffers keep up.
        if resentSinceAnswer {
            resentSinceAnswer = false
        } else if fastResend == nil, planner.confirmedOffset > before, window.acknowledged() {
            actions.append(.window(window))
        }
        return actions + afterAnswer(progressFrom: before)
    }

    /// The device answered `chunk` busy: send it again after a pause, up to a limit.
    public mutating func busy(_ chunk: Chunk) -> [Action] {
        guard !failed else { return [] }
        let count = (busyCounts[chunk] ?? 0) + 1
        busyCounts[chunk] = count
        guard count <= limits.maximumBusyRetries else {
            failed = true
            return [.fail(.busy(chunk))]
        }
        sending(chunk)
        return [.sendAgain(chunk, after: limits.busyRetryDelay)]
    }

    /// The device answered `chunk` with an error (not busy). After a copy of a request reached or may have
    /// reached the device (`mayHaveCopies`), a duplicate can draw an error that says nothing about the
    /// upload: MCUboot's serial recovery answers `rc 3` (EINVAL, no offset) to a request it could not
    /// decode, which is what a raw-framed copy becomes when the bootloader drops part of it while it
    /// erases a sector. Such an error never ends the transfer: the chunk is sent again as a new request,
    /// whose answer carries the device's offset (MCUboot and Zephyr answer a chunk at an offset they do
    /// not expect with the one they do), up to `maximumConsecutiveLosses` times in a row. Without a
    /// resend the error is the device's verdict: the upload fails (`.rejected`).
    public mutating func rejected(_ chunk: Chunk) -> [Action] {
        guard !failed else { return [] }
        busyCounts[chunk] = nil
        resentSinceAnswer = false
        consecutiveRejections += 1
        guard mayHaveCopies(chunk), consecutiveRejections <= limits.maximumConsecutiveLosses else {
            failed = true
            return [.fail(.rejected(chunk))]
        }
        // Sent again as a new request (still in flight for the planner); its answer resynchronises the offset.
        fastResent.insert(chunk)
        sending(chunk)
        return [.resendNow(chunk)]
    }

    /// `chunk` got no answer within its timeout, after the session's resends: continue from the last
    /// confirmed offset once the others drain, with half the window.
    public mutating func lost(_ chunk: Chunk, now: SMPInstant = .zero) -> [Action] {
        guard !failed else { return [] }
        if chunk.offset == 0 { firstChunkPending = false }
        busyCounts[chunk] = nil
        consecutiveLosses += 1
        losses += 1
        var actions: [Action] = []
        if window.lost() { actions.append(.window(window)) }
        // The lost chunk is sent once more (after a resync) before the time without progress ends it.
        if let timeout = limits.progressTimeout, let since = lastProgress, now - since >= timeout, consecutiveLosses >= 2 {
            failed = true
            return actions + [.fail(.noAnswer(for: now - since, confirmed: planner.confirmedOffset, total: total))]
        }
        if consecutiveLosses > limits.maximumConsecutiveLosses {
            failed = true
            return actions + [.fail(.lostInARow(consecutiveLosses, confirmed: planner.confirmedOffset, total: total))]
        }
        if losses >= 8, losses * 4 > chunksSent {
            failed = true
            return actions + [.fail(.lossy(lost: losses, sent: chunksSent, confirmed: planner.confirmedOffset, total: total))]
        }
        let before = planner.confirmedOffset
        planner.chunkLost(chunk)
        return actions + afterAnswer(progressFrom: before)
    }

    /// Records that `chunk` goes out (again).
    private mutating func sending(_ chunk: Chunk) {
        if resendsWhenFirstSent[chunk] == nil {
            resendsWhenFirstSent[chunk] = linkResends
        } else {
            sentAgain.insert(chunk)
        }
    }

    private mutating func afterAnswer(progressFrom before: Int) -> [Action] {
        if planner.confirmedOffset > before {
            answersWithoutProgress = 0
            confirmedAny = true
            return [.progress(confirmed: planner.confirmedOffset)]
        }
        answersWithoutProgress += 1
        if answersWithoutProgress > 8 + 4 * limits.depth {
            failed = true
            return [.fail(.noProgress(confirmed: planner.confirmedOffset))]
        }
        return []
    }
}
