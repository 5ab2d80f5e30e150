#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The upload code itself, one copy for every target and source: `ChunkedUploader` hands it the
/// target's request encoder and answer reader as closures (a generic runner was compiled once per
/// target and source type, half a megabyte of the `smp` binary).
struct UploadEngine: Sendable {
    /// The chunk request's SMP command and names.
    struct Command: Sendable {
        var operation: SMPOperation
        var group: McuMgrGroup
        var command: McuMgrCommand
        /// For messages: "image upload", "file upload", ...
        var name: String
        var firstChunkMayErase: Bool
    }

    let client: McuMgrClient
    let configuration: UploadConfiguration
    let control: UploadControl?
    let command: Command
    /// The encoded request carrying `data` at `offset` of a `total`-byte upload.
    let request: @Sendable (_ offset: Int, _ data: Data, _ total: Int) throws -> [UInt8]
    /// The device's next offset from its answer to a chunk.
    let deviceOffset: @Sendable (SMPPacket) throws -> Int
    /// Whether an answer refuses its chunk for the chunk's offset (`ChunkedUploadTarget.refusesChunkOffset`).
    var refusesOffset: @Sendable (SMPPacket) -> Bool = { _ in false }

    /// Uploads all of `source` (see `ChunkedUploader.upload(_:progress:)`).
    func upload(_ source: any UploadSource, progress: TransferProgressHandler?) async throws -> UploadResult {
        let clock = client.clock
        // Timed from the link being up: a connection's set-up is not the upload's.
        try await client.open()
        let started = clock.now
        let total = source.size
        var (limits, remembered) = try await linkLimits(total: total, useMemory: true)

        if total == 0 {
            let offset = try await send(try request(0, Data(), 0), timeout: configuration.firstChunkTimeout)
            guard offset == 0 else {
                throw McuMgrError(.protocolViolation, "\(command.name): the device reported offset \(offset) for an empty upload")
            }
            progress?(TransferProgress(bytesTransferred: 0, totalBytes: 0, bytesPerSecond: nil))
            return UploadResult(totalBytes: 0, resumedFrom: 0, chunkSize: 0, pipelineDepth: limits.window(forPacket: limits.packetSize), chunksSent: 1, duration: started.duration(to: clock.now))
        }

        // Under remembered buffers the first chunk has a short wait of its own (the machine's
        // `rememberedBuffersCheck`): no answer in it leads to `os params` rather than to the whole timeout.
        var check: Duration?
        if remembered {
            check = SMPUploadMachine.Timing.rememberedBuffersCheck(
                smoothedRoundTrip: await client.smoothedRoundTrip,
                consoleLink: client.transport is any McuMgrConsoleLineTransport,
                firstChunkTimeout: configuration.firstChunkTimeout)
        }
        do {
            while true {
                switch try await run(source, total: total, limits: limits, progress: progress, clock: clock, started: started, check: check) {
                case .finished(let result):
                    return result
                case .askForBuffers(let error):
                    // Other buffers (other firmware at this address) replace the remembered ones; the same
                    // ones mean the device was only slow (an erase), and the upload goes on under them.
                    let memory = client.configuration.parametersMemory
                    let before = memory?.recall(client.transport.name)
                    memory?.forgetParameters(of: client.transport.name)
                    if let console = client.transport as? any McuMgrConsoleLineTransport {
                        console.learnConsoleLines(.zephyrDefault, final: false)
                    }
                    client.logger.warning(
                        "\(command.name): no answer to the first chunk under the device's remembered buffers (\(error.message)); asking the device for them")
                    (limits, remembered) = try await linkLimits(total: total, useMemory: false)
                    if let before, before == memory?.recall(client.transport.name) {
                        client.logger.debug("link: the device's buffers are as remembered (it was slow to answer)")
                    }
                    check = nil
                }
            }
        } catch is CancellationError {
            throw McuMgrError(.cancelled, "\(command.name) was cancelled")
        }
    }

    /// How a run of the machine ended.
    private enum RunEnd {
        case finished(UploadResult)
        /// The machine asks for the device's buffers (`SMPUploadMachine.Failure.buffersInDoubt`), after this error.
        case askForBuffers(McuMgrError)
    }

