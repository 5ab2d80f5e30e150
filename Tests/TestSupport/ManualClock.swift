import Foundation
import McuMgrCore

/// A clock that only moves when the test moves it: `sleep` suspends until ``advance(to:)`` or
/// ``advance(by:)`` passes the sleeper's deadline. Code under test takes it where it takes a
/// `Clock` (wrapped as `McuMgrClock(manual)` in the runtime); the test waits until the code sleeps
/// (``waitForSleepers(_:)``, ``waitForSleeper(until:)``), advances, and asserts what happened at exactly
/// that virtual time. Nothing reads the machine's clock, so the outcome does not depend on its speed.
///
/// Time starts at zero. Sleepers whose deadline has passed are woken in deadline order by the advance
/// that passes it; a sleep until a deadline already passed returns at once. A cancelled sleeper leaves
/// the list and throws `CancellationError`.
public final class ManualClock: Clock, @unchecked Sendable {
    /// A point in virtual time: how long after the start.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Waiter {
        var id: UInt64
        var condition: @Sendable ([Duration]) -> Bool
        var continuation: CheckedContinuation<Void, Never>
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private var sleepers: [UInt64: Sleeper] = [:]
    private var nextSleeper: UInt64 = 0
    private var waiters: [Waiter] = []
    private var nextWaiter: UInt64 = 0

    public init() {}

    public var now: Instant { lock.withLock { current } }

    /// Time since the start.
    public var elapsed: Duration { now.offset }

    /// Time since the start as the core's instant (a simulated device's clock, a pure machine's "now").
    public var instant: SMPInstant { SMPInstant(nanoseconds: elapsed.nanosecondsClamped) }

    public var minimumResolution: Duration { .zero }

    /// How many sleeps have begun on this clock so far (a wait that re-arms its timer over and over
    /// shows here).
    public var sleepsBegun: Int { lock.withLock { Int(nextSleeper) } }

    /// The deadlines of the tasks sleeping now (as time since the start), earliest first.
    public var pendingDeadlines: [Duration] {
        lock.withLock { sleepers.values.map(\.deadline.offset).sorted() }
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = lock.withLock { () -> UInt64 in
            defer { nextSleeper += 1 }
            return nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = lock.withLock { () -> Result<Void, any Error>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= current { return .success(()) }
                    sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome {
                    continuation.resume(with: outcome)
                } else {
                    notifyWaiters()
                }
            }
        } onCancel: {
            let sleeper = lock.withLock { sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
            if sleeper != nil { notifyWaiters() }
        }
    }

    /// Moves time forward by `duration` and wakes the sleepers whose deadline it passes.
    public func advance(by duration: Duration) {
        advance(to: now.offset + duration)
    }

    /// Moves time to `offset` after the start (never back) and wakes the sleepers whose deadline it
    /// passes, earliest first. Their tasks run afterwards, concurrently with the caller: wait for what
    /// they do (a packet, the next sleeper) before asserting.
    public func advance(to offset: Duration) {
        let due = lock.withLock { () -> [Sleeper] in
            current = max(current, Instant(offset: offset))
            let due = sleepers.filter { $0.value.deadline <= current }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }
            for (id, _) in due { sleepers[id] = nil }
            return due.map(\.value)
        }
        for sleeper in due { sleeper.continuation.resume() }
        if !due.isEmpty { notifyWaiters() }
    }

    /// Returns once at least `count` tasks sleep on this clock.
    public func waitForSleepers(_ count: Int) async {
        await waitForSleepers { $0.count >= count }
    }

    /// Returns once a task sleeps until exactly `offset` after the start.
    public func waitForSleeper(until offset: Duration) async {
        await waitForSleepers { $0.contains(offset) }
    }

    /// Returns once the deadlines of the sleeping tasks (time since the start, earliest first) satisfy
    /// `condition`, or when the waiting task is cancelled. A condition that never holds would hang the
    /// test: give the suite a `.timeLimit`, which cancels the test, and this wait returns (the test's
    /// expectations then fail instead of the whole run hanging). Ten minutes: a hang ends before
    /// test.sh's 20-minute deadline for the suite names it, and a starved machine never reaches it (one
    /// minute did: virtual-time tests took 126 s of wall time beside a build, guests and stress-ng).
    public func waitForSleepers(where condition: @escaping @Sendable ([Duration]) -> Bool) async {
        let id = lock.withLock { () -> UInt64 in
            defer { nextWaiter += 1 }
            return nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let satisfied = lock.withLock { () -> Bool in
                    if Task.isCancelled || condition(sleepers.values.map(\.deadline.offset).sorted()) { return true }
                    waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                    return false
                }
                if satisfied { continuation.resume() }
            }
        } onCancel: {
            let waiter = lock.withLock { () -> Waiter? in
                guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return waiters.remove(at: index)
            }
            waiter?.continuation.resume()
        }
    }

    private func notifyWaiters() {
        let ready = lock.withLock { () -> [Waiter] in
            let deadlines = sleepers.values.map(\.deadline.offset).sorted()
            var ready: [Waiter] = []
            waiters.removeAll { waiter in
                guard waiter.condition(deadlines) else { return false }
                ready.append(waiter)
                return true
            }
            return ready
        }
        for waiter in ready { waiter.continuation.resume() }
    }
}
