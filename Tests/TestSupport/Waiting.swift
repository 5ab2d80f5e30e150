import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waits until `condition` holds, checking it every `interval`, for at most `timeout`. Tests wait for
/// what they need (a ready line, a path, an answer, a process state) instead of sleeping a fixed time:
/// on an idle machine they go on at once, on a loaded one they wait as long as it takes, up to the
/// deadline.
/// The default deadline is generous (2 minutes): it only stops a test that would hang, and a loaded
/// machine running the whole suite in parallel took over 10 s to reach an upgrade's first pause.
/// - Returns: whether the condition held (checked once more at the deadline).
@discardableResult
public func waitUntil(
    timeout: Duration = .seconds(120), interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Held while a test creates a child's pipes, starts it and closes the parent's write ends: a child
/// that another test starts in between would inherit those ends and keep the pipes open (its reader
/// then waits for that child, not for its own). Seen under a whole-suite run: `smp-sim --count 0`, a
/// usage error that exits at once, left no output and no exit within 45 s.
public let childSpawnLock = NSLock()

extension Process {
    /// Starts the process holding `childSpawnLock`, and runs `afterStart` (closing the parent's copies of
    /// the child's output ends) before letting go: no other test's child inherits those ends, and no two
    /// children start at once (a whole-suite run once crashed inside Foundation's `Process.run()` while
    /// another test started a child).
    public func runHoldingSpawnLock(afterStart: () -> Void = {}) throws {
        childSpawnLock.lock()
        defer { childSpawnLock.unlock() }
        try runWithSignalsUnblocked()
        afterStart()
    }

    /// Starts the process (`run()`) with no signal blocked. A child inherits the signal mask of the thread
    /// that starts it, and Dispatch's worker threads, where tests start most children, block SIGINT,
    /// SIGTERM, SIGALRM, SIGCHLD and more: a child started there ignored a polite stop (SIGTERM), never
    /// heard its own watchdog (`signal.alarm` in the conformance scripts) and ran its shell's traps late
    /// or never. The calling thread's mask is cleared for the start and put back after it.
    public func runWithSignalsUnblocked() throws {
        var none = sigset_t()
        sigemptyset(&none)
        var saved = sigset_t()
        pthread_sigmask(SIG_SETMASK, &none, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try run()
    }
}
