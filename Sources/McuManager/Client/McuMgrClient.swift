import Logging
import McuMgrCore

/// Drives the SMP session over a transport: assigns sequence numbers, keeps a window of requests in
/// flight, times out and retransmits, and turns answers into typed responses or `McuMgrError`s.
///
/// Safe to call from any task; concurrent calls are pipelined up to the session window.
public actor McuMgrClient {
    /// Client settings.
    public struct Configuration: Sendable {
        /// How long to wait for an answer to an ordinary request.
        public var timeout: Duration
        /// Session settings; nil takes the link's (`LinkLimits.session` of the transport).
        public var session: SMPSessionConfiguration?
        /// Where the device's measured round trip is kept between connections (it starts the adaptive
        /// resend timeout); nil starts from the link's session settings every time.
        public var roundTripMemory: RoundTripMemory?
        /// Where transfers keep the device's buffers (`os params`) and unfinished file uploads between
        /// connections, so that a known device's uploads send neither `os params` nor a resume check; nil
        /// asks every time.
        public var parametersMemory: DeviceParametersMemory?
        /// Where the console line limits a serial link probe learned are kept between connections
        /// (`LinkProbe`); nil probes every time.
        public var consoleLineMemory: ConsoleLineMemory?

        public init(
            timeout: Duration = McuMgrTimeouts.defaultAnswer, session: SMPSessionConfiguration? = nil,
            roundTripMemory: RoundTripMemory? = nil, parametersMemory: DeviceParametersMemory? = nil,
            consoleLineMemory: ConsoleLineMemory? = nil
        ) {
            self.timeout = timeout
            self.session = session
            self.roundTripMemory = roundTripMemory
            self.parametersMemory = parametersMemory
            self.consoleLineMemory = consoleLineMemory
        }
    }

    private enum LinkState {
        case closed
        case opening(Task<Void, Error>)
        case open
    }

    /// The transport this client drives.
    public nonisolated let transport: any McuMgrTransport
    public nonisolated let configuration: Configuration
    nonisolated let logger: Logger
    private var session: SMPSession
    private var link: LinkState = .closed
    private var waiting: [SMPRequestID: Completion] = [:]

    /// Who gets a request's answer: a task waiting in `send`, or a callback from `submit`.
    private enum Completion {
        case continuation(CheckedContinuation<SMPPacket, any Error>)
        case callback(@Sendable (McuMgrRequestEvent) -> Void)

        func complete(_ result: Result<SMPPacket, McuMgrError>) {
            switch self {
            case .continuation(let continuation): continuation.resume(with: result.mapError { $0 as any Error })
            case .callback(let callback): callback(.answered(result))
            }
        }
    }
    private var operations: [SMPRequestID: String] = [:]
    private var nextID: UInt64 = 0
    private var timer: Task<Void, Never>?
    private var timerDeadline: SMPInstant?
    /// Transport events on their way to the actor (see `TransportInbox`).
    private let inbox = TransportInbox()
    /// Tags the current link's events; bumped when a link closes so late events of an old link are dropped.
    private var linkGeneration = 0
    private var lastDrop: SMPFramingDrop?
    /// Why the transport ended the last link (its words), until a link opens again: when opening the
    /// next one fails, the error says both (a port server killed mid-transfer, then refusing the
    /// reconnection: the refusal alone would hide that it was there a moment ago).
    private var lastClosure: String?
    /// The clock timeouts and resends run on (the system's unless a test gave its own); transfers and
    /// firmware upgrades through this client use it too.
    public nonisolated let clock: McuMgrClock
    private let epoch: McuMgrClock.Instant
    /// What this client learned about the device on the current connection (`os params`) and the window
    /// the running transfer asks for: `linkLimits` adds them to the transport's.
    private var learnedBufferSize: Int?
    private var learnedBufferCount: Int?
    private var requestedWindow: Int?

    /// - Parameters:
    ///   - transport: the link to the device; opened on the first request.
    ///   - logger: receives debug-level traces of packets and drops; nothing above debug unless wrong.
    ///   - clock: what request timeouts and resends are measured on (tests pass a manual clock).
    public init(
        transport: any McuMgrTransport, configuration: Configuration = .init(),
        logger: Logger = Logger(label: "mcumgr", factory: { _ in SwiftLogNoOpLogHandler() }),
        clock: McuMgrClock = .continuous
    ) {
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        var session = configuration.session ?? transport.linkLimits.session
        if configuration.session == nil, session.adaptiveRetransmit, session.retransmitInterval == nil,
            let remembered = configuration.roundTripMemory?.recall(transport.name)
        {
            session.rememberedRoundTrip = remembered
            logger.debug(
                "round trip remembered from an earlier connection: srtt \(remembered.smoothed.milliseconds) ms, rttvar \(remembered.variation.milliseconds) ms")
        }
        self.session = SMPSession(configuration: session, initialSequence: UInt8.random(in: 0...255))
        self.epoch = clock.now
    }

    /// The SMP version requests currently use (v2 unless the device asked for v1).
    public var version: SMPVersion { session.version }

    /// The smoothed round trip of the requests answered so far (without resends); nil before the first.
    public var smoothedRoundTrip: Duration? { session.roundTrips.smoothed }

    /// Most requests in flight at once: `linkLimits.window` as last refined.
    public var window: Int { session.configuration.window }

    /// What the link carries to this device: the transport's `LinkLimits` (with the session settings of
    /// this client's configuration when it gives them), refined with the device's buffers this client
    /// learned on the current connection and the window the running transfer asked for. Its `packetSize`
    /// and `window` are what uploads, downloads, firmware upgrades and the session use.
    public var linkLimits: LinkLimits {
        var limits = transport.linkLimits
        if let session = configuration.session { limits.session = session }
        return limits.refined(
            deviceBufferSize: learnedBufferSize, deviceBufferCount: learnedBufferCount, requestedWindow: requestedWindow)
    }

    /// Adds what the device reported (`os params`: `buf_size`, `buf_count`; a count of 1 for a device that
    /// does not report them) to `linkLimits`, and the window a transfer asks for (nil: as the buffers
    /// allow). The session's window follows the result (`LinkLimits.window`). What the device reported
    /// holds until the link closes.
    /// - Returns: the refined limits.
    @discardableResult
    public func refineLinkLimits(
        deviceBufferSize: Int? = nil, deviceBufferCount: Int? = nil, requestedWindow: Int?
    ) -> LinkLimits {
        if let deviceBufferSize, deviceBufferSize > SMPHeader.size { learnedBufferSize = deviceBufferSize }
        if let deviceBufferCount, deviceBufferCount > 0 { learnedBufferCount = deviceBufferCount }
        self.requestedWindow = requestedWindow.map { max(1, $0) }
        let limits = linkLimits
        if limits.window != session.configuration.window {
            execute(session.setWindow(limits.window, now: now))
        }
        return limits
    }

    /// Forgets what the device reported (another device, or other firmware, may answer next) once the
    /// link is down (nothing in flight or queued): the session's window goes back to the link's.
    private func forgetLearnedDevice() {
        learnedBufferSize = nil
        learnedBufferCount = nil
        let window = linkLimits.window
        if window != session.configuration.window { execute(session.setWindow(window, now: now)) }
    }

    /// Sends a typed request and decodes its response. `resendFloor`: the least time before the request
    /// is sent again without an answer (default: the request's own, `McuMgrRequest.resendFloor`).
    /// - Throws: `McuMgrError` (device error, timeout, transport failure, malformed answer).
    public func send<R: McuMgrRequest>(_ request: R, timeout: Duration? = nil, resendFloor: Duration? = nil) async throws
        -> R.Response
    {
        let item = try await sendItem(request, timeout: timeout, resendFloor: resendFloor)
        return try Self.decode(R.Response.self, from: item, operation: R.operationName)
    }

    /// Sends a typed request and returns the successful answer as a CBOR item, as the device sent it
    /// (for tools that show the protocol's own keys). `resendFloor` as for `send(_:timeout:resendFloor:)`.
    /// - Throws: `McuMgrError` (device error, timeout, transport failure, malformed answer).
    public func sendItem<R: McuMgrRequest>(_ request: R, timeout: Duration? = nil, resendFloor: Duration? = nil) async throws
        -> CBOR
    {
        let payload: [UInt8]
        do {
            payload = try CBOREncoder().encode(request)
        } catch {
            throw McuMgrError(.usage, "cannot encode \(R.self): \(error)", cause: error)
        }
        let operation = R.operationName
        let packet: SMPPacket
        do {
            packet = try await send(
                operation: R.operation, group: R.group, command: R.command, payload: payload,
                timeout: timeout, retransmittable: R.isIdempotent, resendFloor: resendFloor ?? request.resendFloor, name: operation)
        } catch let error as McuMgrError where !R.isIdempotent {
            throw Self.notSentAgain(error)
        }
        var linkHint: (@Sendable (McuMgrReturnCode) -> String?)?
        let advising = transport as? any McuMgrLinkAdvising
        if let advising {
            linkHint = { advising.hint(for: $0) }
        }
        return try Self.successItem(
            from: packet, operation: operation, linkHint: linkHint, unusableDataHint: advising?.unusableDataHint)
    }

    /// A timeout of a request that is never sent again (`McuMgrRequest.isIdempotent` false) says why,
    /// and that the device may have acted on it; other errors stand as they are.
    public static func notSentAgain(_ error: McuMgrError) -> McuMgrError {
        guard error.kind == .timeout else { return error }
        var error = error
        error.message +=
            " The request was not sent again, since the device would act on the copy too: it may have run, so check before sending it again."
        return error
    }

    /// Sends a request with a ready-made CBOR payload and returns the raw response packet (any status).
    /// `retransmittable: false` keeps the session from resending it (a request the device may still be
    /// working on when the resend timeout passes, and must not get twice); `resendFloor` resends it no
    /// sooner than that (one the device works on for long, and would do again for every copy).
    public func send(
        operation: SMPOperation, group: McuMgrGroup, command: McuMgrCommand, payload: [UInt8],
        timeout: Duration? = nil, retransmittable: Bool = true, resendFloor: Duration? = nil, name: String? = nil
    ) async throws -> SMPPacket {
        try await ensureOpen()
        let id = SMPRequestID(nextID)
        nextID &+= 1
        let label = name ?? "\(group) command \(command)"
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiting[id] = .continuation(continuation)
                operations[id] = label
                if Task.isCancelled {
                    execute([.fail(id, .cancelled)])
                    return
                }
                execute(
                    session.submit(
                        id, operation: operation, group: group, command: command, payload: payload,
                        timeout: timeout ?? configuration.timeout, retransmittable: retransmittable,
                        resendFloor: resendFloor, now: now))
            }
        } onCancel: {
            Task { await self.cancel(id) }
        }
    }

    /// Sends a request without waiting for its answer. `events` hears, on the client and in order, each
    /// resend of the request (`.resent`: the link lost it or its answer; transfers shrink their window)
    /// and then, exactly once, its outcome (`.answered`: the raw response packet, any status, or the
    /// error). Requests submitted one after the other (each `submit` awaited) go out in that order;
    /// pipelined uploads use this. `overdueAfter`: `events` hears `.overdue` when the request has had no
    /// answer for that long (it is still awaited). `beyondWindow` sends the request at once even when the
    /// window is full (the link probe's echo behind a frame whose answer is late).
    /// - Returns: a handle to cancel the request with ``cancel(_:)``.
    /// - Throws: `McuMgrError` when the link cannot be opened (`events` then hears nothing).
    public func submit(
        operation: SMPOperation, group: McuMgrGroup, command: McuMgrCommand, payload: [UInt8],
        timeout: Duration? = nil, retransmittable: Bool = true, resendFloor: Duration? = nil, name: String? = nil,
        overdueAfter: Duration? = nil, beyondWindow: Bool = false,
        events: @escaping @Sendable (McuMgrRequestEvent) -> Void
    ) async throws -> McuMgrRequestHandle {
        try await ensureOpen()
        let id = SMPRequestID(nextID)
        nextID &+= 1
        waiting[id] = .callback(events)
        operations[id] = name ?? "\(group) command \(command)"
        execute(
            session.submit(
                id, operation: operation, group: group, command: command, payload: payload,
                timeout: timeout ?? configuration.timeout, retransmittable: retransmittable,
                resendFloor: resendFloor, overdueAfter: overdueAfter, beyondWindow: beyondWindow, now: now))
        return McuMgrRequestHandle(id: id)
    }

    /// Abandons a submitted request: its completion gets a `.cancelled` error unless it already ran.
    public func cancel(_ handle: McuMgrRequestHandle) {
        cancel(handle.id)
    }

    /// Decodes a response packet: device status first, then the typed body.
    public static func decode<T: Decodable>(_ type: T.Type, from packet: SMPPacket, operation: String) throws -> T {
        try decode(type, from: try successItem(from: packet, operation: operation), operation: operation)
    }

    /// Decodes a successful answer's CBOR item into `T`.
    public static func decode<T: Decodable>(_ type: T.Type, from item: CBOR, operation: String) throws -> T {
        do {
            return try CBORDecoder().decode(T.self, from: item)
        } catch {
            throw McuMgrError(
                .protocolViolation,
                "\(operation): unexpected answer from the device (\(error)); the firmware may use a different protocol revision",
                cause: error)
        }
    }

    /// The payload of a response as a CBOR item, after checking the device's status (`rc` / `err`).
    /// `unusableDataHint`: what the link advises when an answer cannot be read (a link that reorders
    /// the pieces of an answer can join them into a packet of the right length and the wrong order).
    public static func successItem(
        from packet: SMPPacket, operation: String, linkHint: (@Sendable (McuMgrReturnCode) -> String?)? = nil,
        unusableDataHint: String? = nil
    ) throws -> CBOR {
        let item: CBOR
        do {
            item = packet.payload.isEmpty ? .map([]) : try CBOR(decoding: packet.payload)
        } catch {
            let advice = unusableDataHint ?? "the firmware may be broken or the link corrupting data"
            throw McuMgrError(
                .protocolViolation, "\(operation): the device's answer is not valid CBOR (\(error)); \(advice)",
                cause: error)
        }
        if let error = McuMgrError.device(SMPResponseStatus(response: item), operation: operation, linkHint: linkHint) {
            throw error
        }
        return item
    }

    /// Whether a link is open (tests wait on it to see a closing handled).
    package var isLinkOpen: Bool {
        if case .open = link { return true }
        return false
    }

    /// Opens the link now (otherwise the first request opens it): callers that time an operation open
    /// first, so that a connection's set-up is not counted.
    /// - Throws: `McuMgrError` when the transport cannot open.
    public func open() async throws {
        try await ensureOpen()
    }

    /// Closes the link. In-flight requests fail; the next request reopens it.
    public func close() async {
        let wasOpen: Bool
        if case .closed = link { wasOpen = false } else { wasOpen = true }
        if wasOpen, let measured = session.roundTrips.measured {
            configuration.roundTripMemory?.remember(measured, for: transport.name)
        }
        link = .closed
        linkGeneration += 1
        lastClosure = nil  // closed on purpose: a next link starts afresh
        execute(session.linkFailed("the connection was closed"))
        forgetLearnedDevice()
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        if wasOpen { await transport.close() }
    }

    // MARK: - Internals

    private var now: SMPInstant {
        SMPInstant(nanoseconds: epoch.duration(to: clock.now).nanosecondsClamped)
    }

    private func ensureOpen() async throws {
        switch link {
        case .open:
            return
        case .opening(let task):
            try await task.value
        case .closed:
            linkGeneration += 1
            let generation = linkGeneration
            let transport = self.transport
            let inbox = self.inbox
            let task = Task {
                try await transport.open { [weak self] event in
                    // Events queue in order; one drain at a time brings them to the actor in batches.
                    if inbox.push(event, generation: generation), let self {
                        Task { await self.drainInbox() }
                    }
                }
            }
            link = .opening(task)
            do {
                try await task.value
            } catch {
                link = .closed
                linkGeneration += 1
                var failure = error as? McuMgrError ?? McuMgrError(.transport, "cannot open \(transport.name): \(error)", cause: error)
                if let closure = lastClosure { failure.message = "\(closure); connecting again failed: \(failure.message)" }
                throw failure
            }
            link = .open
            lastDrop = nil
            lastClosure = nil
            // Events that arrived while opening.
            drainInbox()
        }
    }

    /// Handles the queued transport events of the current link, in arrival order.
    private func drainInbox() {
        while true {
            guard case .open = link else {
                // Opening: keep the events for the drain that follows the open; closed: drop them.
                if case .closed = link { _ = inbox.takeAll() }
                inbox.endDrain()
                return
            }
            let batch = inbox.takeAll()
            if batch.isEmpty { return }
            for (event, generation) in batch where generation == linkGeneration {
                handle(event)
                guard case .open = link else { break }
            }
        }
    }

    private func handle(_ event: McuMgrTransportEvent) {
        switch event {
        case .packet(let bytes):
            traceAnswer(bytes)
            execute(session.receive(bytes, now: now))
        case .dropped(let drop):
            lastDrop = drop
            logger.debug("dropped received data: \(drop)")
            execute(session.answerLost(now: now))
        case .closed(let error):
            guard case .open = link else { return }
            linkEnded(error?.message ?? "\(transport.name) closed the connection")
        }
        logNotices()
    }

    /// The transport ended the link (its closing, or a send it refused because the link is gone):
    /// requests in flight fail with `reason`, events of that link no longer count, and a reconnection
    /// that fails names `reason` too.
    private func linkEnded(_ reason: String) {
        link = .closed
        linkGeneration += 1
        lastClosure = reason
        execute(session.linkFailed(reason))
        forgetLearnedDevice()
    }

    private func cancel(_ id: SMPRequestID) {
        execute(session.cancel(id, now: now))
    }

    private func timerFired() {
        timerDeadline = nil
        timer = nil
        execute(session.tick(now: now))
        logNotices()
    }

    private func logNotices() {
        for notice in session.takeNotices() {
            switch notice {
            case .retransmitted(let id, let sequence, let attempt, let after):
                if case .callback(let events)? = waiting[id] { events(.resent(attempt: attempt)) }
                logger.debug(
                    "resend seq \(sequence) (#\(attempt)) after \(after.milliseconds) ms without an answer; \(session.roundTrips)")
            case .overdue(let id, let sequence, let after):
                if case .callback(let events)? = waiting[id] { events(.overdue) }
                logger.debug("no answer to seq \(sequence) after \(after.milliseconds) ms; still waiting")
            case .unmatchedResponse(let header):
                logger.debug("ignored answer seq \(header.sequence): no request in flight with it (late, duplicate or foreign)")
            case .mismatchedResponse(let header):
                logger.debug("ignored answer seq \(header.sequence): its group/command \(header.group)/\(header.command.rawValue) do not match the request")
            case .ignoredPacket(let length, let reason):
                logger.debug("ignored \(length)-byte packet: \(reason)")
            case .versionChanged(let version):
                logger.debug("the device speaks SMP \(version): switching")
            }
        }
    }

    /// `-v`: one line per packet on the wire (operation, group, command, sequence, length, round trip);
    /// at trace level (`-vv`) the payload in hex.
    private func traceRequest(_ bytes: [UInt8]) {
        guard logger.logLevel <= .debug, let packet = try? SMPPacket(decoding: bytes) else { return }
        let h = packet.header
        logger.debug("-> \(h.operation) \(h.group) cmd \(h.command.rawValue) seq \(h.sequence) \(h.version) \(bytes.count) B")
        if logger.logLevel <= .trace { logger.trace("   \(Self.hex(packet.payload))") }
    }

    private func traceAnswer(_ bytes: [UInt8]) {
        guard logger.logLevel <= .debug, let packet = try? SMPPacket(decoding: bytes) else { return }
        let h = packet.header
        let elapsed = session.elapsed(sequence: h.sequence, now: now).map { d -> String in
            let tenths = d.nanosecondsClamped / 100_000
            return " after \(tenths / 10).\(tenths % 10) ms"
        } ?? ""
        logger.debug("<- \(h.operation) \(h.group) cmd \(h.command.rawValue) seq \(h.sequence) \(bytes.count) B\(elapsed)")
        if logger.logLevel <= .trace { logger.trace("   \(Self.hex(packet.payload))") }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let shown = bytes.prefix(512).map { b in String(b >> 4, radix: 16) + String(b & 0xF, radix: 16) }.joined()
        return bytes.count > 512 ? shown + "… (\(bytes.count) B)" : shown
    }

    private func execute(_ actions: [SMPSession.Action]) {
        for action in actions {
            switch action {
            case .send(let id, let bytes):
                do {
                    try transport.send(bytes)
                    // Traced once sent: the trace's formatting and write are not in the round trip.
                    traceRequest(bytes)
                } catch let refusal as McuMgrError where refusal.kind == .usage {
                    // The link refused this packet (it cannot carry it to this device): only this
                    // request fails, with the link's reason; the link stays up for the others.
                    operations[id] = nil
                    waiting.removeValue(forKey: id)?.complete(.failure(refusal))
                    execute(session.cancel(id, now: now).filter { if case .fail = $0 { false } else { true } })
                } catch {
                    // The link is gone; its closing event may still be on its way (and is then ignored).
                    linkEnded((error as? McuMgrError)?.message ?? "cannot send to \(transport.name): \(error)")
                    return
                }
            case .complete(let id, let packet):
                operations[id] = nil
                waiting.removeValue(forKey: id)?.complete(.success(packet))
            case .fail(let id, let error):
                let operation = operations.removeValue(forKey: id) ?? "request"
                waiting.removeValue(forKey: id)?.complete(.failure(mapError(error, operation: operation)))
            }
        }
        rearmTimer()
    }

    /// Data that arrived on this link since it opened but did not join into answers: what was last
    /// dropped and, where the transport knows, why (e.g. notifications reordered over EATT); nil when
    /// nothing was. Errors about missing answers add it.
    public var unusableData: String? {
        guard let lastDrop else { return nil }
        return "data did arrive but was unusable (\(lastDrop))" + (((transport as? any McuMgrLinkAdvising)?.unusableDataHint).map { ": \($0)" } ?? "")
    }

    private func mapError(_ error: SMPSessionError, operation: String) -> McuMgrError {
        switch error {
        case .timeout:
            var message = "\(transport.name) did not answer \(operation): \(error)."
            if let unusable = unusableData {
                message += " D\(unusable.dropFirst())."
            } else if let hint = (transport as? any McuMgrLinkAdvising)?.noAnswerHint {
                message += " " + hint
            } else {
                message +=
                    " Check that the device is connected and powered, runs firmware with SMP enabled, and that the device URI is right; raise --timeout for slow operations."
            }
            return McuMgrError(.timeout, message, cause: error)
        case .linkFailed(let reason):
            return McuMgrError(.transport, "\(operation) failed: \(reason)", cause: error)
        case .cancelled:
            return McuMgrError(.cancelled, "\(operation) was cancelled", cause: error)
        }
    }

    private func rearmTimer() {
        guard let deadline = session.nextDeadline else {
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        // Deadlines mostly move later; only re-arm when the new one is earlier.
        if let current = timerDeadline, current <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        let wake = epoch.advanced(by: .nanoseconds(Int64(clamping: deadline.nanoseconds)))
        let clock = self.clock
        timer = Task { [weak self] in
            try? await clock.sleep(until: wake)
            guard !Task.isCancelled, let self else { return }
            await self.timerFired()
        }
    }
}