    /// One run of `SMPUploadMachine` over `source`: submits its chunks, hands it each answer as read, and
    /// does what it says. `check`: the machine's `Timing.rememberedBuffersCheck`.
    private func run(
        _ source: any UploadSource, total: Int, limits link: LinkLimits,
        progress: TransferProgressHandler?, clock: McuMgrClock, started: McuMgrClock.Instant, check: Duration?
    ) async throws -> RunEnd {
        let client = self.client
        let control = self.control
        let name = command.name
        var machine = SMPUploadMachine(
            total: total,
            limits: SMPUploadMachine.Limits(
                depth: link.window(forPacket: link.packetSize), alignment: configuration.byteAlignment,
                chunkLengths: try chunkLengths(total: total, messageLimit: link.packetSize),
                maximumConsecutiveLosses: configuration.maximumTimeoutRetries,
                maximumBusyRetries: configuration.maximumBusyRetries, busyRetryDelay: configuration.busyRetryDelay,
                progressTimeout: configuration.chunkTimeout,
                timing: SMPUploadMachine.Timing(
                    firstChunkTimeout: configuration.firstChunkTimeout, chunkTimeout: configuration.chunkTimeout,
                    eraseResendFloor: link.eraseResendFloor, firstChunkMayErase: command.firstChunkMayErase,
                    everyChunkMayErase: configuration.everyChunkMayErase, rememberedBuffersCheck: check)))
        /// The machine's clock: time since the upload started.
        func now() -> SMPInstant { SMPInstant(nanoseconds: started.duration(to: clock.now).nanosecondsClamped) }
        // Rates over the last seconds of the upload, from its first chunk (not the link probe before it).
        let firstChunkTime = clock.now
        var rate = TransferRateEstimator()
        rate.record(bytes: 0, at: .zero)
        /// The last request timeout, and the device's last error for a chunk: the words of the failures.
        var lastError: McuMgrError?
        var rejection: McuMgrError?

        // Chunks are submitted one after the other (so they go out in offset order) and their requests'
        // events (resends, then the answer) come back through one stream, handled here in arrival order:
        // no task per chunk. Each submission has a number: answers to a request that was abandoned or
        // replaced (fast retransmit) are recognised by it and ignored.
        let (events, sink) = AsyncStream.makeStream(of: (SMPUploadPlanner.Chunk, Int, McuMgrRequestEvent).self)
        var pendingEvents = events.makeAsyncIterator()
        var handles: [SMPUploadPlanner.Chunk: (handle: McuMgrRequestHandle, submission: Int)] = [:]
        var submissions = 0
        defer { sink.finish() }

        func abandon(_ chunk: SMPUploadPlanner.Chunk) async {
            guard let entry = handles.removeValue(forKey: chunk) else { return }
            await client.cancel(entry.handle)
        }

        func abandonAll() async {
            for chunk in Array(handles.keys) { await abandon(chunk) }
        }

        func submit(_ chunk: SMPUploadPlanner.Chunk) async throws {
            let payload = try request(chunk.offset, try source.read(offset: chunk.offset, length: chunk.length), total)
            let (timeout, resendFloor) = machine.requestTiming(for: chunk)
            submissions += 1
            let submission = submissions
            handles[chunk] = (
                try await client.submit(
                    operation: command.operation, group: command.group, command: command.command,
                    payload: payload, timeout: timeout, resendFloor: resendFloor, name: name
                ) { event in sink.yield((chunk, submission, event)) },
                submission
            )
        }

        /// The error that reports `failure`.
        func reported(_ failure: SMPUploadMachine.Failure) -> McuMgrError {
            if failure.report == .devicesError, let rejection { return rejection }
            if failure.report == .requestTimeout, let lastError { return lastError }
            switch failure.report {
            case .timeout, .requestTimeout:
                return McuMgrError(.timeout, (lastError.map { $0.message + " " } ?? "") + "\(name): \(failure).")
            case .lossyLink: return McuMgrError(.timeout, "\(client.transport.name): \(failure).")
            case .protocolViolation, .devicesError, .askForBuffers: return McuMgrError(.protocolViolation, "\(name): \(failure)")
            }
        }

        /// Runs the machine's actions; the run's end once it says so.
        func execute(_ actions: [SMPUploadMachine.Action]) async throws -> RunEnd? {
            for action in actions {
                switch action {
                case .send(let chunk):
                    try await submit(chunk)
                case .sendAgain(let chunk, let delay):
                    try await clock.sleep(for: delay)
                    try await submit(chunk)
                case .abandon(let chunk):
                    await abandon(chunk)
                case .resendNow(let chunk):
                    client.logger.debug("upload: offset \(chunk.offset) sent again at once as a new request (the device still waits for it, or its offset is to be asked after an error)")
                    await abandon(chunk)
                    try await submit(chunk)
                case .progress(let confirmed):
                    rate.record(bytes: confirmed, at: firstChunkTime.duration(to: clock.now))
                    progress?(TransferProgress(bytesTransferred: confirmed, totalBytes: total, bytesPerSecond: rate.bytesPerSecond))
                case .resumed(let offset):
                    rate.restart(bytes: offset, at: firstChunkTime.duration(to: clock.now))
                    control?.reportResumed(offset: offset, total: total)
                case .wentBack(let from, let to):
                    client.logger.warning(
                        "\(name): the device went back from offset \(from) to \(to) of \(total) (it lost what it had: it reset, or ended the upload); continuing from \(to)")
                    rate.restart(bytes: to, at: firstChunkTime.duration(to: clock.now))
                case .window(let window):
                    client.logger.debug("upload: \(window)")
                case .finished:
                    return .finished(UploadResult(
                        totalBytes: total, resumedFrom: machine.resumedFrom ?? 0, chunkSize: machine.largestChunk,
                        pipelineDepth: link.window(forPacket: link.packetSize), chunksSent: machine.chunksSent, duration: started.duration(to: clock.now)))
                case .fail(.buffersInDoubt(let failure)):
                    await abandonAll()
                    return .askForBuffers(reported(failure))
                case .fail(let failure):
                    throw reported(failure)
                }
            }
            return nil
        }

        do {
            while true {
                try Task.checkCancellation()
                // Paused: let the chunks in flight drain, then hold until resumed.
                if let control, control.isPaused, machine.inFlightCount == 0 {
                    await control.waitWhilePaused()
                    try Task.checkCancellation()
                }
                if let end = try await execute(machine.fill(paused: control?.isPaused == true, now: now())) { return end }
                if machine.inFlightCount == 0 { continue }  // paused with nothing in flight
                guard let (chunk, submission, event) = await pendingEvents.next() else { throw CancellationError() }
                let answer: SMPUploadMachine.Answer
                switch event {
                case .overdue:
                    continue  // never asked for here
                case .resent:
                    // The link lost something (also when this submission was replaced since: the resend
                    // went out before that).
                    if let end = try await execute(machine.linkResent(chunk)) { return end }
                    continue
                case .answered(let result) where handles[chunk]?.submission != submission:
                    // An answer to a request abandoned or replaced since: nothing waits for it. An error in it
                    // answers a copy and never ends the transfer (the device's offset, from the request that
                    // replaced it or a later chunk, decides; a failed write fails that request too).
                    do {
                        if case .success(let packet) = result { _ = try deviceOffset(packet) }
                    } catch {
                        client.logger.debug("upload: an answer to a replaced copy of offset \(chunk.offset) reports an error, ignored: \(error)")
                    }
                    continue
                case .answered(.success(let packet)):
                    do {
                        answer = .offset(try deviceOffset(packet), refusesChunk: refusesOffset(packet))
                    } catch let error as McuMgrError where error.returnCode == .busy || error.kind == .device {
                        if error.returnCode != .busy { rejection = error }
                        answer = .deviceError(error.returnCode)
                    }
                case .answered(.failure(let error)) where error.kind == .timeout:
                    lastError = error
                    answer = .noAnswer
                case .answered(.failure(let error)):
                    throw error
                }
                handles[chunk] = nil
                let actions = machine.handle(answer, to: chunk, now: now())
                if case .deviceError = answer, actions.contains(.resendNow(chunk)), let rejection {
                    client.logger.debug("upload: offset \(chunk.offset) rejected after a resend (\(rejection.message)); asking the device for its offset")
                }
                if let end = try await execute(actions) { return end }
            }
        } catch {
            await abandonAll()  // what is still in flight
            throw error
        }
    }

