import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// A serial console in front of a simulated device, with Zephyr's `uart_mcumgr` receive limits: a line
/// longer than the device's line buffer, or a burst of more lines than it holds, loses the whole frame
/// (no answer), as on the real native_sim builds. Frames written together (`holdWrites`) are one burst:
/// those whose lines no longer fit are lost. A device may answer echoes late (`lateEchoesAbove`): it
/// takes them and answers only when the next frame arrives (a loaded machine, a device busy elsewhere).
final class LineBufferedConsoleTransport: McuMgrConsoleLineTransport, @unchecked Sendable {
    let inner: InMemorySimulatorTransport
    let device: LinkLimits.ConsoleLines
    private let state: ManagerTestBox<(lines: LinkLimits.ConsoleLines, probed: Bool, dropped: [Int], delivered: [Int])>
    let fixed: Bool
    /// Firmware without `os params` answers it NOT_SUPPORTED (rc 8).
    let parameters: Bool
    /// Echo requests longer than this are answered only when another frame arrives (nil: at once).
    let lateEchoesAbove: Int?
    /// Requests in flight follow the line buffers (a build that reads its console as bytes come).
    let framesFollowLines: Bool
    /// Taken echoes not yet handed to the device, answered before the next frame (`lateEchoesAbove`).
    private let late = ManagerTestBox<[[UInt8]]>([])
    /// Frames held to go in one write, and how many more are awaited.
    private let batch = ManagerTestBox<(remaining: Int, packets: [[UInt8]])?>(nil)
    private let handler = ManagerTestBox<(@Sendable (McuMgrTransportEvent) -> Void)?>(nil)
    /// Whether the frame sent last waits for a timer (dropped, or answered late); set with every send,
    /// consumed by the advance of time (see `driveTime(_:until:)`).
    private let lastSend = ManagerTestBox(false)
    private let (drops, dropSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    init(
        deviceLines: LinkLimits.ConsoleLines, bufferSize: Int, fixed: LinkLimits.ConsoleLines? = nil, parameters: Bool = true,
        memory: ConsoleLineMemory? = nil, lateEchoesAbove: Int? = nil, framesFollowLines: Bool = false
    ) {
        self.parameters = parameters
        self.lateEchoesAbove = lateEchoesAbove
        self.framesFollowLines = framesFollowLines
        self.memory = memory
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = bufferSize
        configuration.mountPoint = "/lfs1"
        inner = InMemorySimulatorTransport(device: SimulatedDevice(configuration: configuration))
        device = deviceLines
        self.fixed = fixed != nil
        state = ManagerTestBox((fixed ?? .zephyrDefault, false, [], []))
    }

    var name: String { "serial:line-buffered" }
    var linkLimits: LinkLimits {
        LinkLimits(
            maximumPacketSize: currentConsoleLines.largestPacketPerFrame, framingOverhead: 4,
            consoleLines: currentConsoleLines, lineGap: .milliseconds(20),
            framesInFlight: framesFollowLines ? currentConsoleLines.count : 1, framesFollowConsoleLines: framesFollowLines,
            session: SMPSessionConfiguration(window: 1, adaptiveRetransmit: true))
    }

    var currentConsoleLines: LinkLimits.ConsoleLines { state.current.lines }
    /// Where the client that drives this link keeps learned line limits (its `consoleLineMemory`).
    let memory: ConsoleLineMemory?
    var needsConsoleProbe: Bool { !fixed && !state.current.probed }
    func learnConsoleLines(_ lines: LinkLimits.ConsoleLines, final: Bool) {
        state.withValue {
            $0.lines = lines
            if final { $0.probed = true }
        }
    }
    /// Wakes `driveTime` (to see that it is done).
    func pokeDrops() { dropSink.yield() }
    /// Sizes of the packets the device never saw.
    var dropped: [Int] { state.current.dropped }
    /// Sizes of the packets the device got.
    var delivered: [Int] { state.current.delivered }

    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        self.handler.withValue { $0 = handler }
        try await inner.open(handler)
    }
    func close() async { await inner.close() }

    func send(_ packet: [UInt8]) throws {
        let full = batch.withValue { held -> [[UInt8]]? in
            guard var current = held else { return nil }
            current.packets.append(packet)
            current.remaining -= 1
            held = current.remaining > 0 ? current : nil
            return current.remaining > 0 ? [] : current.packets
        }
        guard let full else {
            try deliver([packet])
            return
        }
        if !full.isEmpty { try deliver(full) }
    }

