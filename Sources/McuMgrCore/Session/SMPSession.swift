/// Identifies a request to the session; chosen by the caller, unique among its live requests.
public struct SMPRequestID: Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}

/// How a session behaves on its link.
public struct SMPSessionConfiguration: Sendable, Hashable {
    /// Most requests in flight at once (pipelining). 1 means stop-and-wait.
    public var window: Int
    /// Resend a request that got no answer after this fixed interval; nil derives the interval from
    /// measured round trips when `adaptiveRetransmit` is on, and never resends otherwise.
    public var retransmitInterval: Duration?
    /// Resend unanswered requests after a timeout measured from round trips (smoothed RTT + 4 x
    /// variation, doubled on each resend, never below `retransmitFloor`), as TCP does. Serial links lose
    /// frames to CRC errors and full line buffers, datagram links lose datagrams.
    public var adaptiveRetransmit: Bool
    /// The smallest adaptive resend timeout: above the device's scheduling tick and a busy handler.
    public var retransmitFloor: Duration
    /// The adaptive resend timeout before the first round trip was measured (TCP's is 1 s).
    public var initialRetransmit: Duration
    /// Most resends of one request before it can only time out.
    public var maximumRetransmits: Int
    /// The version new requests start with.
    public var version: SMPVersion
    /// Switch version when the device says it needs another (rc 12 / 13) or answers in v1.
    public var versionFallback: Bool
    /// Round trips measured on an earlier connection to the device: the adaptive timeout starts from
    /// them instead of `initialRetransmit`.
    public var rememberedRoundTrip: SMPRoundTrip?

    public init(
        window: Int = 1, retransmitInterval: Duration? = nil, adaptiveRetransmit: Bool = false,
        retransmitFloor: Duration = .milliseconds(250), initialRetransmit: Duration = .seconds(1), maximumRetransmits: Int = 5,
        version: SMPVersion = .v2, versionFallback: Bool = true
    ) {
        self.window = max(1, window)
        self.retransmitInterval = retransmitInterval
        self.adaptiveRetransmit = adaptiveRetransmit
        self.retransmitFloor = retransmitFloor
        self.initialRetransmit = initialRetransmit
        self.maximumRetransmits = maximumRetransmits
        self.version = version
        self.versionFallback = versionFallback
    }
}

/// Why the session gave up on a request.
public enum SMPSessionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No answer before the deadline; `retransmits` resends were made.
    case timeout(after: Duration, retransmits: Int)
    /// The link failed while the request was queued or in flight.
    case linkFailed(String)
    /// The caller cancelled the request.
    case cancelled

    public var description: String {
        switch self {
        case .timeout(let after, let retransmits):
            let seconds = (after.seconds * 10).rounded() / 10
            return "no answer within \(seconds) s" + (retransmits > 0 ? " (\(retransmits) resend\(retransmits == 1 ? "" : "s"))" : "")
        case .linkFailed(let why): return why
        case .cancelled: return "cancelled"
        }
    }
}

/// The SMP request/response state machine: sequence numbers, requests in flight matched by sequence,
/// a window for pipelining, deadlines, retransmission and v2 → v1 fallback.
///
/// Pure: every event is a `mutating func` taking "now" and returning the actions the driver runs.
/// After each event the driver arms a timer for `nextDeadline` and calls `tick(now:)` when it fires.
public struct SMPSession: Sendable {
    /// What the driver must do.
    public enum Action: Sendable, Hashable {
        /// Write these SMP packet bytes to the link (framed by the link's codec).
        case send(SMPRequestID, [UInt8])
        /// The response to a request.
        case complete(SMPRequestID, SMPPacket)
        /// A request that failed.
        case fail(SMPRequestID, SMPSessionError)
    }