    /// The data lengths that fit one request: at offset 0 and for each size of the offset's CBOR head.
    private func chunkLengths(total: Int, messageLimit: Int) throws -> SMPUploadMachine.ChunkLengths {
        var byHeadSize: [Int: Int] = [:]
        for offset in [1, 24, 256, 65_536, 1 << 32] where offset < max(total, 2) {
            byHeadSize[CBORWriter.headSize(argument: UInt64(offset))] = try maximumDataLength(
                at: offset, total: total, messageLimit: messageLimit)
        }
        return SMPUploadMachine.ChunkLengths(
            first: try maximumDataLength(at: 0, total: total, messageLimit: messageLimit), byOffsetHeadSize: byHeadSize)
    }

    /// Uploads of at least this many bursts at the starting console line limits are worth probing the
    /// link for longer lines and bursts first (a probe the device does not answer costs a few round trips).
    static var probeThresholdBursts: Int { 16 }

    /// The link's limits for this upload, refined on the client (`McuMgrClient.refineLinkLimits`) with the
    /// device's buffers (`os params`; a device without them takes one request at a time) and the
    /// configuration's `pipelineDepth`, after probing a serial console's line buffers when the upload is
    /// long enough to gain from it. Their `packetSize` sizes the chunks, their `window` is the depth.
    ///
    /// Round trips: `os params` once per device. With `useMemory`, buffers remembered for this device
    /// (`McuMgrClient.Configuration.parametersMemory`) are used without asking (`remembered` is then true:
    /// the first chunk's answer proves them, see `upload`), and on a serial console line limits remembered
    /// for that buffer size are taken without the echo that checks them (the first chunk, sent alone,
    /// checks them).
    private func linkLimits(total: Int, useMemory: Bool) async throws -> (limits: LinkLimits, remembered: Bool) {
        let transport = client.transport
        let memory = client.configuration.parametersMemory
        var bufferSize = configuration.deviceBufferSize
        var bufferCount: Int?
        var remembered = false
        let learned = await client.linkLimits
        if bufferSize == nil || configuration.pipelineDepth == nil {
            if useMemory, let size = learned.deviceBufferSize, let count = learned.deviceBufferCount {
                // The link (Bluetooth LE does when it connects) or this client asked on this connection.
                bufferSize = bufferSize ?? size
                bufferCount = count
                client.logger.debug("link: the device's buffers as this connection learned them, \(count) x \(size) B (no os params)")
            } else if useMemory, let known = memory?.recall(transport.name) {
                bufferSize = bufferSize ?? known.bufferSize
                bufferCount = known.bufferCount
                remembered = true
                client.logger.debug("link: the device's buffers as remembered, \(known.bufferCount) x \(known.bufferSize) B (no os params)")
            } else {
                do {
                    let parameters = try await client.send(McuMgrParametersRequest(), timeout: configuration.chunkTimeout)
                    bufferSize = bufferSize ?? parameters.bufferSize
                    bufferCount = parameters.bufferCount
                    memory?.remember(
                        .init(bufferSize: parameters.bufferSize, bufferCount: parameters.bufferCount), for: transport.name)
                } catch let error as McuMgrError where error.kind == .device {
                    // Older firmware: no parameters, so one request at a time. Zephyr's default buffer is
                    // assumed for probing only.
                    bufferCount = 1
                }
            }
        }
        if bufferSize == nil {
            // No parameters: find the largest request the device answers instead of guessing. A console
            // sends frames longer than its line buffers in paced bursts, so only the SMP buffer bounds it.
            let overhead = learned.framingOverhead
            let ceiling =
                transport is any McuMgrConsoleLineTransport
                ? LinkProbe.commonBufferSizes[0] - overhead : learned.maximumPacketSize
            let answered = await LinkProbe.largestAnsweredPacket(
                client: client, ceiling: ceiling, overhead: overhead, logger: client.logger)
            bufferSize = answered + overhead
        }
        if let console = transport as? any McuMgrConsoleLineTransport, console.needsConsoleProbe {
            let burst = max(1, console.currentConsoleLines.largestPacketPerBurst - 32)
            if total >= Self.probeThresholdBursts * burst {
                await LinkProbe.run(
                    client: client, transport: console, deviceBufferSize: bufferSize, deviceBufferCount: bufferCount,
                    trustRemembered: remembered,
                    logger: client.logger)
            }
        }
        let limits = await client.refineLinkLimits(
            deviceBufferSize: bufferSize, deviceBufferCount: bufferCount, requestedWindow: configuration.pipelineDepth)
        client.logger.debug("link: \(limits)")
        return (limits, remembered)
    }