    func holdWrites(count: Int) { batch.withValue { $0 = count > 0 ? (count, []) : nil } }
    func releaseWrites() {
        let rest = batch.withValue { held -> [[UInt8]] in
            defer { held = nil }
            return held?.packets ?? []
        }
        if !rest.isEmpty { try? deliver(rest) }
    }

    /// Frames that reach the device in one burst (one frame: its first burst, paced by the transport).
    private func deliver(_ packets: [[UInt8]]) throws {
        let lines = currentConsoleLines
        var linesInBurst = 0
        for (index, packet) in packets.enumerated() {
            let frame = ConsoleSerialCodec(maximumLineLength: lines.length).encode(packet)
            linesInBurst += packets.count == 1 ? min(lines.count, frame.count) : frame.count
            // The burst must fit the device's line buffers.
            let fits = frame.allSatisfy { $0.count <= device.length } && linesInBurst <= device.count
                && packet.count + 4 <= inner.device.configuration.bufferSize
            let request = try? SMPPacket(decoding: packet)
            let isEcho = request.map { $0.header.group == .os && $0.header.command.rawValue == 0 } ?? false
            let answersLate = fits && isEcho && lateEchoesAbove.map { packet.count > $0 } == true
            lastSend.withValue { waiting in
                // Time may move when any frame of the burst is waiting.
                waiting = (index > 0 && waiting) || !fits || answersLate
                state.withValue { fits ? $0.delivered.append(packet.count) : $0.dropped.append(packet.count) }
            }
            guard fits else {
                dropSink.yield()
                continue
            }
            if answersLate {
                late.withValue { $0.append(packet) }
                dropSink.yield()
                continue
            }
            // The device answers what it took earlier first.
            for taken in late.withValue({ held in defer { held = [] }; return held }) { try inner.send(taken) }
            if !parameters, let request, request.header.group == .os, request.header.command.rawValue == 6 {
                var header = request.header
                header.operation = header.operation.response
                let answer = SMPPacket(header: header, payload: CBOR.map([CBORMapEntry(key: "rc", value: .int(8))]).encoded)
                handler.current?(.packet(answer.bytes))
                continue
            }
            try inner.send(packet)
        }
    }
}

extension LineBufferedConsoleTransport {
    /// Runs the client's time for an upload over this link: `clock` stands still while the device answers
    /// (an answer here takes no time at all), and moves to the earliest sleeper's deadline once for each
    /// frame sent that was dropped or awaits its late answer: only a timer (the probe's wait, then the
    /// echo it sends behind the frame; a resend; a timeout) ends that. So a probe that was answered is
    /// never taken for lost however slow the machine, and a dropped one is settled at once. A send and
    /// the decision to move time exclude each other, and time moves once per such frame: never past a
    /// frame the device took, nor past the echo sent behind a late one.
    /// Returns when `done` is set (then poke the clock with a sleep of any length).
    func driveTime(_ clock: ManualClock, until done: ManagerTestBox<Bool>) async {
        for await _ in drops {
            if done.current { return }
            await clock.waitForSleepers { !$0.isEmpty || done.current }
            lastSend.withValue { waiting in
                guard waiting, !done.current, let next = clock.pendingDeadlines.first else { return }
                clock.advance(to: next)
                waiting = false
            }
        }
    }
}

@Suite("Link probe: console line limits learned from the device", .timeLimit(.minutes(10)))
struct LinkProbeTests {
    /// An upload in virtual time (`driveTime`): the probe waits a few round trips for each answer, a
    /// margin of tens of milliseconds that a loaded machine missed on the wall clock (it then learned 2
    /// lines where the device holds 3).
    static func upload(_ size: Int, over transport: LineBufferedConsoleTransport) async throws -> FileSystemManager.TransferResult {
        let clock = ManualClock()
        let done = ManagerTestBox(false)
        let driver = Task { await transport.driveTime(clock, until: done) }
        defer {
            done.withValue { $0 = true }
            transport.pokeDrops()
            let poke = Task { try? await clock.sleep(for: .seconds(1)) }
            Task {
                await driver.value
                poke.cancel()
            }
        }
        return try await upload(size, over: transport, clock: McuMgrClock(clock))
    }

