import TestSupport
import Testing

@testable import McuMgrCore

/// Timing properties of uploads, in virtual time: `SMPSession` and `SMPUploadMachine` driven as
/// `ChunkedUploader` drives them (the machine's chunks become session requests; the session's resends
/// and the answers' offsets go back to the machine as events),
/// against a device model with explicit delays. Nothing here reads a clock, so a loaded machine cannot
/// change a count: the end-to-end tests of the same scenarios (`UDPWindowTests`,
/// `ExactFileTransferTests`) assert only the outcome.
@Suite struct UploadTimingTests {
    static func ms(_ value: Double) -> UInt64 { UInt64(value * 1_000_000) }

    /// A file-upload device: `{"off", "data"}` requests append at its offset; a request at another offset
    /// is an offset error answered with the device's length (Zephyr's FS error 11 with `len`).
    struct FileDevice {
        var bytes: [UInt8] = []
        var writes = 0
        var offsetErrors = 0

        mutating func handle(_ request: SMPPacket) -> CBOR {
            writes += 1
            let body = try! CBOR(decoding: request.payload)
            let offset = body["off"]!.int!
            guard offset == bytes.count else {
                offsetErrors += 1
                return .textMap(["rc": 11, "len": .int(bytes.count)])
            }
            bytes += body["data"]!.byteString!
            return .textMap(["off": .int(bytes.count)])
        }
    }

    /// MCUboot's serial recovery upload (boot_serial.c `bs_upload`, progressive erase): a chunk at the
    /// offset it expects is written, after erasing each `sector` it reaches that is not erased yet (which
    /// takes `eraseTime` per sector); a chunk at any other offset is answered `rc 0` with the expected
    /// offset and changes nothing. `copyAnswer` replaces that answer for a copy of the request it
    /// handled last (same sequence number), as measured in issue 22 (`rc 3`, no offset).
    struct RecoveryDevice {
        var bytes: [UInt8] = []
        var erasedUpTo = 0
        let sector: Int
        let eraseTime: UInt64
        var copyAnswer: CBOR?
        var writes = 0
        var erases = 0
        var copies = 0
        private var lastSequence: UInt8?

        init(sector: Int, eraseTime: UInt64, copyAnswer: CBOR? = nil) {
            self.sector = sector
            self.eraseTime = eraseTime
            self.copyAnswer = copyAnswer
        }

        /// The answer and how long the device works before it answers.
        mutating func handle(_ request: SMPPacket) -> (CBOR, busy: UInt64) {
            let copy = lastSequence == request.header.sequence
            lastSequence = request.header.sequence
            let body = try! CBOR(decoding: request.payload)
            let offset = body["off"]!.int!
            guard offset == bytes.count else {
                if copy { copies += 1 }
                return (copy ? copyAnswer ?? .textMap(["rc": 0, "off": .int(bytes.count)]) : .textMap(["rc": 0, "off": .int(bytes.count)]), 0)
            }
            writes += 1
            bytes += body["data"]!.byteString!
            var busy: UInt64 = 0
            let needed = (bytes.count - 1) / sector * sector + sector
            while erasedUpTo < needed {
                erasedUpTo += sector
                erases += 1
                busy += eraseTime
            }
            return (.textMap(["rc": 0, "off": .int(bytes.count)]), busy)
        }
    }

    /// Zephyr's SMP UDP receive side (as `smp-sim --udp-queue zephyr` models it, measured on native_sim
    /// 4.4.0): a request holds two of the `buf_count` buffers until it is answered on the device's next
    /// 10 ms tick; a datagram read while no buffers are free is dropped, and nothing is read until the
    /// next answer frees some.
    struct ZephyrUDPQueue {
        let capacity: Int
        let tick = UploadTimingTests.ms(10)
        var answering: [UInt64] = []
        var stalledUntil: UInt64 = 0
        var dropped = 0

        init(bufferCount: Int) { capacity = max(1, bufferCount / 2) }

        enum Decision { case answer(at: UInt64), drop, wait(until: UInt64) }

        mutating func take(at time: UInt64) -> Decision {
            answering.removeAll { $0 <= time }
            if time < stalledUntil { return .wait(until: stalledUntil) }
            if answering.count < capacity {
                let at = (time / tick + 1) * tick
                answering.append(at)
                return .answer(at: at)
            }
            stalledUntil = answering.min() ?? time
            dropped += 1
            return .drop
        }
    }

