/// The clock the client runtime reads and sleeps on: request timeouts and resends (`McuMgrClient`),
/// busy pauses and progress timeouts of uploads (`ChunkedUploader`), the swap wait and reconnection of a
/// firmware upgrade (`FirmwareUpgradeManager`). Production code runs on ``continuous``; tests hand in
/// a manual clock (any `Clock` with `Duration`) and advance it themselves, so that timing properties
/// (the resend timeout, its doubling, a reconnect's retries) are checked in virtual time.
///
/// A `Clock` itself, type-erased: its instants are the time since the wrapped clock's reading when the
/// wrapper was made, so instants of two wrappers do not compare (share one wrapper instead).
public struct McuMgrClock: Clock {
    /// A point in time: how long after the clock's origin.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock's origin.
        public var offset: Swift.Duration

        /// The instant `offset` after the clock's origin.
        public init(offset: Swift.Duration) { self.offset = offset }

        public func advanced(by duration: Swift.Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Swift.Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    private let read: @Sendable () -> Swift.Duration
    private let wait: @Sendable (_ until: Swift.Duration, _ tolerance: Swift.Duration?) async throws -> Void
    private let resolution: Swift.Duration

    /// Wraps `clock`; its current reading becomes this clock's origin.
    public init<C: Clock>(_ clock: C) where C.Duration == Swift.Duration {
        let origin = clock.now
        read = { origin.duration(to: clock.now) }
        wait = { offset, tolerance in try await clock.sleep(until: origin.advanced(by: offset), tolerance: tolerance) }
        resolution = clock.minimumResolution
    }

    /// The system's monotonic clock (`ContinuousClock`, which keeps counting while the machine sleeps):
    /// the default everywhere. One shared wrapper, so its instants compare across users.
    public static let continuous = McuMgrClock(ContinuousClock())

    public var now: Instant { Instant(offset: read()) }

    public var minimumResolution: Swift.Duration { resolution }

    /// Suspends until `deadline` (returns at once when it has passed).
    /// - Throws: `CancellationError` when the calling task is cancelled.
    public func sleep(until deadline: Instant, tolerance: Swift.Duration? = nil) async throws {
        try await wait(deadline.offset, tolerance)
    }

    /// Suspends for `duration` from now.
    /// - Throws: `CancellationError` when the calling task is cancelled.
    public func sleep(for duration: Swift.Duration) async throws {
        try await sleep(until: now.advanced(by: duration))
    }
}