    static func upload(
        _ size: Int, over transport: LineBufferedConsoleTransport, clock: McuMgrClock
    ) async throws -> FileSystemManager.TransferResult {
        let client = McuMgrClient(
            transport: transport, configuration: .init(timeout: .seconds(5), consoleLineMemory: transport.memory), clock: clock)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString).bin")
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) }).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let result = try await FileSystemManager(client: client).upload(url, to: "/lfs1/probe.bin")
        await client.close()
        return result
    }

    @Test func zephyrDefaultsStayAndTheUploadLosesNothing() async throws {
        let transport = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 384)
        let result = try await Self.upload(4096, over: transport)
        #expect(result.bytes == 4096)
        #expect(transport.currentConsoleLines == .zephyrDefault)
        // One longer line and one longer burst were tried and lost; nothing else.
        #expect(transport.dropped.count == 2, "dropped: \(transport.dropped)")
        // Three frames of two bursts were measured against one burst; answered at once here, they do
        // not pay, and the chunks go in one burst each.
        #expect(transport.delivered.filter { $0 > 182 } == [368, 368, 368], "\(transport.delivered)")
    }

    @Test func pacedFramesRememberedAreCheckedWithOnePacedFrameAndCarryTheChunks() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("lines-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let memory = ConsoleLineMemory(file: file)
        let paced = LinkLimits.ConsoleLines.zephyrDefault.withBurstsPerFrame(2)
        let transport = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 384, memory: memory)
        memory.remember(paced, deviceBufferSize: 384, for: transport.name)
        #expect(memory.recall(transport.name, deviceBufferSize: 384) == paced)
        #expect(try String(contentsOf: file, encoding: .utf8).contains("\"bursts\""))
        // In virtual time that never moves (see whatWasLearnedIsRememberedForTheNextConnection).
        let result = try await Self.upload(4096, over: transport, clock: McuMgrClock(ManualClock()))
        #expect(result.bytes == 4096)
        #expect(transport.dropped.isEmpty, "\(transport.dropped)")
        #expect(transport.currentConsoleLines == paced)
        #expect(transport.delivered.max() == 368, "chunks in frames of two bursts: \(transport.delivered)")
        #expect(!transport.delivered.contains(64), "no first probe: \(transport.delivered)")
        // Limits of one burst are stored without the field, and a file without it reads as one burst.
        memory.remember(.zephyrDefault, deviceBufferSize: 384, for: transport.name)
        #expect(try !String(contentsOf: file, encoding: .utf8).contains("\"bursts\""))
        #expect(memory.recall(transport.name, deviceBufferSize: 384) == .zephyrDefault)
    }

    @Test func longerLinesAndMoreLinesAreLearnedWithinTheSMPBuffer() async throws {
        let transport = LineBufferedConsoleTransport(deviceLines: .init(length: 511, count: 3), bufferSize: 1024)
        _ = try await Self.upload(4096, over: transport)
        #expect(transport.currentConsoleLines == .init(length: 511, count: 3))
        #expect(transport.dropped.count == 2, "a whole buffer in 12 short lines and the 1023-byte line are lost: \(transport.dropped)")
        #expect(transport.delivered.max() == 1020, "chunks fill the SMP buffer less length and CRC")
    }

    @Test func aDeviceThatHoldsAWholeBufferOfShortLinesIsSettledByOneProbe() async throws {
        // MCUboot's serial recovery on mps2 takes 12 lines of 127 bytes at once.
        let transport = LineBufferedConsoleTransport(deviceLines: .init(length: 127, count: 12), bufferSize: 1024)
        _ = try await Self.upload(4096, over: transport)
        #expect(transport.currentConsoleLines == .init(length: 127, count: 12))
        #expect(transport.dropped.isEmpty, "\(transport.dropped)")
    }

    @Test func aDeviceWithManyLinesButShortOnesGetsMoreLines() async throws {
        let transport = LineBufferedConsoleTransport(deviceLines: .init(length: 127, count: 32), bufferSize: 2048)
        _ = try await Self.upload(4096, over: transport)
        let learned = transport.currentConsoleLines
        #expect(learned.length == 127)
        #expect(learned.count == learned.lines(forPacket: 2044))
        #expect(transport.delivered.max() == 2044)
    }

    /// A probe's verdict does not hang on the machine's speed: every probe here is answered only when the
    /// next frame arrives, long after the probe's wait. The echo sent behind each one brings the answer
    /// first, so what the device takes is still learned; what it dropped is answered by the echo alone.
    @Test func lateAnswersCountAsTakenAndTheEchoBehindADroppedProbeSettlesIt() async throws {
        let transport = LineBufferedConsoleTransport(
            deviceLines: .init(length: 511, count: 3), bufferSize: 1024, lateEchoesAbove: 182)
        let result = try await Self.upload(4096, over: transport)
        #expect(result.bytes == 4096)
        #expect(transport.currentConsoleLines == .init(length: 511, count: 3))
        // The same two probes lost as when the device answers at once.
        #expect(transport.dropped.count == 2, "\(transport.dropped)")
        // A 64-byte echo behind each probe (the first of the 64-byte packets measured the round trip).
        #expect(transport.delivered.filter { $0 == 64 }.count >= 4, "\(transport.delivered)")
        #expect(transport.delivered.max() == 1020)
    }

    /// Zephyr's native_sim serial-fs build (32 line buffers of 512 B, 4 SMP buffers of 1 KiB): three whole
    /// frames at once in lines of 127 B overflow the lines (the third is lost), in lines of 511 B they fit,
    /// and transfers keep three frames in flight. A loaded machine made all three answers late, and the
    /// probe learned one frame in flight (flake-check at 6d9a52a); answers that come before the echo behind
    /// them count however late.
    @Test(arguments: [nil, 182])
    func threeWholeFramesAtOnceAreLearnedWhetherAnsweredAtOnceOrLate(late: Int?) async throws {
        let transport = LineBufferedConsoleTransport(
            deviceLines: .init(length: 511, count: 32), bufferSize: 1024, lateEchoesAbove: late, framesFollowLines: true)
        let result = try await Self.upload(4096, over: transport)
        #expect(result.bytes == 4096)
        #expect(transport.currentConsoleLines == .init(length: 511, count: 9))
        #expect(transport.linkLimits.framesInFlight(forPacket: 1020) == 3)
        // Only the third frame of 12 lines of 127 B each was lost.
        #expect(transport.dropped == [1020], "\(transport.dropped)")
    }

    @Test func smallUploadsAndFixedLimitsSendNoProbe() async throws {
        let small = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 384)
        _ = try await Self.upload(1000, over: small)
        #expect(small.dropped.isEmpty)
        #expect(small.needsConsoleProbe, "a small upload leaves probing for a later, longer one")

        let fixed = LineBufferedConsoleTransport(
            deviceLines: .init(length: 511, count: 4), bufferSize: 1024, fixed: .init(length: 255, count: 2))
        _ = try await Self.upload(4096, over: fixed)
        #expect(fixed.dropped.isEmpty)
        #expect(fixed.currentConsoleLines == .init(length: 255, count: 2))
    }

    @Test func withoutParametersTheLargestAnsweredPacketIsFoundFirst() async throws {
        // A device with a 128-byte SMP buffer that does not tell it: 182-byte frames would be lost.
        let transport = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 128, parameters: false)
        let result = try await Self.upload(4096, over: transport)
        #expect(result.bytes == 4096)
        #expect(transport.delivered.max().map { $0 + 4 <= 128 } == true, "\(transport.delivered)")
        // 2044, 1020, 508, 380 and 252 bytes are tried and lost before 124 is answered.
        #expect(transport.dropped.count == 5, "\(transport.dropped)")
    }

    @Test func whatWasLearnedIsRememberedForTheNextConnection() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("lines-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let memory = ConsoleLineMemory(file: file)
        let first = LineBufferedConsoleTransport(deviceLines: .init(length: 511, count: 3), bufferSize: 1024, memory: memory)
        _ = try await Self.upload(4096, over: first)
        #expect(memory.recall(first.name) == .init(length: 511, count: 3))
        // The next connection checks the remembered limits with one frame and loses nothing: timed by the
        // round trip of `os params`, without the two echoes (64 and 182 bytes) a first probe measures.
        // In virtual time that never moves: no answer can be late (on a loaded machine one was, and the
        // check failed), and a frame lost would hang the upload until the suite's time limit.
        let second = LineBufferedConsoleTransport(deviceLines: .init(length: 511, count: 3), bufferSize: 1024, memory: memory)
        _ = try await Self.upload(4096, over: second, clock: McuMgrClock(ManualClock()))
        #expect(second.dropped.isEmpty, "\(second.dropped)")
        #expect(!second.delivered.contains(64) && !second.delivered.contains(182), "\(second.delivered)")
        #expect(second.currentConsoleLines == .init(length: 511, count: 3))
        // Another board on the same port with smaller buffers: the check fails and the probe runs again.
        let other = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 384, memory: memory)
        _ = try await Self.upload(4096, over: other)
        #expect(other.currentConsoleLines == .zephyrDefault)
        #expect(memory.recall(other.name) == .zephyrDefault)
        // A device that takes only the defaults is not probed again.
        let again = LineBufferedConsoleTransport(deviceLines: .zephyrDefault, bufferSize: 384, memory: memory)
        _ = try await Self.upload(4096, over: again)
        #expect(again.dropped.isEmpty)
        // A board that takes more, on the same port, with another SMP buffer size: probed afresh, not held
        // to the defaults the board before it took.
        let bigger = LineBufferedConsoleTransport(deviceLines: .init(length: 511, count: 3), bufferSize: 1024, memory: memory)
        _ = try await Self.upload(4096, over: bigger)
        #expect(bigger.currentConsoleLines == .init(length: 511, count: 3))
        #expect(memory.recall(bigger.name, deviceBufferSize: 1024) == .init(length: 511, count: 3))
        #expect(memory.recall(bigger.name, deviceBufferSize: 384) == nil)
    }

    /// Zephyr's serial buffer configurations (receive lines from 2 x 128 B to 32 x 512 B, SMP buffers
    /// from 96 to 2048 B, with and without `os params`): an upload with default options completes and
    /// no frame the device gets exceeds what it holds.
    static let configurations: [(lines: LinkLimits.ConsoleLines, buffer: Int, parameters: Bool)] = {
        var all: [(LinkLimits.ConsoleLines, Int, Bool)] = []
        for lines in [(128, 2), (128, 4), (256, 8), (512, 2), (512, 32)] {
            for buffer in [96, 384, 1024, 2048] {
                for parameters in [true, false] {
                    all.append((LinkLimits.ConsoleLines(length: lines.0 - 1, count: lines.1), buffer, parameters))
                }
            }
        }
        return all
    }()

    @Test(arguments: 0..<40)
    func everyZephyrBufferConfigurationTakesAnUploadWithDefaultOptions(index: Int) async throws {
        let configuration = Self.configurations[index]
        let transport = LineBufferedConsoleTransport(
            deviceLines: configuration.lines, bufferSize: configuration.buffer, parameters: configuration.parameters)
        let result = try await Self.upload(4096, over: transport)
        #expect(result.bytes == 4096, "\(configuration)")
        let learned = transport.currentConsoleLines
        #expect(learned.length <= configuration.lines.length && learned.count <= configuration.lines.count, "\(configuration): \(learned)")
        #expect(transport.delivered.allSatisfy { $0 + 4 <= configuration.buffer }, "\(configuration)")
    }

    @Test func echoPayloadsHaveTheAskedPacketSize() throws {
        for size in [12, 24, 30, 40, 100, 182, 276, 377, 1020, 2044, 70_000] {
            let payload = LinkProbe.echoPayload(packetSize: size)
            let total = SMPHeader.size + payload.count
            #expect(total <= size && total >= size - 2, "\(size) -> \(total)")
            guard case .map(let entries) = try CBOR(decoding: payload), case .text = entries.first?.value else {
                Issue.record("not an echo map")
                return
            }
        }
    }
}