    /// Something the session noticed that did not change any request; for logs and diagnostics.
    public enum Notice: Sendable, Hashable {
        /// A response whose sequence number matches nothing in flight (late, duplicate or foreign).
        case unmatchedResponse(SMPHeader)
        /// A response with a matching sequence but another group/command.
        case mismatchedResponse(SMPHeader)
        /// A packet that is not a response, or could not be parsed.
        case ignoredPacket(length: Int, reason: String)
        /// The session switched SMP version.
        case versionChanged(SMPVersion)
        /// Request `id` was sent again (`attempt` counts resends) after `after` without an answer.
        case retransmitted(SMPRequestID, sequence: UInt8, attempt: Int, after: Duration)
        /// Request `id` has had no answer for the `overdueAfter` it was submitted with; it stays in flight.
        case overdue(SMPRequestID, sequence: UInt8, after: Duration)
    }

    private struct Request: Sendable {
        var id: SMPRequestID
        var operation: SMPOperation
        var group: McuMgrGroup
        var command: McuMgrCommand
        var payload: [UInt8]
        var timeout: Duration
        var retransmittable: Bool
        var resendFloor: Duration?
        var overdueAfter: Duration?
        var version: SMPVersion
        var sequence: UInt8 = 0
        var sentAt: SMPInstant = .zero
        var deadline: SMPInstant = .zero
        var retransmitAt: SMPInstant?
        var overdueAt: SMPInstant?
        var retransmits = 0
        var versionRetried = false

        var packet: [UInt8] {
            SMPPacket(
                header: SMPHeader(
                    version: version, operation: operation, length: 0, group: group, sequence: sequence,
                    command: command),
                payload: payload
            ).bytes
        }
    }

    public private(set) var configuration: SMPSessionConfiguration
    /// The SMP version new requests use; may change by fallback.
    public private(set) var version: SMPVersion
    private var nextSequence: UInt8
    private var inFlight: [UInt8: Request] = [:]
    private var queue: [Request] = []
    /// Round trips measured on this link; the adaptive resend timeout.
    public private(set) var roundTrips: RoundTripEstimator
    /// Notices since the last `takeNotices()`.
    public private(set) var notices: [Notice] = []

    public init(configuration: SMPSessionConfiguration = .init(), initialSequence: UInt8 = 0) {
        self.configuration = configuration
        self.version = configuration.version
        self.nextSequence = initialSequence
        // Backoff stops doubling at 4 s: a request keeps being resent until its deadline on a link that
        // loses much (a long frame on a noisy line), instead of waiting the rest of it out in silence.
        self.roundTrips = RoundTripEstimator(
            initial: configuration.initialRetransmit, floor: configuration.retransmitFloor, ceiling: .seconds(4))
        if let remembered = configuration.rememberedRoundTrip { roundTrips.seed(remembered) }
    }

    /// How long the request with this sequence number has been on the link; nil when none is in flight.
    public func elapsed(sequence: UInt8, now: SMPInstant) -> Duration? {
        inFlight[sequence].map { now - $0.sentAt }
    }

    /// Requests sent and not yet answered.
    public var inFlightCount: Int { inFlight.count }
    /// Requests waiting for room in the window.
    public var queuedCount: Int { queue.count }

    /// Changes the window; takes effect as requests complete (or at once when it grows).
    public mutating func setWindow(_ window: Int, now: SMPInstant) -> [Action] {
        configuration.window = max(1, window)
        return drainQueue(now: now)
    }

    /// Returns and clears the notices gathered so far.
    public mutating func takeNotices() -> [Notice] {
        defer { notices.removeAll() }
        return notices
    }

    /// The earliest instant at which `tick` has something to do.
    public var nextDeadline: SMPInstant? {
        var earliest: SMPInstant?
        for r in inFlight.values {
            let t = min(r.deadline, r.retransmitAt ?? r.deadline, r.overdueAt ?? r.deadline)
            if earliest == nil || t < earliest! { earliest = t }
        }
        return earliest
    }

