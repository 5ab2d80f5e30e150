import Testing

@testable import McuMgrCore

/// The upload machine, tested by the actions it returns for each event.
@Suite struct SMPUploadMachineTests {
    typealias Chunk = SMPUploadMachine.Chunk
    typealias Action = SMPUploadMachine.Action

    static func machine(total: Int, depth: Int = 2, first: Int = 100, rest: Int = 100, alignment: Int = 1, losses: Int = 3)
        -> SMPUploadMachine
    {
        SMPUploadMachine(
            total: total,
            limits: .init(
                depth: depth, alignment: alignment,
                chunkLengths: .init(first: first, byOffsetHeadSize: [1: rest, 2: rest, 3: rest, 5: rest]),
                maximumConsecutiveLosses: losses, maximumBusyRetries: 2, busyRetryDelay: .milliseconds(100)))
    }

    static func c(_ offset: Int, _ length: Int) -> Chunk { Chunk(offset: offset, length: length) }

    @Test func theFirstChunkGoesAloneThenTheWindowFills() {
        var m = Self.machine(total: 350)
        #expect(m.fill() == [.send(Self.c(0, 100))])
        #expect(m.fill() == [], "nothing else while the first chunk (an erase) is pending")
        #expect(m.answered(Self.c(0, 100), deviceOffset: 100) == [.progress(confirmed: 100)])
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)])
        #expect(m.fill() == [.send(Self.c(300, 50))])
        #expect(m.answered(Self.c(200, 100), deviceOffset: 300) == [.progress(confirmed: 300)])
        #expect(m.answered(Self.c(300, 50), deviceOffset: 350) == [.progress(confirmed: 350)])
        #expect(m.fill() == [.finished])
        #expect(m.isComplete)
        #expect(m.chunksSent == 4)
        #expect(m.resumedFrom == 0)
    }

    @Test func aLostAnswerIsCoveredByTheNextChunksAnswer() {
        var m = Self.machine(total: 500, depth: 2)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
        // The answer to 100..<200 is lost; the answer to 200..<300 shows the device holds both.
        #expect(m.answered(Self.c(200, 100), deviceOffset: 300) == [.abandon(Self.c(100, 100)), .progress(confirmed: 300)])
        #expect(m.inFlightCount == 0)
        #expect(m.fill() == [.send(Self.c(300, 100)), .send(Self.c(400, 100))])
    }

    @Test func aLostRequestIsSentAgainAtOnceWhenALaterAnswerShowsIt() {
        var m = Self.machine(total: 500, depth: 2)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        _ = m.fill()
        // 100..<200 never reached the device: it answers 200..<300 with its offset, 100.
        #expect(m.answered(Self.c(200, 100), deviceOffset: 100) == [.resendNow(Self.c(100, 100))])
        #expect(m.fill() == [], "draining: the resent chunk is still in flight")
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)])
        #expect(m.fill() == [.send(Self.c(200, 100)), .send(Self.c(300, 100))])
    }

    @Test func aFastResendHappensOncePerChunkUntilItIsAnswered() {
        var m = Self.machine(total: 1000, depth: 3)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100)), .send(Self.c(300, 100))])
        #expect(m.answered(Self.c(200, 100), deviceOffset: 100) == [.resendNow(Self.c(100, 100))])
        #expect(m.answered(Self.c(300, 100), deviceOffset: 100) == [], "already sent again")
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)])
    }

    @Test func anOffsetPastTheFirstChunkIsAResume() {
        var m = Self.machine(total: 1000)
        _ = m.fill()
        #expect(m.answered(Self.c(0, 100), deviceOffset: 700) == [.resumed(offset: 700), .progress(confirmed: 700)])
        #expect(m.fill() == [.send(Self.c(700, 100)), .send(Self.c(800, 100))])
        #expect(m.resumedFrom == 700)
    }

    /// Recorded on MCUboot's serial recovery (mps2, Zephyr 4.4.0): the first 952-byte chunk is answered
    /// with off 948, the 4-byte-aligned part. Not a resume: the upload continues at 948.
    @Test func mcubootsPartialFirstChunkIsNotAResume() {
        var m = Self.machine(total: 132_472, depth: 1, first: 952, rest: 1000)
        #expect(m.fill() == [.send(Self.c(0, 952))])
        #expect(m.answered(Self.c(0, 952), deviceOffset: 948) == [.progress(confirmed: 948)])
        #expect(m.resumedFrom == 0)
        #expect(m.fill() == [.send(Self.c(948, 1000))])
    }

    @Test func aDeviceThatLostWhatItConfirmedIsFollowedBack() {
        // The device reset after confirming 300 bytes: the next answer asks for offset 0 again.
        var m = Self.machine(total: 1000, depth: 1)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        _ = m.fill()
        _ = m.answered(Self.c(100, 100), deviceOffset: 200)
        _ = m.fill()
        _ = m.answered(Self.c(200, 100), deviceOffset: 300)
        #expect(m.fill() == [.send(Self.c(300, 100))])
        #expect(m.answered(Self.c(300, 100), deviceOffset: 0) == [.wentBack(from: 300, to: 0)])
        #expect(m.fill() == [.send(Self.c(0, 100))])
        #expect(m.answered(Self.c(0, 100), deviceOffset: 100) == [.progress(confirmed: 100)])
        #expect(!m.isComplete)
    }

    /// Issue 22, measured on MCUboot's raw serial recovery: a chunk whose sector erase took longer than the
    /// resend floor was sent twice, and an error came back (rc 3) where the device's offset was expected.
    /// After a resend such an error answers a copy: the chunk goes again as a new request, and the device's
    /// offset in that answer decides (here it already holds the chunk).
    @Test func aChunksErrorAfterAResendIsResynchronisedFromTheDevice() {
        var m = Self.machine(total: 300, depth: 1)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill() == [.send(Self.c(100, 100))])
        #expect(m.linkResent(Self.c(100, 100)) == [], "a window of 1 cannot halve")
        #expect(m.mayHaveCopies(Self.c(100, 100)))
        #expect(m.rejected(Self.c(100, 100)) == [.resendNow(Self.c(100, 100))])
        #expect(m.fill() == [], "nothing else goes out before the device's offset is known")
        // MCUboot answers a chunk at an offset it does not expect with the one it does: 200.
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)])
        #expect(m.fill() == [.send(Self.c(200, 100))])
        #expect(m.answered(Self.c(200, 100), deviceOffset: 300) == [.progress(confirmed: 300)])
        #expect(m.fill() == [.finished])
    }

    @Test func aResynchronisedChunkTheDeviceLackedIsWrittenThen() {
        var m = Self.machine(total: 300, depth: 1)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        _ = m.fill()
        _ = m.linkResent(Self.c(100, 100))
        #expect(m.rejected(Self.c(100, 100)) == [.resendNow(Self.c(100, 100))])
        // The device still expects 100 (the copy reached it cut short): the chunk is written again.
        #expect(m.answered(Self.c(100, 100), deviceOffset: 100) == [])
        #expect(m.fill() == [.send(Self.c(100, 100))])
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)])
        #expect(!m.isComplete)
    }

    @Test func anErrorWithoutAResendIsTheDevicesVerdict() {
        var m = Self.machine(total: 300, depth: 1)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        _ = m.fill()
        #expect(!m.mayHaveCopies(Self.c(100, 100)))
        #expect(m.rejected(Self.c(100, 100)) == [.fail(.rejected(Self.c(100, 100)))])
        #expect(m.fill() == [])
    }

    /// A resend of an earlier request, after this chunk went out, may put a copy before it at the device:
    /// its error may answer that. A resend before it went out cannot.
    @Test func onlyResendsAfterAChunkWentOutMakeItsErrorResynchronise() {
        var m = Self.machine(total: 400, depth: 2)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
        _ = m.linkResent(Self.c(100, 100))
        #expect(m.mayHaveCopies(Self.c(200, 100)), "sent before the resend of 100")
        _ = m.answered(Self.c(100, 100), deviceOffset: 200)
        _ = m.answered(Self.c(200, 100), deviceOffset: 300)
        #expect(m.fill() == [.send(Self.c(300, 100))])
        #expect(!m.mayHaveCopies(Self.c(300, 100)), "sent after the only resend")
        #expect(m.rejected(Self.c(300, 100)) == [.fail(.rejected(Self.c(300, 100)))])
    }

    @Test func errorsAfterResendsInARowEndTheUploadAtTheLossLimit() {
        var m = Self.machine(total: 300, depth: 1, losses: 2)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        _ = m.fill()
        _ = m.linkResent(Self.c(100, 100))
        #expect(m.rejected(Self.c(100, 100)) == [.resendNow(Self.c(100, 100))])
        #expect(m.rejected(Self.c(100, 100)) == [.resendNow(Self.c(100, 100))])
        #expect(m.rejected(Self.c(100, 100)) == [.fail(.rejected(Self.c(100, 100)))])
    }

    @Test func busyAnswersSendTheSameChunkAgainAfterAPauseUpToALimit() {
        var m = Self.machine(total: 300)
        _ = m.fill()
        #expect(m.busy(Self.c(0, 100)) == [.sendAgain(Self.c(0, 100), after: .milliseconds(100))])
        #expect(m.busy(Self.c(0, 100)) == [.sendAgain(Self.c(0, 100), after: .milliseconds(100))])
        #expect(m.busy(Self.c(0, 100)) == [.fail(.busy(Self.c(0, 100)))])
        #expect(m.fill() == [], "a failed machine asks for nothing more")
    }

    @Test func aLostChunkHalvesTheWindowAndTheUploadContinuesFromTheConfirmedOffset() {
        var m = Self.machine(total: 1000, depth: 4)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100)), .send(Self.c(300, 100)), .send(Self.c(400, 100))])
        let lost = m.lost(Self.c(100, 100))
        #expect(lost.contains { if case .window(let w) = $0 { return w.value == 2 } else { return false } })
        // The device, missing 100..<200, answers the later chunks with its offset 100: drained, then resent.
        #expect(m.answered(Self.c(200, 100), deviceOffset: 100) == [])
        #expect(m.answered(Self.c(300, 100), deviceOffset: 100) == [])
        #expect(m.answered(Self.c(400, 100), deviceOffset: 100) == [])
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
    }

    @Test func chunksLostInARowEndTheUploadWithWhereItStands() {
        var m = Self.machine(total: 1000, depth: 1, losses: 2)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        for _ in 0..<2 {
            #expect(m.fill() == [.send(Self.c(100, 100))])
            #expect(!m.lost(Self.c(100, 100)).contains { if case .fail = $0 { return true } else { return false } })
        }
        _ = m.fill()
        #expect(m.lost(Self.c(100, 100)).last == .fail(.lostInARow(3, confirmed: 100, total: 1000)))
    }

    @Test func aLinkThatLosesAQuarterOfTheChunksIsReported() {
        var m = Self.machine(total: 100_000, depth: 1, losses: 100)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        var failure: Action?
        for _ in 0..<20 where failure == nil {
            guard case .send(let chunk) = m.fill().first else { break }
            let actions = m.lost(chunk)
            failure = actions.first { if case .fail = $0 { return true } else { return false } }
            if failure == nil, case .send(let again) = m.fill().first {
                _ = m.answered(again, deviceOffset: again.end)
            }
        }
        #expect(failure == .fail(.lossy(lost: 8, sent: 16, confirmed: 800, total: 100_000)))
    }

    /// The session's resends reach the machine as events: the first since an answer halves the window at
    /// once, further ones before the next answer do not halve it again, and that answer does not grow it.
    @Test func resendsOnTheLinkHalveTheWindowOnceAndCleanAnswersGrowIt() {
        var m = Self.machine(total: 10_000, depth: 4)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill().count == 4)
        let halved = m.linkResent(Self.c(100, 100))
        #expect(halved == [.window(m.window)])
        #expect(m.window.value == 2)
        #expect(m.linkResent(Self.c(200, 100)) == [], "one halving per answer")
        #expect(m.window.value == 2)
        #expect(m.answered(Self.c(100, 100), deviceOffset: 200) == [.progress(confirmed: 200)], "no growth")
        #expect(m.window.value == 2)
        var grew = false
        for offset in stride(from: 200, to: 2000, by: 100) where !grew {
            _ = m.fill()
            grew = m.answered(Self.c(offset, 100), deviceOffset: offset + 100).contains {
                if case .window(let w) = $0 { return w.value == 3 } else { return false }
            }
        }
        #expect(grew)
    }

    @Test func anOffsetOutsideTheUploadFails() {
        var m = Self.machine(total: 300)
        _ = m.fill()
        #expect(m.answered(Self.c(0, 100), deviceOffset: 5000).last == .fail(.offsetOutside(5000, total: 300)))
    }

    @Test func aDeviceThatNeverMovesItsOffsetIsReported() {
        var m = Self.machine(total: 1000, depth: 1)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        var last: [Action] = []
        for _ in 0..<20 {
            guard case .send(let chunk) = m.fill().first else { break }
            last = m.answered(chunk, deviceOffset: 100)
        }
        #expect(last == [.fail(.noProgress(confirmed: 100))])
    }

    @Test func pausedSendsNothingAndLaterContinues() {
        var m = Self.machine(total: 300)
        _ = m.fill()
        _ = m.answered(Self.c(0, 100), deviceOffset: 100)
        #expect(m.fill(paused: true) == [])
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
    }

    @Test func chunkLengthsFollowTheOffsetsCBORHead() {
        let lengths = SMPUploadMachine.ChunkLengths(first: 50, byOffsetHeadSize: [1: 90, 2: 89, 3: 88, 5: 86])
        #expect(lengths.length(at: 0) == 50)
        #expect(lengths.length(at: 23) == 90)
        #expect(lengths.length(at: 24) == 89)
        #expect(lengths.length(at: 300) == 88)
        #expect(lengths.length(at: 70_000) == 86)
    }
}

