import NIOConcurrencyHelpers

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Pauses and resumes a running chunked upload from any task, and tells its owner where the device
/// said the upload stood when it started (a resumed upload).
///
/// While paused the uploader sends no new chunk; the chunks already in flight are answered (drained)
/// first. On resume it continues from the offset the device reported last.
public final class UploadControl: Sendable {
    private struct State {
        var paused = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = LockedState(State())
    private let resumed: (@Sendable (_ offset: Int, _ total: Int) -> Void)?

    /// - Parameter onResumedUpload: called once when the device's answer to the first chunk shows it
    ///   already holds `offset` bytes of this upload (same `sha`), so the upload continues there.
    public init(onResumedUpload: (@Sendable (_ offset: Int, _ total: Int) -> Void)? = nil) {
        self.resumed = onResumedUpload
    }

    /// Whether the upload is held.
    public var isPaused: Bool { state.withLock { $0.paused } }

    /// Holds the upload before its next chunk.
    public func pause() { state.withLock { $0.paused = true } }

    /// Lets the upload continue.
    public func resume() {
        wake(unpausing: true)
    }

    private func wake(unpausing: Bool) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if unpausing { s.paused = false }
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at once unless paused; otherwise when resumed (or the task is cancelled).
    func waitWhilePaused() async {
        guard isPaused else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let mustWait = state.withLock { s -> Bool in
                    guard s.paused, !Task.isCancelled else { return false }
                    s.waiters.append(continuation)
                    return true
                }
                if !mustWait { continuation.resume() }
            }
        } onCancel: {
            self.wake(unpausing: false)
        }
    }

    func reportResumed(offset: Int, total: Int) { resumed?(offset, total) }
}

/// A value behind a lock.
final class LockedState<Value>: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
