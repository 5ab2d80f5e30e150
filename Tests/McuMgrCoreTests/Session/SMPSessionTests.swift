import Testing

@testable import McuMgrCore

/// The session machine, tested by the actions it returns for each event.
@Suite struct SMPSessionTests {
    typealias Action = SMPSession.Action

    static func t(_ ms: UInt64) -> SMPInstant { SMPInstant(nanoseconds: ms * 1_000_000) }

    static func response(to bytes: [UInt8], payload: CBOR = .map([]), version: SMPVersion? = nil) -> [UInt8] {
        let request = try! SMPPacket(decoding: bytes)
        var header = request.header
        header.operation = header.operation.response
        if let version { header.version = version }
        return SMPPacket(header: header, payload: payload.encoded).bytes
    }

    static func sent(_ actions: [Action]) -> [(SMPRequestID, [UInt8])] {
        actions.compactMap { if case .send(let id, let b) = $0 { return (id, b) } else { return nil } }
    }

    func submit(_ s: inout SMPSession, _ id: UInt64, at ms: UInt64 = 0, timeout: Duration = .seconds(1)) -> [Action] {
        s.submit(
            SMPRequestID(id), operation: .read, group: .os, command: McuMgrCommand(0),
            payload: CBOR.textMap(["d": "x"]).encoded, timeout: timeout, now: Self.t(ms))
    }