/// A request sent with `McuMgrClient.submit`, to cancel it.
public struct McuMgrRequestHandle: Sendable, Hashable {
    let id: SMPRequestID
}

extension McuMgrRequest {
    public static var operationName: String {
        "\(group.name ?? "group \(group.rawValue)") command \(command.rawValue)"
    }
}

/// Transport events waiting for the client actor. The transport's handler pushes (from any thread); the
/// first push after the queue ran dry schedules one drain on the actor, which takes everything queued
/// so far in one go: answers reach the actor in order with one hop per batch instead of two per answer.
final class TransportInbox: Sendable {
    private struct State {
        var events: [(McuMgrTransportEvent, Int)] = []
        var draining = false
    }

    private let state = LockedState(State())

    /// Queues an event; true when the caller must schedule a drain.
    func push(_ event: McuMgrTransportEvent, generation: Int) -> Bool {
        state.withLock { s in
            s.events.append((event, generation))
            if s.draining { return false }
            s.draining = true
            return true
        }
    }

    /// Everything queued; when nothing is, the drain ends (the next push schedules a new one).
    func takeAll() -> [(McuMgrTransportEvent, Int)] {
        state.withLock { s in
            if s.events.isEmpty {
                s.draining = false
                return []
            }
            defer { s.events.removeAll(keepingCapacity: true) }
            return s.events
        }
    }

    /// Ends the drain without taking the events (they wait for the next one).
    func endDrain() {
        state.withLock { $0.draining = false }
    }
}