    /// One upload in virtual time.
    struct Run {
        enum Event {
            case atDevice([UInt8])
            case deviceAnswers(SMPPacket)
            case answerReady(SMPPacket, CBOR)
            case atClient([UInt8])
        }

        var session: SMPSession
        var machine: SMPUploadMachine
        var device = FileDevice()
        /// Set: the device is MCUboot's serial recovery, one request at a time, erasing as it goes.
        var recovery: RecoveryDevice?
        private var recoveryBusyUntil: UInt64 = 0
        /// No chunk is resent sooner than this (the runner's erase floor); nil: the session's timeout.
        var resendFloor: Duration?
        /// Device errors handed to the machine (`rejected`).
        var rejections = 0
        /// Nil: the device answers each request `answerDelay` after it arrives, however many are queued.
        var udp: ZephyrUDPQueue?
        var answerDelay = UploadTimingTests.ms(1)
        /// One-way delay of each datagram (request or answer), by its index in each direction.
        var oneWay: (Int) -> UInt64 = { _ in UploadTimingTests.ms(0.1) }
        /// The answers the link loses, by the device's request count (1 = the first request).
        var loseAnswer: (Int) -> Bool = { _ in false }
        let data: [UInt8]
        let chunkTimeout: Duration

        var now: UInt64 = 0
        private var events: [(time: UInt64, order: Int, event: Event)] = []
        private var order = 0
        private var requests = 0
        private var datagrams = 0
        private var nextID: UInt64 = 0
        private var chunks: [SMPRequestID: SMPUploadMachine.Chunk] = [:]
        private var current: [SMPUploadMachine.Chunk: SMPRequestID] = [:]
        /// The session's resends (after a timeout) and the machine's (a later answer showed a chunk lost).
        var resends = 0
        var fastResends = 0
        var windows: [Int] = []
        var failure: SMPUploadMachine.Failure?
        var finished = false

        init(data: [UInt8], session: SMPSessionConfiguration, limits: SMPUploadMachine.Limits, chunkTimeout: Duration = .seconds(5)) {
            self.data = data
            self.session = SMPSession(configuration: session)
            self.machine = SMPUploadMachine(total: data.count, limits: limits)
            self.chunkTimeout = chunkTimeout
            _ = self.session.setWindow(limits.depth, now: .zero)
        }

        var instant: SMPInstant { SMPInstant(nanoseconds: now) }

        private var lastArrival: (toDevice: UInt64, toClient: UInt64) = (0, 0)

        /// Sends a datagram: it arrives after its one-way delay, never before one sent earlier (a link that
        /// does not reorder, as loopback).
        private mutating func transmit(_ event: Event, toDevice: Bool) {
            datagrams += 1
            var at = now + oneWay(datagrams)
            if toDevice {
                at = max(at, lastArrival.toDevice)
                lastArrival.toDevice = at
            } else {
                at = max(at, lastArrival.toClient)
                lastArrival.toClient = at
            }
            schedule(event, at: at)
        }

        private mutating func schedule(_ event: Event, at time: UInt64) {
            order += 1
            events.append((time, order, event))
        }

        private mutating func submit(_ chunk: SMPUploadMachine.Chunk) {
            nextID += 1
            let id = SMPRequestID(nextID)
            chunks[id] = chunk
            current[chunk] = id
            let payload = CBOR.textMap([
                "off": .int(chunk.offset), "data": .bytes(Array(data[chunk.offset..<chunk.offset + chunk.length])),
            ]).encoded
            runSession(session.submit(
                id, operation: .write, group: .fileSystem, command: McuMgrCommand(0), payload: payload,
                timeout: chunkTimeout, resendFloor: resendFloor, now: instant))
        }

        private mutating func abandon(_ chunk: SMPUploadMachine.Chunk) {
            guard let id = current.removeValue(forKey: chunk) else { return }
            runSession(session.cancel(id, now: instant))
        }

