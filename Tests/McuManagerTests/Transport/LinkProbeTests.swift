import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// A serial console in front of a simulated device, with Zephyr's `uart_mcumgr` receive limits: a line
/// longer than the device's line buffer, or a burst of more lines than it holds, loses the whole frame
/// (no answer), as on the real native_sim builds.
final class LineBufferedConsoleTransport: McuMgrConsoleLineTransport, @unchecked Sendable {
    let inner: InMemorySimulatorTransport
    let device: LinkLimits.ConsoleLines
    private let state: ManagerTestBox<(lines: LinkLimits.ConsoleLines, probed: Bool, dropped: [Int], delivered: [Int])>
    let fixed: Bool
    /// Firmware without `os params` answers it NOT_SUPPORTED (rc 8).
    let parameters: Bool
    private let handler = ManagerTestBox<(@Sendable (McuMgrTransportEvent) -> Void)?>(nil)
    /// Whether the device dropped the frame sent last; taken with every send (see `driveTime(_:)`).
    private let lastSend = ManagerTestBox(false)
    private let (drops, dropSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))

    init(
        deviceLines: LinkLimits.ConsoleLines, bufferSize: Int, fixed: LinkLimits.ConsoleLines? = nil, parameters: Bool = true,
        memory: ConsoleLineMemory? = nil
    ) {
        self.parameters = parameters
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
            consoleLines: currentConsoleLines, lineGap: .milliseconds(20), framesInFlight: 1,
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
        let lines = currentConsoleLines
        let frame = ConsoleSerialCodec(maximumLineLength: lines.length).encode(packet)
        // Each burst (paced by the transport) must fit the device's line buffers.
        let fits = frame.allSatisfy { $0.count <= device.length } && min(lines.count, frame.count) <= device.count
            && packet.count + 4 <= inner.device.configuration.bufferSize
        lastSend.withValue { dropped in
            dropped = !fits
            state.withValue { fits ? $0.delivered.append(packet.count) : $0.dropped.append(packet.count) }
        }
        guard fits else {
            dropSink.yield()
            return
        }
        if !parameters, let request = try? SMPPacket(decoding: packet), request.header.group == .os,
            request.header.command.rawValue == 6
        {
            var header = request.header
            header.operation = header.operation.response
            let answer = SMPPacket(header: header, payload: CBOR.map([CBORMapEntry(key: "rc", value: .int(8))]).encoded)
            handler.current?(.packet(answer.bytes))
            return
        }
        try inner.send(packet)
    }
}

extension LineBufferedConsoleTransport {
    /// Runs the client's time for an upload over this link: `clock` stands still while the device answers
    /// (an answer here takes no time at all), and moves to the earliest sleeper's deadline only while the
    /// frame sent last was dropped, which only a timeout can end. So a probe that was answered is never
    /// taken for lost however slow the machine, and a dropped one times out at once. A send and the
    /// decision to move time exclude each other: time never moves past a frame the device took.
    /// Returns when `done` is set (then poke the clock with a sleep of any length).
    func driveTime(_ clock: ManualClock, until done: ManagerTestBox<Bool>) async {
        for await _ in drops {
            while !done.current {
                await clock.waitForSleepers { !$0.isEmpty || done.current }
                let waiting = lastSend.withValue { dropped -> Bool in
                    guard dropped, !done.current, let next = clock.pendingDeadlines.first else { return false }
                    clock.advance(to: next)
                    return true
                }
                guard waiting else { break }
                await Task.yield()
            }
            if done.current { return }
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