    @Test func requestIsSentAndCompletedByMatchingResponse() throws {
        var s = SMPSession(initialSequence: 7)
        let a = submit(&s, 1)
        let (id, bytes) = try #require(Self.sent(a).first)
        #expect(id == SMPRequestID(1))
        let header = try SMPHeader(decoding: bytes)
        #expect(header.sequence == 7)
        #expect(header.version == .v2)
        #expect(header.operation == .read)
        let done = s.receive(Self.response(to: bytes), now: Self.t(5))
        guard case .complete(let cid, let packet) = try #require(done.first) else {
            Issue.record("expected completion, got \(done)")
            return
        }
        #expect(cid == SMPRequestID(1))
        #expect(packet.header.sequence == 7)
        #expect(s.inFlightCount == 0)
        #expect(s.nextDeadline == nil)
    }

    /// The link probe's order-based verdict: a frame overdue stays in flight (its late answer still
    /// completes it), and the echo sent behind it goes out though the window is full.
    @Test func anOverdueRequestStaysInFlightAndAnEchoBeyondTheWindowGoesOutAtOnce() throws {
        var s = SMPSession(configuration: .init(window: 1))
        let probe = s.submit(
            SMPRequestID(1), operation: .write, group: .os, command: McuMgrCommand(0),
            payload: CBOR.textMap(["d": "probe"]).encoded, timeout: .seconds(10), retransmittable: false,
            overdueAfter: .milliseconds(60), now: Self.t(0))
        let probeBytes = try #require(Self.sent(probe).first?.1)
        #expect(s.nextDeadline == Self.t(60))
        #expect(s.tick(now: Self.t(59)).isEmpty && s.takeNotices().isEmpty)
        #expect(s.tick(now: Self.t(60)).isEmpty, "overdue: nothing is sent again, nothing fails")
        let notices = s.takeNotices()
        #expect(notices == [.overdue(SMPRequestID(1), sequence: 0, after: .milliseconds(60))], "\(notices)")
        #expect(s.nextDeadline == SMPInstant(nanoseconds: 10_000_000_000), "the notice comes once; the timeout stays")
        // A request within the window waits; one beyond it goes at once.
        #expect(submit(&s, 2).isEmpty)
        let follower = s.submit(
            SMPRequestID(3), operation: .write, group: .os, command: McuMgrCommand(0),
            payload: CBOR.textMap(["d": "x"]).encoded, timeout: .seconds(1), retransmittable: false,
            beyondWindow: true, now: Self.t(61))
        let followerBytes = try #require(Self.sent(follower).first?.1)
        #expect(try SMPHeader(decoding: followerBytes).sequence == 1)
        #expect(s.inFlightCount == 2 && s.queuedCount == 1)
        // The late answer completes the probe; the queued request waits for the follower's answer too.
        let late = s.receive(Self.response(to: probeBytes), now: Self.t(140))
        #expect(late.first == .complete(SMPRequestID(1), try SMPPacket(decoding: Self.response(to: probeBytes))))
        #expect(Self.sent(late).isEmpty, "the follower holds the window of 1")
        let done = s.receive(Self.response(to: followerBytes), now: Self.t(141))
        #expect(done.first == .complete(SMPRequestID(3), try SMPPacket(decoding: Self.response(to: followerBytes))))
        #expect(Self.sent(done).map(\.0) == [SMPRequestID(2)])
    }

    @Test func windowLimitsRequestsInFlightAndQueueDrainsInOrder() throws {
        var s = SMPSession(configuration: .init(window: 2))
        let a1 = submit(&s, 1)
        let a2 = submit(&s, 2)
        let a3 = submit(&s, 3)
        #expect(Self.sent(a1).count == 1)
        #expect(Self.sent(a2).count == 1)
        #expect(a3.isEmpty, "third request must wait for the window")
        #expect(s.inFlightCount == 2)
        #expect(s.queuedCount == 1)
        // Answering the second (out of order) releases the third.
        let done = s.receive(Self.response(to: Self.sent(a2)[0].1), now: Self.t(1))
        #expect(done.count == 2)
        guard case .complete(let id, _) = done[0], case .send(let next, _) = done[1] else {
            Issue.record("unexpected \(done)")
            return
        }
        #expect(id == SMPRequestID(2))
        #expect(next == SMPRequestID(3))
    }

    @Test func outOfOrderResponsesMatchBySequence() throws {
        var s = SMPSession(configuration: .init(window: 4))
        let sends = (1...4).map { Self.sent(submit(&s, UInt64($0)))[0] }
        var completed: [UInt64] = []
        for (_, bytes) in sends.reversed() {
            for action in s.receive(Self.response(to: bytes), now: Self.t(2)) {
                if case .complete(let id, _) = action { completed.append(id.rawValue) }
            }
        }
        #expect(completed == [4, 3, 2, 1])
    }

    @Test func timeoutFailsTheRequestAtItsDeadline() throws {
        var s = SMPSession()
        _ = submit(&s, 1, at: 0, timeout: .milliseconds(500))
        #expect(s.nextDeadline == Self.t(500))
        #expect(s.tick(now: Self.t(499)).isEmpty)
        let actions = s.tick(now: Self.t(500))
        #expect(actions == [.fail(SMPRequestID(1), .timeout(after: .milliseconds(500), retransmits: 0))])
        #expect(s.inFlightCount == 0)
    }

    @Test func lossyLinkRetransmitsSameSequenceThenTimesOut() throws {
        var s = SMPSession(configuration: .init(retransmitInterval: .milliseconds(100), maximumRetransmits: 2))
        let first = Self.sent(submit(&s, 1, timeout: .seconds(1)))[0].1
        #expect(s.nextDeadline == Self.t(100))
        let r1 = s.tick(now: Self.t(100))
        #expect(r1 == [.send(SMPRequestID(1), first)], "resend is byte-identical (same sequence)")
        let r2 = s.tick(now: Self.t(200))
        #expect(r2 == [.send(SMPRequestID(1), first)])
        #expect(s.tick(now: Self.t(300)).isEmpty, "no more than maximumRetransmits")
        #expect(s.nextDeadline == Self.t(1000))
        #expect(s.tick(now: Self.t(1000)) == [.fail(SMPRequestID(1), .timeout(after: .seconds(1), retransmits: 2))])
    }

    @Test func duplicateResponseIsIgnored() throws {
        var s = SMPSession(configuration: .init(retransmitInterval: .milliseconds(100)))
        let bytes = Self.sent(submit(&s, 1))[0].1
        _ = s.tick(now: Self.t(100))  // resent
        let reply = Self.response(to: bytes)
        #expect(s.receive(reply, now: Self.t(150)).count == 1)
        #expect(s.receive(reply, now: Self.t(151)).isEmpty)
        #expect(s.takeNotices().contains { if case .unmatchedResponse = $0 { true } else { false } })
    }

    @Test func responseForOtherGroupWithSameSequenceIsIgnored() throws {
        var s = SMPSession()
        let bytes = Self.sent(submit(&s, 1))[0].1
        var packet = try SMPPacket(decoding: Self.response(to: bytes))
        packet.header.group = .image
        #expect(s.receive(packet.bytes, now: Self.t(1)).isEmpty)
        #expect(s.inFlightCount == 1)
    }

    @Test func garbageAndRequestsAreIgnored() {
        var s = SMPSession()
        _ = submit(&s, 1)
        #expect(s.receive([1, 2, 3], now: Self.t(1)).isEmpty)
        let request = SMPPacket(
            header: SMPHeader(operation: .write, length: 0, group: .os, sequence: 0, command: McuMgrCommand(0)),
            payload: []
        ).bytes
        #expect(s.receive(request, now: Self.t(1)).isEmpty)
        #expect(s.inFlightCount == 1)
    }

    @Test func linkFailureFailsEverythingAtOnce() {
        var s = SMPSession(configuration: .init(window: 2))
        _ = submit(&s, 1)
        _ = submit(&s, 2)
        _ = submit(&s, 3)
        let actions = s.linkFailed("gone")
        #expect(Set(actions) == Set([1, 2, 3].map { Action.fail(SMPRequestID($0), .linkFailed("gone")) }))
        #expect(s.inFlightCount == 0 && s.queuedCount == 0)
    }

    @Test func cancelQueuedAndInFlight() {
        var s = SMPSession(configuration: .init(window: 1))
        _ = submit(&s, 1)
        _ = submit(&s, 2)
        #expect(s.cancel(SMPRequestID(2), now: Self.t(1)) == [.fail(SMPRequestID(2), .cancelled)])
        let a = s.cancel(SMPRequestID(1), now: Self.t(1))
        #expect(a == [.fail(SMPRequestID(1), .cancelled)])
        #expect(s.cancel(SMPRequestID(9), now: Self.t(1)).isEmpty)
    }

    @Test func tooNewAnswerFallsBackToV1AndResends() throws {
        var s = SMPSession()
        let bytes = Self.sent(submit(&s, 1))[0].1
        let actions = s.receive(Self.response(to: bytes, payload: CBOR.textMap(["rc": 13]), version: .v1), now: Self.t(1))
        let resent = try #require(Self.sent(actions).first)
        #expect(try SMPHeader(decoding: resent.1).version == .v1)
        #expect(s.version == .v1)
        let done = s.receive(Self.response(to: resent.1), now: Self.t(2))
        guard case .complete = try #require(done.first) else {
            Issue.record("expected completion")
            return
        }
        // Later requests start in v1.
        #expect(try SMPHeader(decoding: Self.sent(submit(&s, 2))[0].1).version == .v1)
    }

    @Test func tooOldAnswerSwitchesBackToV2() throws {
        var s = SMPSession(configuration: .init(version: .v1))
        let bytes = Self.sent(submit(&s, 1))[0].1
        let actions = s.receive(Self.response(to: bytes, payload: CBOR.textMap(["rc": 12])), now: Self.t(1))
        #expect(try SMPHeader(decoding: Self.sent(actions)[0].1).version == .v2)
        #expect(s.version == .v2)
    }

    @Test func v1AnswerToV2RequestAdoptsV1() throws {
        var s = SMPSession()
        let bytes = Self.sent(submit(&s, 1))[0].1
        _ = s.receive(Self.response(to: bytes, version: .v1), now: Self.t(1))
        #expect(s.version == .v1)
    }

    @Test func versionFallbackHappensOnlyOnce() throws {
        var s = SMPSession()
        let b1 = Self.sent(submit(&s, 1))[0].1
        let resent = Self.sent(s.receive(Self.response(to: b1, payload: CBOR.textMap(["rc": 13])), now: Self.t(1)))[0].1
        let done = s.receive(Self.response(to: resent, payload: CBOR.textMap(["rc": 12])), now: Self.t(2))
        guard case .complete = try #require(done.first) else {
            Issue.record("a second complaint must reach the caller, not loop")
            return
        }
    }

    @Test func sequenceNumbersWrapAndSkipThoseInFlight() throws {
        var s = SMPSession(configuration: .init(window: 2), initialSequence: 255)
        let a = Self.sent(submit(&s, 1))[0].1
        let b = Self.sent(submit(&s, 2))[0].1
        #expect(try SMPHeader(decoding: a).sequence == 255)
        #expect(try SMPHeader(decoding: b).sequence == 0)
        // 300 request/response rounds with one request parked: its sequence is never reused.
        var parked = try SMPHeader(decoding: a).sequence
        _ = s.receive(Self.response(to: b), now: Self.t(1))
        for i in 0..<300 {
            let bytes = Self.sent(submit(&s, UInt64(10 + i)))[0].1
            let seq = try SMPHeader(decoding: bytes).sequence
            #expect(seq != parked)
            _ = s.receive(Self.response(to: bytes), now: Self.t(2))
        }
        parked = 0
        _ = parked
    }

    @Test func windowCanGrow() {
        var s = SMPSession(configuration: .init(window: 1))
        _ = submit(&s, 1)
        _ = submit(&s, 2)
        _ = submit(&s, 3)
        let a = s.setWindow(3, now: Self.t(0))
        #expect(Self.sent(a).map(\.0) == [SMPRequestID(2), SMPRequestID(3)])
    }
}