@Suite struct SMPUploadMachineProgressTimeoutTests {
    static func t(_ ms: UInt64) -> SMPInstant { SMPInstant(nanoseconds: ms * 1_000_000) }

    @Test func aLostChunkAfterTheProgressTimeoutEndsTheUploadWithWhereItStands() {
        var m = SMPUploadMachine(
            total: 1000,
            limits: .init(
                depth: 1, chunkLengths: .init(first: 100, byOffsetHeadSize: [1: 100, 2: 100]),
                maximumConsecutiveLosses: 10, progressTimeout: .seconds(10)))
        _ = m.fill(now: Self.t(0))
        _ = m.answered(.init(offset: 0, length: 100), deviceOffset: 100, now: Self.t(50))
        _ = m.fill(now: Self.t(50))
        // Lost 5 s after the last progress: tried again.
        #expect(m.lost(.init(offset: 100, length: 100), now: Self.t(5_050)).allSatisfy { if case .fail = $0 { false } else { true } })
        _ = m.fill(now: Self.t(5_050))
        // Lost again 10 s after the last progress: the upload stops there.
        #expect(m.lost(.init(offset: 100, length: 100), now: Self.t(10_050)).last
            == .fail(.noAnswer(for: .seconds(10), confirmed: 100, total: 1000)))
    }

    @Test func timePausedDoesNotCount() {
        var m = SMPUploadMachine(
            total: 1000,
            limits: .init(depth: 1, chunkLengths: .init(first: 100, byOffsetHeadSize: [1: 100, 2: 100]), progressTimeout: .seconds(10)))
        _ = m.fill(now: Self.t(0))
        _ = m.answered(.init(offset: 0, length: 100), deviceOffset: 100, now: Self.t(10))
        #expect(m.fill(paused: true, now: Self.t(60_000)) == [])
        _ = m.fill(now: Self.t(60_000))
        #expect(m.lost(.init(offset: 100, length: 100), now: Self.t(65_000)).allSatisfy { if case .fail = $0 { false } else { true } })
    }
}