    /// Submits a request. It is sent at once when the window has room, else queued.
    /// `timeout` counts from when it goes on the link. A request that must never reach the device twice
    /// passes `retransmittable: false`; one the device may legitimately work on for long (the chunk that
    /// erases a slot) passes a `resendFloor`: no resend sooner than that. `overdueAfter`: a notice
    /// (`Notice.overdue`) when the request has had no answer for that long, and it stays in flight.
    /// `beyondWindow` sends it at once even when the window is full (an echo that must go right behind a
    /// request whose answer is late).
    public mutating func submit(
        _ id: SMPRequestID, operation: SMPOperation, group: McuMgrGroup, command: McuMgrCommand,
        payload: [UInt8], timeout: Duration, retransmittable: Bool = true, resendFloor: Duration? = nil,
        overdueAfter: Duration? = nil, beyondWindow: Bool = false, now: SMPInstant
    ) -> [Action] {
        var request = Request(
            id: id, operation: operation, group: group, command: command, payload: payload,
            timeout: timeout, retransmittable: retransmittable, resendFloor: resendFloor, overdueAfter: overdueAfter,
            version: version)
        guard beyondWindow, inFlight.count < 255 else {
            queue.append(request)
            return drainQueue(now: now)
        }
        var actions: [Action] = []
        send(&request, now: now, into: &actions)
        return actions
    }

    /// Cancels a request, queued or in flight.
    public mutating func cancel(_ id: SMPRequestID, now: SMPInstant) -> [Action] {
        if let index = queue.firstIndex(where: { $0.id == id }) {
            queue.remove(at: index)
            return [.fail(id, .cancelled)]
        }
        if let (sequence, _) = inFlight.first(where: { $0.value.id == id }) {
            inFlight[sequence] = nil
            return [.fail(id, .cancelled)] + drainQueue(now: now)
        }
        return []
    }

    /// The link failed: every queued and in-flight request fails at once.
    public mutating func linkFailed(_ reason: String) -> [Action] {
        let all = inFlight.values.sorted { $0.sentAt < $1.sentAt } + queue
        inFlight.removeAll()
        queue.removeAll()
        return all.map { .fail($0.id, .linkFailed(reason)) }
    }

    /// A whole SMP packet arrived from the link.
    public mutating func receive(_ bytes: [UInt8], now: SMPInstant) -> [Action] {
        let packet: SMPPacket
        do {
            packet = try SMPPacket(decoding: bytes)
        } catch {
            notices.append(.ignoredPacket(length: bytes.count, reason: "\(error)"))
            return []
        }
        let header = packet.header
        guard header.operation.isResponse else {
            notices.append(.ignoredPacket(length: bytes.count, reason: "not a response (\(header.operation))"))
            return []
        }
        guard var request = inFlight[header.sequence] else {
            notices.append(.unmatchedResponse(header))
            return []
        }
        guard request.group == header.group, request.command == header.command,
            request.operation.response == header.operation
        else {
            notices.append(.mismatchedResponse(header))
            return []
        }
        inFlight[header.sequence] = nil
        // Karn's rule: only answers to requests sent once measure the round trip.
        if request.retransmits == 0 { roundTrips.record(now - request.sentAt) }

        if configuration.versionFallback {
            // A short payload may be a version complaint: {"rc": 12|13}.
            if packet.payload.count <= 16, !request.versionRetried,
                let map = try? CBOR(decoding: packet.payload),
                case .returnCode(let rc, _) = SMPResponseStatus(response: map)
            {
                let wanted: SMPVersion? =
                    rc == .unsupportedTooNew && request.version == .v2
                    ? .v1 : rc == .unsupportedTooOld && request.version == .v1 ? .v2 : nil
                if let wanted {
                    setVersion(wanted)
                    request.version = wanted
                    request.versionRetried = true
                    request.retransmits = 0
                    var actions = [Action]()
                    send(&request, now: now, into: &actions)
                    return actions
                }
            }
            if request.version == .v2, header.version == .v1 { setVersion(.v1) }
        }
        return [.complete(request.id, packet)] + drainQueue(now: now)
    }

