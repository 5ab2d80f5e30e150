import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// The upgrade's waits in virtual time: the swap wait after the reset, the reconnect retries and the
/// reconnect deadline, against the in-memory simulated device on the same manual clock.
@Suite("FirmwareUpgradeManager: swap wait and reconnect retries in virtual time", .timeLimit(.minutes(10)))
struct FirmwareUpgradeTimingTests {
    /// A manager on a simulated device whose reconnection strategy reports each attempt's virtual time
    /// and fails the first `failures` attempts.
    struct Rig {
        let clock = ManualClock()
        let device = SimulatedDevice()
        let manager: FirmwareUpgradeManager
        let attempts: AsyncStream<Duration>

        init(failures: Int) {
            let clock = self.clock
            let link = InMemorySimulatorTransport(device: device, clock: { clock.instant })
            let client = McuMgrClient(transport: link, clock: McuMgrClock(clock))
            let (attempts, sink) = AsyncStream.makeStream(of: Duration.self)
            self.attempts = attempts
            let count = LockedValue(0)
            let reconnection = FirmwareUpgradeReconnection { previous in
                let attempt = count.withValue { n -> Int in
                    n += 1
                    return n
                }
                sink.yield(clock.elapsed)
                if attempt <= failures { throw McuMgrError(.transport, "not back yet (attempt \(attempt))") }
                return previous
            }
            manager = FirmwareUpgradeManager(client: client, reconnection: reconnection, options: DFUFixtures.options)
        }

        /// Test-and-confirm with a 5 s swap, retries 1 s apart, for at most `reconnectTimeout`.
        func upgrade(reconnectTimeout: Duration) -> Task<FirmwareUpgradeResult, any Error> {
            let configuration = DFUFixtures.configuration(.testAndConfirm) {
                $0.estimatedSwapTime = .seconds(5)
                $0.retryInterval = .seconds(1)
                $0.reconnectTimeout = reconnectTimeout
            }
            let manager = self.manager
            return Task { try await manager.upgrade(images: [DFUFixtures.image(size: 4096)], configuration: configuration) }
        }

        /// Waits until the manager's timer is the only sleeper and set for `at`, checks that nothing
        /// happens a millisecond before, then advances to `at`.
        func advanceToTimer(at: Duration) async {
            await clock.waitForSleepers { $0 == [at] }
            clock.advance(to: at - .milliseconds(1))
            #expect(clock.pendingDeadlines == [at], "nothing fires before \(at)")
            clock.advance(to: at)
        }
    }

    @Test func theManagerReconnectsWhenTheSwapTimeEndsAndRetriesEveryRetryInterval() async throws {
        let rig = Rig(failures: 2)
        var attempts = rig.attempts.makeAsyncIterator()
        let upgrade = rig.upgrade(reconnectTimeout: .seconds(20))
        // Upload, test mark and reset take no virtual time: the reset is at 0, the swap wait ends at 5 s.
        for at: Duration in [.seconds(5), .seconds(6), .seconds(7)] {
            await rig.advanceToTimer(at: at)
            #expect(await attempts.next() == at)
        }
        let result = try await upgrade.value
        #expect(result.summary.uploadedImages == [0])
        #expect(result.reconnectDuration == .seconds(7), "from the reset (0 s) to the first answer after it (7 s)")
        #expect(result.duration == .seconds(7))
        #expect(rig.device.resetCount == 1)
    }

    @Test func theManagerGivesUpExactlyAtTheReconnectDeadline() async throws {
        let rig = Rig(failures: .max)
        var attempts = rig.attempts.makeAsyncIterator()
        let upgrade = rig.upgrade(reconnectTimeout: .seconds(3))
        for at: Duration in [.seconds(5), .seconds(6), .seconds(7)] {
            await rig.advanceToTimer(at: at)
            #expect(await attempts.next() == at)
        }
        // The deadline is 3 s after the swap wait: 8 s, where the next retry would have been.
        await rig.advanceToTimer(at: .seconds(8))
        let error = await #expect(throws: McuMgrError.self) { try await upgrade.value }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("reconnect") == true, "\(error?.message ?? "")")
        #expect(rig.clock.elapsed == .seconds(8))
    }
}

extension FirmwareUpgradeTimingTests {
    /// Forwards to a transport and records when (virtual time) each request went out.
    final class TimedLink: McuMgrTransport, @unchecked Sendable {
        let inner: InMemorySimulatorTransport
        let clock: ManualClock
        let sent = LockedValue<[(at: Duration, header: SMPHeader)]>([])
        init(_ inner: InMemorySimulatorTransport, clock: ManualClock) {
            self.inner = inner
            self.clock = clock
        }
        var name: String { inner.name }
        var linkLimits: LinkLimits { inner.linkLimits }
        func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws { try await inner.open(handler) }
        func send(_ packet: [UInt8]) throws {
            if let header = try? SMPHeader(decoding: packet) { sent.withValue { $0.append((clock.elapsed, header)) } }
            try inner.send(packet)
        }
        func close() async { await inner.close() }
        /// When the image list was asked for.
        var imageListReads: [Duration] {
            sent.value.filter { $0.header.group == .image && $0.header.command.rawValue == 0 && $0.header.operation == .read }
                .map(\.at)
        }
    }