/// Resends timed from measured round trips.
@Suite struct SMPSessionAdaptiveRetransmitTests {
    typealias T = SMPSessionTests

    func submit(_ s: inout SMPSession, _ id: UInt64, at ms: UInt64, retransmittable: Bool = true) -> [SMPSession.Action] {
        s.submit(
            SMPRequestID(id), operation: .read, group: .os, command: McuMgrCommand(0),
            payload: CBOR.textMap(["d": "x"]).encoded, timeout: .seconds(10), retransmittable: retransmittable,
            now: T.t(ms))
    }

    @Test func answersMeasureTheRoundTripAndALostRequestIsResentAfterTheMeasuredTimeout() throws {
        var s = SMPSession(configuration: .init(adaptiveRetransmit: true, retransmitFloor: .milliseconds(50)))
        // Three answered requests, 20 ms each.
        var at: UInt64 = 0
        for id in 1...3 {
            let sent = try #require(T.sent(submit(&s, UInt64(id), at: at)).first)
            _ = s.receive(T.response(to: sent.1), now: T.t(at + 20))
            at += 100
        }
        #expect(s.roundTrips.samples == 3)
        let rto = s.roundTrips.timeout
        #expect(rto >= .milliseconds(50) && rto < .milliseconds(100))
        // A fourth goes unanswered: nothing before the timeout, the same bytes at it.
        let sent = try #require(T.sent(submit(&s, 4, at: at)).first)
        #expect(s.tick(now: T.t(at + 10)).isEmpty)
        let deadline = try #require(s.nextDeadline)
        let resent = s.tick(now: deadline)
        #expect(T.sent(resent).map(\.1) == [sent.1])
        let notices = s.takeNotices()
        #expect(notices.contains { if case .retransmitted(SMPRequestID(4), _, 1, _) = $0 { return true } else { return false } }, "names the request")
        // The next resend waits twice as long.
        let second = try #require(s.nextDeadline)
        #expect(second - deadline == rto * 2)
        // The answer to a resent request does not measure (Karn's rule).
        _ = s.receive(T.response(to: sent.1), now: second)
        #expect(s.roundTrips.samples == 3)
    }