        /// Runs the session's actions; its resends go to the machine (and are counted).
        private mutating func runSession(_ actions: [SMPSession.Action]) {
            for notice in session.takeNotices() {
                guard case .retransmitted(let id, _, _, _) = notice else { continue }
                resends += 1
                if let chunk = chunks[id] { runMachine(machine.linkResent(chunk)) }
            }
            for action in actions {
                switch action {
                case .send(_, let bytes):
                    transmit(.atDevice(bytes), toDevice: true)
                case .complete(let id, let packet):
                    guard let chunk = chunks.removeValue(forKey: id), current[chunk] == id else { continue }
                    current[chunk] = nil
                    let body = try! CBOR(decoding: packet.payload)
                    guard let offset = body["off"]?.int ?? body["len"]?.int else {
                        // A device error: the machine knows whether a copy may have caused it.
                        rejections += 1
                        runMachine(machine.rejected(chunk))
                        continue
                    }
                    runMachine(machine.answered(chunk, deviceOffset: offset, now: instant))
                case .fail(let id, .timeout):
                    guard let chunk = chunks.removeValue(forKey: id), current[chunk] == id else { continue }
                    current[chunk] = nil
                    runMachine(machine.lost(chunk, now: instant))
                case .fail:
                    continue  // cancelled (abandoned) requests
                }
            }
        }

        /// Runs the machine's actions.
        private mutating func runMachine(_ actions: [SMPUploadMachine.Action]) {
            for action in actions {
                switch action {
                case .send(let chunk), .sendAgain(let chunk, _): submit(chunk)
                case .resendNow(let chunk):
                    fastResends += 1
                    abandon(chunk)
                    submit(chunk)
                case .abandon(let chunk): abandon(chunk)
                case .window(let window): windows.append(window.value)
                case .finished: finished = true
                case .fail(let why): failure = why
                case .progress, .resumed, .wentBack: break
                }
            }
        }

        /// Runs the upload to its end (finished or failed), then lets the datagrams still on their way
        /// arrive (late answers, the device's handling of late copies). False if the upload stalled or took
        /// longer than `limit`.
        mutating func run(limit: Duration = .seconds(600)) -> Bool {
            runMachine(machine.fill(now: instant))
            let end = SMPInstant.zero + limit
            while !finished, failure == nil {
                let nextEvent = events.min { ($0.time, $0.order) < ($1.time, $1.order) }
                let deadline = session.nextDeadline?.nanoseconds
                if let next = nextEvent, deadline == nil || next.time <= deadline! {
                    events.removeAll { $0.order == next.order }
                    now = max(now, next.time)
                    handle(next.event)
                } else if let deadline {
                    now = max(now, deadline)
                    runSession(session.tick(now: instant))
                } else {
                    return false
                }
                if instant > end { return false }
                if !finished, failure == nil { runMachine(machine.fill(now: instant)) }
            }
            while let next = events.min(by: { ($0.time, $0.order) < ($1.time, $1.order) }) {
                events.removeAll { $0.order == next.order }
                now = max(now, next.time)
                handle(next.event)
            }
            return true
        }

        private mutating func handle(_ event: Event) {
            switch event {
            case .atDevice(let bytes):
                let packet = try! SMPPacket(decoding: bytes)
                if var device = recovery {
                    // One request at a time: it waits for the erase before it, and its own comes before its answer.
                    let start = max(now, recoveryBusyUntil)
                    let (answer, busy) = device.handle(packet)
                    recovery = device
                    recoveryBusyUntil = start + answerDelay + busy
                    schedule(.answerReady(packet, answer), at: recoveryBusyUntil)
                    return
                }
                guard var queue = udp else {
                    schedule(.deviceAnswers(packet), at: now + answerDelay)
                    return
                }
                let decision = queue.take(at: now)
                udp = queue
                switch decision {
                case .answer(let at): schedule(.deviceAnswers(packet), at: at)
                case .drop: break
                case .wait(let until): schedule(.atDevice(bytes), at: until)
                }
            case .deviceAnswers(let request):
                requests += 1
                let answer = device.handle(request)
                guard !loseAnswer(requests) else { return }
                var header = request.header
                header.operation = header.operation.response
                transmit(.atClient(SMPPacket(header: header, payload: answer.encoded).bytes), toDevice: false)
            case .answerReady(let request, let answer):
                requests += 1
                guard !loseAnswer(requests) else { return }
                var header = request.header
                header.operation = header.operation.response
                transmit(.atClient(SMPPacket(header: header, payload: answer.encoded).bytes), toDevice: false)
            case .atClient(let bytes):
                runSession(session.receive(bytes, now: instant))
            }
        }
    }

