/// Retransmission timeout from measured round trips, as TCP computes it (RFC 6298): a smoothed round
/// trip time and its variation; the timeout is `srtt + 4 * rttvar`, never below `floor`, doubled by
/// each backoff. Samples must come only from requests that were not resent (Karn's rule): the caller
/// decides which.
public struct RoundTripEstimator: Sendable, Hashable, CustomStringConvertible {
    /// The smallest timeout: above the device's scheduling tick, so that a slow answer is not resent.
    public var floor: Duration
    /// The largest timeout.
    public var ceiling: Duration
    /// Used until the first sample.
    public var initial: Duration
    /// Smoothed round trip, once measured.
    public private(set) var smoothed: Duration?
    /// Round-trip variation.
    public private(set) var variation: Duration = .zero
    /// Samples taken.
    public private(set) var samples = 0

    public init(initial: Duration = .seconds(1), floor: Duration = .milliseconds(200), ceiling: Duration = .seconds(60)) {
        self.initial = initial
        self.floor = floor
        self.ceiling = max(floor, ceiling)
    }

    /// Starts from round trips measured on an earlier connection to the same device (as Linux's TCP keeps
    /// per destination): the first request then waits `smoothed + 4 * variation`, not `initial`, and the
    /// first sample of this connection is smoothed into it as any later one.
    public mutating func seed(_ remembered: SMPRoundTrip) {
        guard smoothed == nil else { return }
        smoothed = remembered.smoothed
        variation = remembered.variation
    }

    /// What this estimator measured, to seed the next connection's; nil before the first sample.
    public var measured: SMPRoundTrip? {
        guard samples > 0, let smoothed else { return nil }
        return SMPRoundTrip(smoothed: smoothed, variation: variation)
    }

    /// Records one round trip of a request that was sent once.
    public mutating func record(_ sample: Duration) {
        samples += 1
        guard let srtt = smoothed else {
            smoothed = sample
            variation = sample / 2
            return
        }
        let deviation = srtt > sample ? srtt - sample : sample - srtt
        variation = variation * 3 / 4 + deviation / 4
        smoothed = srtt * 7 / 8 + sample / 8
    }

    /// The timeout before the first resend.
    public var timeout: Duration {
        guard let smoothed else { return clamp(initial) }
        return clamp(smoothed + variation * 4)
    }

    /// The timeout before resend number `attempt` (1 = the first): doubled for each earlier resend.
    public func timeout(attempt: Int) -> Duration {
        var value = timeout
        for _ in 1..<max(1, attempt) {
            value = value * 2
            if value >= ceiling { return ceiling }
        }
        return clamp(value)
    }

    private func clamp(_ value: Duration) -> Duration { min(max(value, floor), ceiling) }

    public var description: String {
        guard let smoothed else { return "rto \(timeout.milliseconds) ms (no samples)" }
        return "srtt \(smoothed.milliseconds) ms, rttvar \(variation.milliseconds) ms, rto \(timeout.milliseconds) ms"
    }
}

/// A smoothed round trip and its variation, as kept between connections.
public struct SMPRoundTrip: Sendable, Hashable {
    public var smoothed: Duration
    public var variation: Duration

    public init(smoothed: Duration, variation: Duration) {
        self.smoothed = smoothed
        self.variation = variation
    }
}

/// How many requests may be in flight: grows by one each window's worth of acknowledgements (additive
/// increase), halves on a loss (multiplicative decrease), never above the device's ceiling or below 1.
public struct CongestionWindow: Sendable, Hashable, CustomStringConvertible {
    /// The most the device holds (`LinkLimits.framesInFlight`, `buf_count - 1`).
    public private(set) var ceiling: Int
    /// Fractional window; `value` is its whole part.
    private var window: Double

    /// Starts at `initial` (clamped to 1...ceiling).
    public init(ceiling: Int, initial: Int? = nil) {
        self.ceiling = max(1, ceiling)
        self.window = Double(min(max(1, initial ?? ceiling), self.ceiling))
    }

    /// Requests allowed in flight now.
    public var value: Int { Int(window) }

    /// A request was answered: the window grows by 1/value (one per round of a full window).
    /// - Returns: whether `value` changed.
    @discardableResult
    public mutating func acknowledged() -> Bool {
        let before = value
        window = min(Double(ceiling), window + 1 / window)
        return value != before
    }

    /// A request was lost: the window halves.
    /// - Returns: whether `value` changed.
    @discardableResult
    public mutating func lost() -> Bool {
        let before = value
        window = max(1, (window / 2).rounded(.down))
        return value != before
    }

    /// Changes the ceiling (the device's limits became known); the window never exceeds it.
    public mutating func setCeiling(_ newCeiling: Int) {
        ceiling = max(1, newCeiling)
        window = min(window, Double(ceiling))
    }

    public var description: String { "window \(value) of \(ceiling)" }
}

extension Duration {
    /// Whole milliseconds, for messages.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
