import Testing

@testable import McuMgrCore

/// The upload machine's reading of each chunk's answer (`handle(_:to:now:)`), its requests' timing, the
/// first chunk under remembered buffers and how failures are reported: the decisions the runner
/// (`UploadEngine`) hands it, tested by the actions it returns.
@Suite struct SMPUploadMachineAnswerTests {
    typealias Chunk = SMPUploadMachine.Chunk
    typealias Action = SMPUploadMachine.Action

    static func machine(
        total: Int, depth: Int = 2, losses: Int = 3, timing: SMPUploadMachine.Timing = .init()
    ) -> SMPUploadMachine {
        SMPUploadMachine(
            total: total,
            limits: .init(
                depth: depth, chunkLengths: .init(first: 100, byOffsetHeadSize: [1: 100, 2: 100, 3: 100, 5: 100]),
                maximumConsecutiveLosses: losses, maximumBusyRetries: 2, busyRetryDelay: .milliseconds(100),
                timing: timing))
    }

    /// A machine of depth 1 whose first chunk the device confirmed, with the chunk at 100 sent.
    static func pastTheFirstChunk(total: Int, timing: SMPUploadMachine.Timing = .init()) -> SMPUploadMachine {
        var m = machine(total: total, depth: 1, timing: timing)
        _ = m.fill()
        _ = m.handle(.offset(100), to: c(0, 100))
        _ = m.fill()
        return m
    }

    /// Timing with the device's buffers remembered, not asked.
    static let remembered = SMPUploadMachine.Timing(rememberedBuffersCheck: .seconds(1))

    static func c(_ offset: Int, _ length: Int) -> Chunk { Chunk(offset: offset, length: length) }

    // MARK: Each answer as read

    @Test func anOffsetIsAnAnswer() {
        var m = Self.machine(total: 300)
        #expect(m.fill() == [.send(Self.c(0, 100))])
        #expect(m.handle(.offset(100), to: Self.c(0, 100)) == [.progress(confirmed: 100)])
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
    }

    @Test func returnCode10IsBusyAndSentAgainAfterAPause() {
        var m = Self.machine(total: 300)
        _ = m.fill()
        #expect(m.handle(.deviceError(.busy), to: Self.c(0, 100)) == [.sendAgain(Self.c(0, 100), after: .milliseconds(100))])
        #expect(m.handle(.deviceError(.busy), to: Self.c(0, 100)) == [.sendAgain(Self.c(0, 100), after: .milliseconds(100))])
        #expect(m.handle(.deviceError(.busy), to: Self.c(0, 100)) == [.fail(.busy(Self.c(0, 100)))])
    }

    @Test func anotherErrorWithoutACopyIsTheDevicesVerdictReportedWithItsOwnError() {
        var m = Self.pastTheFirstChunk(total: 300)
        #expect(m.handle(.deviceError(McuMgrReturnCode(3)), to: Self.c(100, 100)) == [.fail(.rejected(Self.c(100, 100)))])
        #expect(SMPUploadMachine.Failure.rejected(Self.c(100, 100)).report == .devicesError)
    }

    @Test func anErrorAfterAResendAsksTheDeviceForItsOffset() {
        var m = Self.pastTheFirstChunk(total: 300)
        _ = m.linkResent(Self.c(100, 100))
        #expect(m.handle(.deviceError(McuMgrReturnCode(3)), to: Self.c(100, 100)) == [.resendNow(Self.c(100, 100))])
        #expect(m.handle(.offset(200), to: Self.c(100, 100)) == [.progress(confirmed: 200)])
    }

    @Test func noAnswerIsALossAndTheChunkGoesAgain() {
        var m = Self.pastTheFirstChunk(total: 300)
        #expect(m.handle(.noAnswer, to: Self.c(100, 100)) == [])
        #expect(m.fill() == [.send(Self.c(100, 100))])
        #expect(m.losses == 1)
    }

    // MARK: A refusal that names bytes this upload did not send