    /// What `smp` uses over UDP (`UDPTransport.linkLimits.session`: adaptive resends above a 25 ms floor,
    /// 250 ms before the first round trip) and `ChunkedUploader`'s limits for a window of `depth`.
    static func udpRun(data: [UInt8], bufferCount: Int, depth: Int, chunk: Int, oneWay: @escaping (Int) -> UInt64) -> Run {
        var run = Run(
            data: data,
            session: SMPSessionConfiguration(
                window: depth, adaptiveRetransmit: true, retransmitFloor: .milliseconds(25),
                initialRetransmit: .milliseconds(250), maximumRetransmits: 5),
            limits: .init(
                depth: depth, chunkLengths: .init(first: chunk, byOffsetHeadSize: [1: chunk, 2: chunk, 3: chunk, 5: chunk]),
                progressTimeout: .seconds(5)))
        run.udp = ZephyrUDPQueue(bufferCount: bufferCount)
        run.oneWay = oneWay
        return run
    }

    /// The timing half of `UDPWindowTests` (which runs real processes and checks the window and the
    /// outcome): 64 KiB to a device with 4 buffers, `buf_count / 2` = 2 chunks in flight, datagrams taking
    /// 0.05 to 3 ms each way (answers within the resend timeout): the device drops nothing, nothing is
    /// resent, the window never shrinks.
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func bufCountHalfInFlightOnZephyrsUDPBuffersResendsNothing(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let data = random.bytes(64 * 1024)
        let delays = (0..<4096).map { _ in UInt64(50_000 + random.next(below: 2_950_000)) }
        var run = Self.udpRun(data: data, bufferCount: 4, depth: 2, chunk: 300) { delays[$0 % delays.count] }
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.device.bytes == data)
        #expect(run.udp?.dropped == 0)
        #expect(run.resends == 0)
        #expect(run.fastResends == 0)
        #expect(run.device.offsetErrors == 0)
        #expect(run.machine.chunksSent == (data.count + 299) / 300)
        #expect(run.windows.allSatisfy { $0 == 2 }, "\(run.windows)")
    }

    /// The converse, so that the property above has teeth: one chunk more in flight than the buffers hold
    /// and the device drops requests, which are resent.
    @Test func oneMoreChunkInFlightThanZephyrsUDPBuffersHoldIsDroppedAndResent() {
        var random = SplitMix64(seed: 7)
        let data = random.bytes(16 * 1024)
        var run = Self.udpRun(data: data, bufferCount: 4, depth: 3, chunk: 300) { _ in UploadTimingTests.ms(0.1) }
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.device.bytes == data)
        #expect((run.udp?.dropped ?? 0) > 0)
        #expect(run.resends + run.fastResends > 0)
    }

    /// `ExactFileTransferTests.aLostAnswerInTheMiddleEndsWithTheWholeFileCommitted` in virtual time, with its
    /// session (window 1, a resend after a fixed 100 ms) and chunks (300 bytes): the answer to the third
    /// chunk is lost, the session resends it once after 100 ms, the device (which wrote it) answers with
    /// one offset error carrying its length, and the upload goes on from there: exactly one resend and
    /// one offset resync, every byte once.
    @Test func oneLostAnswerMidTransferIsOneResendAndOneOffsetResync() {
        var random = SplitMix64(seed: 21)
        let data = random.bytes(4096)
        var run = Run(
            data: data,
            session: SMPSessionConfiguration(window: 1, retransmitInterval: .milliseconds(100), maximumRetransmits: 5),
            limits: .init(depth: 1, chunkLengths: .init(first: 300, byOffsetHeadSize: [1: 300, 2: 300, 3: 300, 5: 300])))
        run.answerDelay = Self.ms(1)
        run.loseAnswer = { $0 == 3 }
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.device.bytes == data)
        #expect(run.resends == 1)
        #expect(run.device.offsetErrors == 1)
        #expect(run.device.writes == 14 + 1)  // 14 chunks of at most 300 bytes, one of them twice
        #expect(run.machine.chunksSent == 14)
        // The resend came 100 ms after the lost answer's request, and nothing else waited on a timer.
        #expect(run.now >= Self.ms(100) && run.now < Self.ms(100 + 15 * 2.5), "\(run.now)")
    }

    /// Answers slower than the fixed resend interval are resent, each once, and every resend is answered
    /// with an offset error: how `ExactFileTransferTests` counted more than one on a loaded machine (an
    /// answer that came late in wall time).
    @Test func answersLaterThanTheResendIntervalAreEachResentOnce() {
        var random = SplitMix64(seed: 22)
        let data = random.bytes(1500)
        var run = Run(
            data: data,
            session: SMPSessionConfiguration(window: 1, retransmitInterval: .milliseconds(100), maximumRetransmits: 5),
            limits: .init(depth: 1, chunkLengths: .init(first: 300, byOffsetHeadSize: [1: 300, 2: 300, 3: 300, 5: 300])))
        run.answerDelay = Self.ms(150)
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.device.bytes == data)
        #expect(run.resends == 5)
        #expect(run.device.offsetErrors == 5)
    }

    /// MCUboot's serial recovery as `smp dfu` drives it over serial (`SerialTransport.linkLimits.session`: resends
    /// after the measured timeout, not sooner than 300 ms), one chunk in flight (`buf_count` 1), 1000-byte
    /// chunks, 4 KiB sectors that take 376 ms each to erase (issue 22's measurement).
    static func recoveryRun(data: [UInt8], resendFloor: Duration?, sector: Int = 4096, copyAnswer: CBOR? = nil) -> Run {
        var run = Run(
            data: data,
            session: SMPSessionConfiguration(window: 1, adaptiveRetransmit: true, retransmitFloor: .milliseconds(300), maximumRetransmits: 16),
            limits: .init(depth: 1, chunkLengths: .init(first: 1000, byOffsetHeadSize: [1: 1000, 2: 1000, 3: 1000, 5: 1000])),
            chunkTimeout: .seconds(10))
        run.recovery = RecoveryDevice(sector: sector, eraseTime: Self.ms(376), copyAnswer: copyAnswer)
        run.answerDelay = Self.ms(5)
        run.resendFloor = resendFloor
        return run
    }

    /// The defect's cause: once the round trips between erases have brought the resend timeout down to the
    /// 300 ms serial floor, a 376 ms erase outlasts it and the chunk that erases is sent twice. MCUboot
    /// answers the copy as boot_serial.c does (`rc 0`, the offset it expects), and the session ignores
    /// that answer (its sequence number was answered), so this upload still ends well. 16 KiB sectors: 16
    /// chunks between erases (the first erase comes before any round trip was measured: 1 s timeout).
    @Test func sectorErasesLongerThanTheSerialFloorAreResentWithoutAFloor() {
        var random = SplitMix64(seed: 31)
        let data = random.bytes(50_000)
        var run = Self.recoveryRun(data: data, resendFloor: nil, sector: 16384)  // answers to copies: rc 0 and the offset
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.recovery?.bytes == data)
        #expect(run.recovery?.erases == 4)
        // Each erase measured raises the timeout again; 16 fast round trips later it is back at the floor.
        #expect(run.resends >= 1 && run.resends <= 3, "\(run.resends)")
        #expect(run.recovery?.copies == run.resends, "every resend is a copy of a chunk that erased")
    }

    /// On MCUboot's recovery every chunk may erase (`UploadConfiguration.everyChunkMayErase`): with the
    /// runner's 2 s erase floor on every chunk, no erase draws a copy.
    @Test func onRecoveryTheEraseFloorCoversEverySectorErase() {
        var random = SplitMix64(seed: 32)
        let data = random.bytes(50_000)
        var run = Self.recoveryRun(data: data, resendFloor: .seconds(2), sector: 16384, copyAnswer: .textMap(["rc": 3]))
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.recovery?.bytes == data)
        #expect(run.resends == 0)
        #expect(run.recovery?.copies == 0)
        #expect(run.recovery?.erases == 4)
        #expect(run.machine.chunksSent == 50)
    }

    /// Issue 22's failure: a copy sent during a sector erase is answered `rc 3` (EINVAL, no offset). When that
    /// answer is the one the session matches (the answer to the original was lost on the line), the upload
    /// used to end with "the device rejected a value in the request". Now the chunk is sent again as a new
    /// request and the device's offset in its answer decides: the upload ends well, every byte written once.
    @Test func aCopysErrorAfterAResendIsResynchronisedFromTheDevice() {
        var random = SplitMix64(seed: 33)
        let data = random.bytes(20_000)
        var run = Self.recoveryRun(data: data, resendFloor: nil, copyAnswer: .textMap(["rc": 3]))
        // The answer to the request that erases the second sector (the fifth chunk, 4000..<5000) is lost.
        run.loseAnswer = { $0 == 5 }
        let ended = run.run()
        #expect(ended, "stalled or over the limit")
        #expect(run.finished, "\(String(describing: run.failure))")
        #expect(run.recovery?.bytes == data)
        #expect(run.recovery?.writes == 20, "every chunk written once")
        #expect(run.rejections == 1)
    }
}
