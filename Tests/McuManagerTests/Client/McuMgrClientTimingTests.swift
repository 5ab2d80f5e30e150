import Foundation
import McuManager
import McuMgrCore
import Testing
import TestSupport

/// The client's timeouts and resends in virtual time: the test moves a manual clock and checks at which
/// instant each packet went out. Nothing here reads the machine's clock or sleeps.
@Suite("McuMgrClient: timeouts and resends in virtual time", .timeLimit(.minutes(10)))
struct McuMgrClientTimingTests {
    /// Adaptive resends as serial and UDP links use them: 1 s before the first round trip, doubled per
    /// resend up to the 4 s ceiling.
    static let adaptive = SMPSessionConfiguration(
        adaptiveRetransmit: true, retransmitFloor: .milliseconds(250), initialRetransmit: .seconds(1),
        maximumRetransmits: 16)

    /// Advances to `at`, checking first that nothing goes out a millisecond before (the only sleeper is
    /// the resend timer, armed for exactly `at`), then returns the packet written at `at`.
    static func expectWrite(
        at: Duration, clock: ManualClock, link: VirtualTimeLink,
        writes: inout AsyncStream<VirtualTimeLink.Write>.Iterator
    ) async -> VirtualTimeLink.Write? {
        await clock.waitForSleeper(until: at)
        #expect(clock.pendingDeadlines == [at], "the resend timer is the only thing waiting")
        let before = link.log.count
        clock.advance(to: at - .milliseconds(1))
        #expect(link.log.count == before, "nothing goes out before \(at)")
        #expect(clock.pendingDeadlines == [at])
        clock.advance(to: at)
        let write = await writes.next()
        #expect(write?.at == at)
        return write
    }