    /// The largest data length for a chunk at `offset`, from the request encoded with empty data.
    private func maximumDataLength(at offset: Int, total: Int, messageLimit: Int) throws -> Int {
        let encoded = try request(offset, Data(), total)
        var length = SMPChunkSizer.maximumDataLength(
            messageLimit: messageLimit, sizeWithEmptyData: SMPHeader.size + encoded.count)
        if let cap = configuration.maximumChunkSize { length = min(length, max(1, cap)) }
        guard length > 0 else {
            throw McuMgrError(
                .usage,
                "\(command.name): a message of \(messageLimit) bytes cannot carry any data; raise the link MTU")
        }
        return length
    }

    /// A chunk request encoded; an error names its type.
    static func encode<Request: McuMgrRequest>(_ request: Request) throws -> [UInt8] {
        do {
            return try CBOREncoder().encode(request)
        } catch {
            throw McuMgrError(.usage, "cannot encode \(Request.self): \(error)")
        }
    }

    /// Sends one chunk, resending while the device answers busy.
    private func send(_ payload: [UInt8], timeout: Duration) async throws -> Int {
        var busy = 0
        while true {
            let packet = try await client.send(
                operation: command.operation, group: command.group, command: command.command,
                payload: payload, timeout: timeout, name: command.name)
            do {
                return try deviceOffset(packet)
            } catch let error as McuMgrError where error.returnCode == .busy && busy < configuration.maximumBusyRetries {
                busy += 1
                do {
                    try await client.clock.sleep(for: configuration.busyRetryDelay)
                } catch {
                    throw McuMgrError(.cancelled, "\(command.name) was cancelled")
                }
            }
        }
    }
}
