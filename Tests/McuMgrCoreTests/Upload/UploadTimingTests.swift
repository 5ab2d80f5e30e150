import TestSupport
import Testing

@testable import McuMgrCore

/// Timing properties of uploads, in virtual time: `SMPSession` and `SMPUploadMachine` driven as
/// `ChunkedUploader` drives them (the machine's chunks become session requests; an answer's offset goes
/// back to the machine with `linkResent` when the session resent something since the previous answer),
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
            case atClient([UInt8])
        }

        var session: SMPSession
        var machine: SMPUploadMachine
        var device = FileDevice()
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
        var resendsSeen = 0
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
                timeout: chunkTimeout, now: instant))
        }

        private mutating func abandon(_ chunk: SMPUploadMachine.Chunk) {
            guard let id = current.removeValue(forKey: chunk) else { return }
            runSession(session.cancel(id, now: instant))
        }

        /// Runs the session's actions (and counts its resends).
        private mutating func runSession(_ actions: [SMPSession.Action]) {
            for notice in session.takeNotices() {
                if case .retransmitted = notice { resends += 1 }
            }
            for action in actions {
                switch action {
                case .send(_, let bytes):
                    transmit(.atDevice(bytes), toDevice: true)
                case .complete(let id, let packet):
                    guard let chunk = chunks.removeValue(forKey: id), current[chunk] == id else { continue }
                    current[chunk] = nil
                    let body = try! CBOR(decoding: packet.payload)
                    let offset = body["off"]?.int ?? body["len"]!.int!
                    let linkResent = resends > resendsSeen
                    resendsSeen = resends
                    runMachine(machine.answered(chunk, deviceOffset: offset, linkResent: linkResent, now: instant))
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
            case .atClient(let bytes):
                runSession(session.receive(bytes, now: instant))
            }
        }
    }

    /// What `smp` uses over UDP (`UDPTransport.sessionDefaults`: adaptive resends above a 25 ms floor,
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
}
