/// A transfer rate a person can trust: bytes per second over a sliding window of time, never over a
/// single chunk, and no rate at all until the transfer has run for `minimumSpan`.
///
/// A pure value: the caller passes the time of each sample (time since any origin it picks, e.g. the
/// start of the transfer), so tests drive it with a scripted clock.
///
/// The rate is the bytes between the oldest sample still in the window and the newest, divided by the
/// time between them. Kept samples are at least `window / 16` apart (a newer one replaces the newest
/// kept one until that much time has passed), so memory stays small at any chunk rate.
public struct TransferRateEstimator: Sendable, Hashable {
    /// How far back the rate looks.
    public let window: Duration
    /// No rate until the samples span at least this long.
    public let minimumSpan: Duration

    private struct Sample: Sendable, Hashable {
        var time: Duration
        var bytes: Int
    }

    /// Oldest first; the last one is the newest sample.
    private var samples: [Sample] = []

    /// Creates an estimator with no samples.
    /// - Parameters:
    ///   - window: how far back the rate looks (default 3 s; at least 1 ms).
    ///   - minimumSpan: how long the samples must span before there is a rate (default 0.5 s; at most
    ///     `window`).
    public init(window: Duration = .seconds(3), minimumSpan: Duration = .milliseconds(500)) {
        self.window = max(window, .milliseconds(1))
        self.minimumSpan = min(max(minimumSpan, .zero), self.window)
    }

    /// Records that `bytes` had been transferred in all at `time`. Bytes that go back (a transfer that
    /// starts over) or time that goes back start the estimate over from this sample.
    public mutating func record(bytes: Int, at time: Duration) {
        let sample = Sample(time: time, bytes: bytes)
        guard let newest = samples.last, bytes >= newest.bytes, time >= newest.time else {
            samples = [sample]
            return
        }
        // Keep samples at least window/16 apart: a newer one replaces the newest kept one until then.
        if samples.count >= 2, time - samples[samples.count - 2].time < window / 16 {
            samples[samples.count - 1] = sample
        } else {
            samples.append(sample)
        }
        // Drop what fell out of the window, keeping the last sample at or before its start.
        let windowStart = time - window
        var drop = 0
        while samples.count - drop > 2, samples[drop + 1].time <= windowStart { drop += 1 }
        if drop > 0 { samples.removeFirst(drop) }
    }

    /// Starts the estimate over from `bytes` at `time` (a resumed transfer: the bytes before the resume
    /// were not transferred now).
    public mutating func restart(bytes: Int, at time: Duration) {
        samples = [Sample(time: time, bytes: bytes)]
    }

    /// Bytes per second over the window; nil until the samples span `minimumSpan`.
    public var bytesPerSecond: Double? {
        guard let oldest = samples.first, let newest = samples.last else { return nil }
        let span = newest.time - oldest.time
        guard span >= minimumSpan, span > .zero else { return nil }
        let seconds = Double(span.components.seconds) + Double(span.components.attoseconds) * 1e-18
        return Double(newest.bytes - oldest.bytes) / seconds
    }
}