/// A device that answers `os params` and then goes silent costs two `--timeout`s (the lost chunk is
/// sent once more), not four chunk timeouts in a row (issue: 160 s whatever --timeout said).
@Suite struct SilentAfterParametersTests {
    @Test func anUploadToADeviceThatFallsSilentEndsAfterOneTimeoutWithWhereItStands() async throws {
        let rig = ManagerRig(timeout: .seconds(1))
        // Parameters answered; every file write lost.
        rig.tap.rule.withValue { rule in
            rule = { packet in packet.header.group == .fileSystem && packet.header.command.rawValue == 0 ? .drop : .forward(packet.bytes) }
        }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("silent-\(UUID().uuidString).bin")
        try Data(repeating: 7, count: 8192).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let configuration = UploadConfiguration(firstChunkTimeout: .seconds(1), chunkTimeout: .seconds(1))
        await #expect {
            _ = try await FileSystemManager(client: rig.client).upload(url, to: "/lfs1/silent.bin", configuration: configuration)
        } throws: { error in
            guard let error = error as? McuMgrError else { return false }
            return error.kind == .timeout && error.message.contains("offset 0 of 8192")
                && error.message.contains("run the same command again")
        }
        // Before, the lost chunk was tried four times in a row, each waiting out its timeout; now twice.
        let writes = rig.tap.sent.filter { $0.header.group == .fileSystem && $0.header.command.rawValue == 0 }
        #expect(writes.count == 2, "\(writes.count) writes")
    }
}
