/// A point on a monotonic clock, in nanoseconds. The core never reads a clock: callers pass "now".
public struct SMPInstant: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static let zero = SMPInstant(nanoseconds: 0)

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (a: Self, d: Duration) -> Self {
        SMPInstant(nanoseconds: a.nanoseconds &+ d.nanosecondsClamped)
    }

    /// The time from `b` to `a`, zero if `b` is later.
    public static func - (a: Self, b: Self) -> Duration {
        a.nanoseconds >= b.nanoseconds ? .nanoseconds(Int64(clamping: a.nanoseconds - b.nanoseconds)) : .zero
    }

    public var description: String { "\(Double(nanoseconds) / 1e9)s" }
}

extension Duration {
    /// Whole nanoseconds, clamped to 0...UInt64.max.
    public var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        let (ns, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .max }
        return ns &+ UInt64(attoseconds / 1_000_000_000)
    }

    /// The duration in seconds as a Double.
    public var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