    /// The link had to discard a frame (a CRC error, a cut line): most likely the answer to the oldest
    /// request in flight. It is resent at once instead of after its timeout (a duplicate answer, should
    /// the discarded frame have been something else, is ignored by sequence number).
    public mutating func answerLost(now: SMPInstant) -> [Action] {
        guard let (sequence, oldest) = inFlight.min(by: { $0.value.sentAt < $1.value.sentAt }),
            oldest.retransmittable, oldest.retransmits < configuration.maximumRetransmits,
            configuration.adaptiveRetransmit || configuration.retransmitInterval != nil
        else { return [] }
        var request = oldest
        request.retransmits += 1
        notices.append(.retransmitted(request.id, sequence: sequence, attempt: request.retransmits, after: now - request.sentAt))
        request.retransmitAt = nextRetransmit(for: request, now: now)
        inFlight[sequence] = request
        return [.send(request.id, request.packet)]
    }

    /// Time passed: times out and retransmits requests whose deadlines are due.
    public mutating func tick(now: SMPInstant) -> [Action] {
        var actions: [Action] = []
        for sequence in inFlight.keys.sorted() {
            guard var request = inFlight[sequence] else { continue }
            if now >= request.deadline {
                inFlight[sequence] = nil
                actions.append(.fail(request.id, .timeout(after: request.timeout, retransmits: request.retransmits)))
                continue
            }
            if let at = request.overdueAt, now >= at {
                request.overdueAt = nil
                notices.append(.overdue(request.id, sequence: sequence, after: now - request.sentAt))
                inFlight[sequence] = request
            }
            if let at = request.retransmitAt, now >= at {
                request.retransmits += 1
                notices.append(.retransmitted(request.id, sequence: sequence, attempt: request.retransmits, after: now - request.sentAt))
                request.retransmitAt = nextRetransmit(for: request, now: now)
                inFlight[sequence] = request
                actions.append(.send(request.id, request.packet))
            }
        }
        if !actions.isEmpty { actions += drainQueue(now: now) }
        return actions
    }

    private mutating func setVersion(_ v: SMPVersion) {
        guard version != v else { return }
        version = v
        notices.append(.versionChanged(v))
        for i in queue.indices { queue[i].version = v }
    }

    private func nextRetransmit(for request: Request, now: SMPInstant) -> SMPInstant? {
        guard request.retransmittable, request.retransmits < configuration.maximumRetransmits else { return nil }
        var interval: Duration
        if let fixed = configuration.retransmitInterval {
            interval = fixed
        } else if configuration.adaptiveRetransmit {
            interval = roundTrips.timeout(attempt: request.retransmits + 1)
        } else {
            return nil
        }
        if let floor = request.resendFloor, interval < floor { interval = floor }
        let at = now + interval
        return at < request.deadline ? at : nil
    }

    private mutating func send(_ request: inout Request, now: SMPInstant, into actions: inout [Action]) {
        // Pick the next sequence number not in flight; the window (< 256) guarantees one exists.
        while inFlight[nextSequence] != nil { nextSequence &+= 1 }
        request.sequence = nextSequence
        nextSequence &+= 1
        request.sentAt = now
        request.deadline = now + request.timeout
        request.retransmitAt = nextRetransmit(for: request, now: now)
        request.overdueAt = request.overdueAfter.map { now + $0 }
        inFlight[request.sequence] = request
        actions.append(.send(request.id, request.packet))
    }

    private mutating func drainQueue(now: SMPInstant) -> [Action] {
        var actions: [Action] = []
        let window = min(configuration.window, 255)
        while inFlight.count < window, !queue.isEmpty {
            var request = queue.removeFirst()
            send(&request, now: now, into: &actions)
        }
        return actions
    }
}