    @Test func aRequestThatMustNotBeResentOnlyTimesOut() throws {
        var s = SMPSession(configuration: .init(adaptiveRetransmit: true, retransmitFloor: .milliseconds(50)))
        let sent = submit(&s, 1, at: 0, retransmittable: false)
        #expect(T.sent(sent).count == 1)
        #expect(s.nextDeadline == T.t(10_000))
        #expect(s.tick(now: T.t(5_000)).isEmpty)
        let end = s.tick(now: T.t(10_000))
        #expect(end == [.fail(SMPRequestID(1), .timeout(after: .seconds(10), retransmits: 0))])
    }

    @Test func aDiscardedFrameResendsTheOldestRequestAtOnce() throws {
        var s = SMPSession(configuration: .init(window: 2, adaptiveRetransmit: true))
        let first = try #require(T.sent(submit(&s, 1, at: 0)).first)
        _ = submit(&s, 2, at: 5)
        let resent = s.answerLost(now: T.t(10))
        #expect(T.sent(resent).map(\.1) == [first.1], "the oldest request goes again")
        #expect(s.takeNotices().contains { if case .retransmitted(SMPRequestID(1), _, 1, _) = $0 { return true } else { return false } })
        // Not for a request that must not be resent, nor without retransmission.
        var never = SMPSession(configuration: .init(adaptiveRetransmit: true))
        _ = submit(&never, 1, at: 0, retransmittable: false)
        #expect(never.answerLost(now: T.t(10)).isEmpty)
        var plain = SMPSession(configuration: .init())
        _ = submit(&plain, 1, at: 0)
        #expect(plain.answerLost(now: T.t(10)).isEmpty)
    }

    @Test func withoutAdaptiveRetransmitNothingIsResent() {
        var s = SMPSession(configuration: .init())
        _ = submit(&s, 1, at: 0)
        #expect(s.nextDeadline == T.t(10_000))
    }
}
