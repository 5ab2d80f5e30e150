import Foundation
import McuManager
import Testing
import TestSupport

/// `McuMgrClock` over TestSupport's `ManualClock`: the harness of the virtual-time suites. Sleepers wake
/// only when time passes their deadline, in deadline order; nothing here reads the machine's clock.
@Suite("McuMgrClock and ManualClock", .timeLimit(.minutes(10)))
struct McuMgrClockTests {
    @Test func aWrappedClockReadsTimeSinceItWasWrapped() {
        let manual = ManualClock()
        manual.advance(to: .seconds(3))
        let clock = McuMgrClock(manual)
        #expect(clock.now.offset == .zero)
        manual.advance(by: .milliseconds(250))
        #expect(clock.now.offset == .milliseconds(250))
        #expect(clock.now.duration(to: clock.now.advanced(by: .seconds(1))) == .seconds(1))
    }

    @Test func sleepersWakeOnlyWhenTheirDeadlinePassesAndInDeadlineOrder() async throws {
        let manual = ManualClock()
        let clock = McuMgrClock(manual)
        let (woken, sink) = AsyncStream.makeStream(of: Duration.self)
        for deadline: Duration in [.milliseconds(300), .milliseconds(100), .milliseconds(200)] {
            Task {
                try await clock.sleep(until: McuMgrClock.Instant(offset: deadline))
                sink.yield(deadline)
            }
        }
        await manual.waitForSleepers(3)
        #expect(manual.pendingDeadlines == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        manual.advance(to: .milliseconds(99))
        #expect(manual.pendingDeadlines.count == 3, "nobody wakes before a deadline")
        manual.advance(to: .milliseconds(100))
        var order = woken.makeAsyncIterator()
        #expect(await order.next() == .milliseconds(100))
        #expect(manual.pendingDeadlines == [.milliseconds(200), .milliseconds(300)])
        manual.advance(by: .seconds(1))
        let rest = [await order.next(), await order.next()].compactMap { $0 }
        #expect(Set(rest) == [.milliseconds(200), .milliseconds(300)])
        #expect(manual.pendingDeadlines.isEmpty)
    }

    @Test func aSleepUntilAPassedDeadlineReturnsAtOnce() async throws {
        let manual = ManualClock()
        manual.advance(to: .seconds(5))
        try await manual.sleep(until: ManualClock.Instant(offset: .seconds(2)))
        try await McuMgrClock(manual).sleep(for: .zero)
        #expect(manual.pendingDeadlines.isEmpty)
    }

    @Test func cancellingASleeperRemovesItAndThrows() async throws {
        let manual = ManualClock()
        let sleeper = Task { try await manual.sleep(until: ManualClock.Instant(offset: .seconds(1))) }
        await manual.waitForSleeper(until: .seconds(1))
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(manual.pendingDeadlines.isEmpty)
        // Already cancelled: throws without sleeping.
        let late = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await manual.sleep(until: ManualClock.Instant(offset: .seconds(1)))
        }
        await #expect(throws: CancellationError.self) { try await late.value }
        #expect(manual.pendingDeadlines.isEmpty)
    }

    @Test func theContinuousClockIsOneSharedWrapper() {
        let a = McuMgrClock.continuous.now
        let b = McuMgrClock.continuous.now
        #expect(a <= b, "instants of the shared wrapper compare")
    }
}