    @Test func aNewLinkAfterTheResetRunsOnTheSameClockAndItsProbesTimeOutAndRepeatOnIt() async throws {
        let clock = ManualClock()
        let device = SimulatedDevice()
        let first = InMemorySimulatorTransport(device: device, clock: { clock.instant })
        // The device is back on another link (a re-enumerated port), silent at first: still booting.
        let second = TimedLink(
            InMemorySimulatorTransport(device: device, options: .init(silent: true), clock: { clock.instant }), clock: clock)
        let client = McuMgrClient(transport: first, clock: McuMgrClock(clock))
        let manager = FirmwareUpgradeManager(
            client: client, reconnection: .factory { second }, options: DFUFixtures.options)  // probes time out after 300 ms
        let configuration = DFUFixtures.configuration(.testAndConfirm) {
            $0.estimatedSwapTime = .seconds(5)
            $0.retryInterval = .seconds(1)
            $0.reconnectTimeout = .seconds(20)
        }
        let upgrade = Task { try await manager.upgrade(images: [DFUFixtures.image(size: 4096)], configuration: configuration) }
        // The swap wait (5 s); the first probe on the new link (5 s) times out at 5.3 s, the next goes
        // out a retry interval later (6.3 s), times out at 6.6 s; the one at 7.6 s is answered.
        for at: Duration in [.seconds(5), .milliseconds(5_300), .milliseconds(6_300), .milliseconds(6_600)] {
            await clock.waitForSleepers { $0.first == at }
            clock.advance(to: at - .milliseconds(1))
            #expect(clock.pendingDeadlines.first == at, "nothing fires before \(at)")
            clock.advance(to: at)
        }
        await clock.waitForSleepers { $0.first == .milliseconds(7_600) }
        // Both probes reached the silent device before it starts answering (the link hands requests over
        // on its own queue).
        #expect(await waitUntil { second.inner.handledRequests == 2 })
        second.inner.options.silent = false
        clock.advance(to: .milliseconds(7_600))
        let result = try await upgrade.value
        #expect(second.imageListReads.prefix(3) == [.seconds(5), .milliseconds(6_300), .milliseconds(7_600)])
        #expect(result.reconnectDuration == .milliseconds(7_600))
        #expect(device.slot(holding: DFUFixtures.image(size: 4096).hash)?.confirmed == true)
    }
}

/// `FirmwareUpgradeReconnection.reopen(waitingForPath:)` polling a path in virtual time.
@Suite("FirmwareUpgradeReconnection: waiting for a path in virtual time", .timeLimit(.minutes(10)))
struct FirmwareUpgradeReconnectionTimingTests {
    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("reconnect-\(UUID().uuidString)").path
    }

    @Test func thePathIsCheckedEveryPollIntervalAndTheTransportReturnedOnceItIsThere() async throws {
        let clock = ManualClock()
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reconnection = FirmwareUpgradeReconnection.reopen(
            waitingForPath: path, pollInterval: .milliseconds(50), attemptDuration: .seconds(1), clock: McuMgrClock(clock))
        let previous = InMemorySimulatorTransport()
        let attempt = Task { try await reconnection.transport(previous) }
        await clock.waitForSleepers { $0 == [.milliseconds(50)] }
        clock.advance(to: .milliseconds(50))
        await clock.waitForSleepers { $0 == [.milliseconds(100)] }
        // The board comes back between two polls: found by the next one, at 100 ms.
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        clock.advance(to: .milliseconds(100))
        let transport = try await attempt.value
        #expect(transport === previous)
        #expect(clock.pendingDeadlines.isEmpty)
    }

    @Test func aPathThatDoesNotComeBackFailsAtTheEndOfTheAttempt() async throws {
        let clock = ManualClock()
        let path = Self.temporaryPath()
        let reconnection = FirmwareUpgradeReconnection.reopen(
            waitingForPath: path, pollInterval: .milliseconds(80), attemptDuration: .milliseconds(200),
            clock: McuMgrClock(clock))
        let attempt = Task { try await reconnection.transport(InMemorySimulatorTransport()) }
        // Polls at 0, 80 and 160 ms, and a last one at the deadline (200 ms), not at 240 ms.
        for at: Duration in [.milliseconds(80), .milliseconds(160), .milliseconds(200)] {
            await clock.waitForSleepers { $0 == [at] }
            clock.advance(to: at)
        }
        let error = await #expect(throws: McuMgrError.self) { try await attempt.value }
        #expect(error?.message == "\(path) is not there (yet): the board has not come back after the reset")
    }
}