    @Test func anUnansweredRequestIsResentAfter1sThen2sThen4sThen4sUntilItsTimeout() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.adaptive)
        let client = McuMgrClient(
            transport: link, configuration: .init(timeout: .seconds(12)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()
        let request = Task { try await client.send(EchoRequest(text: "hi")) }

        let first = await writes.next()
        #expect(first?.at == .zero)
        // The resend timeout doubles (1 s, 2 s, 4 s) and stays at the 4 s ceiling.
        for at: Duration in [.seconds(1), .seconds(3), .seconds(7), .seconds(11)] {
            let resend = await Self.expectWrite(at: at, clock: clock, link: link, writes: &writes)
            #expect(resend?.packet.bytes == first?.packet.bytes, "a resend is the same packet, same sequence")
        }
        // The next resend (15 s) would come after the request's deadline: it times out at 12 s instead.
        await clock.waitForSleeper(until: .seconds(12))
        clock.advance(to: .seconds(12) - .milliseconds(1))
        #expect(clock.pendingDeadlines == [.seconds(12)])
        clock.advance(to: .seconds(12))
        let error = await #expect(throws: McuMgrError.self) { try await request.value }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("no answer within 12.0 s (4 resends)") == true, "\(error?.message ?? "")")
        #expect(error?.cause as? SMPSessionError == .timeout(after: .seconds(12), retransmits: 4), "the session's error is the cause")
        #expect(link.log.map(\.at) == [.zero, .seconds(1), .seconds(3), .seconds(7), .seconds(11)])
        #expect(clock.pendingDeadlines.isEmpty, "no timer is left once nothing is in flight")
    }

    @Test func anAnswerStopsTheResendsAndTheMeasuredRoundTripSetsTheNextTimeout() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.adaptive)
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(30)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()

        let first = Task { try await client.send(EchoRequest(text: "one")) }
        let sent = try #require(await writes.next())
        await clock.waitForSleeper(until: .seconds(1))
        clock.advance(to: .milliseconds(500))
        link.answer(sent.packet, with: ["r": "one"])
        #expect(try await first.value.text == "one")
        // The answer disarmed the resend timer: no later time sends anything.
        await clock.waitForSleepers { $0.isEmpty }
        clock.advance(to: .seconds(20))
        #expect(link.log.count == 1)

        // One sample of 500 ms: srtt 500 ms, rttvar 250 ms, so the next request is resent after
        // 500 + 4 x 250 = 1500 ms, not after the initial 1 s.
        let second = Task { try await client.send(EchoRequest(text: "two")) }
        let sentAgain = try #require(await writes.next())
        #expect(sentAgain.at == .seconds(20))
        let resend = await Self.expectWrite(at: .milliseconds(21_500), clock: clock, link: link, writes: &writes)
        #expect(resend?.packet.bytes == sentAgain.packet.bytes)
        link.answer(sentAgain.packet, with: ["r": "two"])
        #expect(try await second.value.text == "two")
    }

    @Test func aFixedRetransmitIntervalResendsAtEveryMultipleAndNeverMoreThanTheMaximum() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(
            clock: clock, session: SMPSessionConfiguration(retransmitInterval: .milliseconds(300), maximumRetransmits: 2))
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(2)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()
        let request = Task { try await client.send(EchoRequest(text: "x")) }
        #expect(await writes.next()?.at == .zero)
        _ = await Self.expectWrite(at: .milliseconds(300), clock: clock, link: link, writes: &writes)
        _ = await Self.expectWrite(at: .milliseconds(600), clock: clock, link: link, writes: &writes)
        // Two resends made: nothing more until the 2 s deadline.
        await clock.waitForSleeper(until: .seconds(2))
        #expect(clock.pendingDeadlines == [.seconds(2)])
        clock.advance(to: .seconds(2))
        let error = await #expect(throws: McuMgrError.self) { try await request.value }
        #expect(error?.kind == .timeout)
        #expect(link.log.map(\.at) == [.zero, .milliseconds(300), .milliseconds(600)])
    }

    /// The resends of a UDP link (`UDPTransport`): 25 ms floor, 1 s before the first round trip.
    static let udp = SMPSessionConfiguration(
        adaptiveRetransmit: true, retransmitFloor: .milliseconds(25), initialRetransmit: .seconds(1),
        maximumRetransmits: 7)

    @Test func aHashOfALargeFileIsAskedForAgainOnlyAfterTheDeviceCouldHaveHashedIt() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.udp)
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()
        // A round trip of 2 ms first: the link's own resend timeout is then its 25 ms floor.
        let echo = Task { try await client.send(EchoRequest(text: "rtt")) }
        let sent = try #require(await writes.next())
        await clock.waitForSleeper(until: .seconds(1))
        clock.advance(to: .milliseconds(2))
        link.answer(sent.packet, with: ["r": "rtt"])
        _ = try await echo.value
        await clock.waitForSleepers { $0.isEmpty }
        clock.advance(to: .seconds(1))

        // 1 MiB: the device may hash it for 16 s; every copy would be hashed again behind the first.
        let hash = Task {
            try await client.send(FileHashRequest(name: "/lfs1/big.bin", length: 1 << 20), timeout: .seconds(40))
        }
        let request = try #require(await writes.next())
        #expect(request.at == .seconds(1))
        for at: Duration in [.seconds(18), .seconds(35)] {
            let resend = await Self.expectWrite(at: at, clock: clock, link: link, writes: &writes)
            #expect(resend?.packet.bytes == request.packet.bytes)
        }
        link.answer(request.packet, with: ["type": "sha256", "len": .unsigned(1 << 20), "output": .bytes([UInt8](repeating: 7, count: 32))])
        #expect(try await hash.value.length == 1 << 20)
        #expect(link.log.map(\.at) == [.zero, .seconds(1), .seconds(18), .seconds(35)])
    }

    @Test func anEraseIsAskedForAgainAfter40sAndAnExplicitFloorOverridesTheRequests() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.udp)
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()
        let erase = Task { try await client.send(ImageEraseRequest(slot: 1), timeout: .seconds(75)) }
        let request = try #require(await writes.next())
        let resend = await Self.expectWrite(at: .seconds(40), clock: clock, link: link, writes: &writes)
        #expect(resend?.packet.bytes == request.packet.bytes)
        // The next resend (80 s) would come after the deadline: nothing more until the timeout.
        await clock.waitForSleeper(until: .seconds(75))
        #expect(clock.pendingDeadlines == [.seconds(75)])
        clock.advance(to: .seconds(75))
        let error = await #expect(throws: McuMgrError.self) { try await erase.value }
        #expect(error?.message.contains("no answer within 75.0 s (1 resend)") == true, "\(error?.message ?? "")")

        let echo = Task { try await client.send(EchoRequest(text: "x"), resendFloor: .seconds(3)) }
        let sent = try #require(await writes.next())
        #expect(sent.at == .seconds(75))
        _ = await Self.expectWrite(at: .seconds(78), clock: clock, link: link, writes: &writes)
        link.answer(sent.packet, with: ["r": "x"])
        #expect(try await echo.value.text == "x")
    }

    /// A shell command slower than the resend timeout: the device runs every copy it gets (measured on
    /// native_sim_serial: `kernel sleep 1500` sent again after 1 s held the next echo 1.4 s), so the
    /// command goes out once and is waited for; one that gets no answer times out saying it was not
    /// sent again. Other requests to the same client are still resent.
    @Test func aShellCommandGoesOutOnceAndATimeoutSaysItWasNotSentAgain() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.udp)
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        let shell = ShellManager(client: client)
        var writes = link.writes.makeAsyncIterator()

        let sleep = Task { try await shell.execute(["kernel", "sleep", "3000"]) }
        let sent = try #require(await writes.next())
        // Only the request's own deadline waits: no resend timer.
        await clock.waitForSleeper(until: .seconds(10))
        #expect(clock.pendingDeadlines == [.seconds(10)])
        clock.advance(to: .seconds(3))
        #expect(link.log.count == 1)
        link.answer(sent.packet, with: ["o": "", "ret": 0])
        #expect(try await sleep.value.returnCode == 0)

        let lost = Task { try await shell.execute(["kernel", "sleep", "100"]) }
        #expect(await writes.next()?.at == .seconds(3))
        await clock.waitForSleeper(until: .seconds(13))
        #expect(clock.pendingDeadlines == [.seconds(13)])
        clock.advance(to: .seconds(13))
        let error = await #expect(throws: McuMgrError.self) { try await lost.value }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("no answer within 10.0 s.") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("not sent again") == true && error?.message.contains("may have run") == true, "\(error?.message ?? "")")
        #expect(link.log.count == 2)

        // An echo on the same client is resent as before: a resend timer, not only its deadline (23 s).
        let echo = Task { try await client.send(EchoRequest(text: "x")) }
        let echoSent = try #require(await writes.next())
        await clock.waitForSleepers { !$0.isEmpty }
        let resendAt = try #require(clock.pendingDeadlines.first)
        #expect(resendAt < .seconds(23), "a resend is due before the echo's deadline")
        clock.advance(to: resendAt)
        let resend = await writes.next()
        #expect(resend?.at == resendAt && resend?.packet.bytes == echoSent.packet.bytes)
        link.answer(echoSent.packet, with: ["r": "x"])
        #expect(try await echo.value.text == "x")
    }

    @Test func withoutResendsNothingHappensUntilTheTimeoutAndTheTimeoutIsExact() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: SMPSessionConfiguration())
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        var writes = link.writes.makeAsyncIterator()
        let request = Task { try await client.send(EchoRequest(text: "x"), timeout: .seconds(3)) }
        #expect(await writes.next()?.at == .zero)
        await clock.waitForSleeper(until: .seconds(3))
        clock.advance(to: .milliseconds(2_999))
        #expect(clock.pendingDeadlines == [.seconds(3)], "the request's own timeout (3 s), not the client's (10 s)")
        clock.advance(to: .seconds(3))
        let error = await #expect(throws: McuMgrError.self) { try await request.value }
        #expect(error?.kind == .timeout)
        #expect(link.log.count == 1)
    }
}