    /// Zephyr appended a late copy of the first chunk to its file: the next chunk, sent once and never
    /// resent, is refused (fs error 11) with an offset past it, which reads like its acknowledgement.
    @Test func aRefusedChunkWhoseOffsetTheUploadDidNotReachFails() {
        var m = Self.machine(total: 1000, depth: 1)
        _ = m.fill()
        _ = m.handle(.offset(100), to: Self.c(0, 100))
        #expect(m.fill() == [.send(Self.c(100, 100))])
        let failure = SMPUploadMachine.Failure.appendedCopy(Self.c(100, 100), deviceOffset: 200)
        #expect(m.handle(.offset(200, refusesChunk: true), to: Self.c(100, 100)) == [.fail(failure)])
        #expect(m.fill() == [], "a failed machine asks for nothing more")
        #expect(failure.report == .protocolViolation)
        #expect(
            failure.description
                == "the device refused the chunk at offset 100 but holds 200 bytes, which this upload did not send there (a repeated first chunk was appended)")
    }

    @Test func aRefusalAfterAResendResynchronises() {
        var m = Self.pastTheFirstChunk(total: 1000)
        _ = m.linkResent(Self.c(100, 100))
        #expect(m.handle(.offset(200, refusesChunk: true), to: Self.c(100, 100)) == [.progress(confirmed: 200)])
    }

    @Test func aRefusalNamingAnOffsetAtOrBeforeTheChunkIsTheDevicesOffset() {
        var m = Self.machine(total: 1000, depth: 2)
        _ = m.fill()
        _ = m.handle(.offset(100), to: Self.c(0, 100))
        #expect(m.fill() == [.send(Self.c(100, 100)), .send(Self.c(200, 100))])
        #expect(m.handle(.offset(100, refusesChunk: true), to: Self.c(200, 100)) == [.resendNow(Self.c(100, 100))])
    }

    @Test func aRefusalOfTheFirstChunkIsAResume() {
        var m = Self.machine(total: 1000)
        _ = m.fill()
        #expect(m.handle(.offset(700, refusesChunk: true), to: Self.c(0, 100)) == [.resumed(offset: 700), .progress(confirmed: 700)])
    }

    // MARK: The first chunk under remembered buffers

    @Test func noAnswerToTheFirstChunkUnderRememberedBuffersAsksForThem() {
        var m = Self.machine(total: 1000, timing: Self.remembered)
        _ = m.fill()
        #expect(m.handle(.noAnswer, to: Self.c(0, 100)) == [.fail(.buffersInDoubt(.firstChunkUnanswered))])
        #expect(m.fill() == [])
        #expect(SMPUploadMachine.Failure.firstChunkUnanswered.report == .requestTimeout)
    }

    @Test func noAnswerToTheFirstChunkUnderAskedBuffersIsALoss() {
        var m = Self.machine(total: 1000, depth: 1)
        _ = m.fill()
        #expect(m.handle(.noAnswer, to: Self.c(0, 100)) == [])
        #expect(m.fill() == [.send(Self.c(0, 100))])
    }

    @Test func aFirstChunkRefusedForItsSizeUnderRememberedBuffersAsksForThem() {
        for code in [McuMgrReturnCode.noMemory, .messageTooLarge, .corrupt] {
            var m = Self.machine(total: 1000, timing: Self.remembered)
            _ = m.fill()
            #expect(m.handle(.deviceError(code), to: Self.c(0, 100)) == [.fail(.buffersInDoubt(.rejected(Self.c(0, 100))))])
        }
        var m = Self.machine(total: 1000, timing: Self.remembered)
        _ = m.fill()
        #expect(
            m.handle(.deviceError(McuMgrReturnCode(3)), to: Self.c(0, 100)) == [.fail(.rejected(Self.c(0, 100)))],
            "not an error about size")
    }

    @Test func onceTheDeviceConfirmedAByteTheRememberedBuffersHold() {
        var m = Self.pastTheFirstChunk(total: 1000, timing: Self.remembered)
        #expect(m.handle(.deviceError(.noMemory), to: Self.c(100, 100)) == [.fail(.rejected(Self.c(100, 100)))])
    }

    /// The first answer confirmed nothing (offset 0): later losses of the chunk at offset 0 are losses,
    /// and their limit, with nothing confirmed, asks for the buffers.
    @Test func chunksLostInARowBeforeAnyByteUnderRememberedBuffersAskForThem() {
        var m = Self.machine(total: 1000, depth: 1, losses: 1, timing: Self.remembered)
        _ = m.fill()
        #expect(m.handle(.offset(0), to: Self.c(0, 100)) == [])
        #expect(m.fill() == [.send(Self.c(0, 100))])
        #expect(m.handle(.noAnswer, to: Self.c(0, 100)) == [])
        #expect(m.fill() == [.send(Self.c(0, 100))])
        #expect(m.handle(.noAnswer, to: Self.c(0, 100)) == [.fail(.buffersInDoubt(.lostInARow(2, confirmed: 0, total: 1000)))])
    }

    // MARK: Timing

    @Test func eachRequestsTimeoutAndResendFloor() {
        let timing = SMPUploadMachine.Timing(
            firstChunkTimeout: .seconds(40), chunkTimeout: .seconds(10), eraseResendFloor: .seconds(3))
        let m = Self.machine(total: 1000, timing: timing)
        #expect(m.requestTiming(for: Self.c(0, 100)) == (.seconds(40), .seconds(3)))
        #expect(m.requestTiming(for: Self.c(100, 100)) == (.seconds(10), nil))

        var every = timing
        every.everyChunkMayErase = true
        every.firstChunkTimeout = .seconds(8)
        let recovery = Self.machine(total: 1000, timing: every)
        #expect(recovery.requestTiming(for: Self.c(0, 100)) == (.seconds(8), .seconds(2)), "a quarter of the timeout at most")
        #expect(recovery.requestTiming(for: Self.c(100, 100)) == (.seconds(10), .seconds(2.5)))

        // A file's first chunk erases no slot: it waits like the others (a device that answers nothing
        // fails a 4 KiB upload after 2 x 10 s, not 2 x 40 s).
        var file = timing
        file.firstChunkMayErase = false
        #expect(Self.machine(total: 1000, timing: file).requestTiming(for: Self.c(0, 100)) == (.seconds(10), nil))

        var remembered = timing
        remembered.rememberedBuffersCheck = .seconds(2)
        #expect(Self.machine(total: 1000, timing: remembered).requestTiming(for: Self.c(0, 100)) == (.seconds(2), .milliseconds(500)))
    }

    @Test func theRememberedBuffersCheckIsAFewRoundTrips() {
        typealias T = SMPUploadMachine.Timing
        #expect(T.rememberedBuffersCheck(smoothedRoundTrip: nil, consoleLink: false, firstChunkTimeout: .seconds(40)) == .seconds(1))
        #expect(T.rememberedBuffersCheck(smoothedRoundTrip: nil, consoleLink: true, firstChunkTimeout: .seconds(40)) == .seconds(2))
        #expect(
            T.rememberedBuffersCheck(smoothedRoundTrip: .milliseconds(500), consoleLink: false, firstChunkTimeout: .seconds(40))
                == .seconds(4))
        #expect(
            T.rememberedBuffersCheck(smoothedRoundTrip: .milliseconds(500), consoleLink: false, firstChunkTimeout: .seconds(3))
                == .seconds(3))
    }

    // MARK: Reports

    @Test func failuresAreReportedByKind() {
        typealias F = SMPUploadMachine.Failure
        #expect(F.lostInARow(3, confirmed: 0, total: 10).report == .timeout)
        #expect(F.noAnswer(for: .seconds(10), confirmed: 0, total: 10).report == .timeout)
        #expect(F.lossy(lost: 8, sent: 16, confirmed: 0, total: 10).report == .lossyLink)
        #expect(F.buffersInDoubt(.firstChunkUnanswered).report == .askForBuffers)
        #expect(F.buffersInDoubt(.firstChunkUnanswered).description == F.firstChunkUnanswered.description)
        for failure in [F.offsetOutside(20, total: 10), .noProgress(confirmed: 0), .busy(Self.c(0, 1)), .stalled(confirmed: 0, total: 10)] {
            #expect(failure.report == .protocolViolation)
        }
    }
}
