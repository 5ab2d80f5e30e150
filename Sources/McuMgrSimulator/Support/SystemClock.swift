#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The host clocks the simulator falls back to when a caller passes no `now`.
enum SystemClock {
    /// The monotonic clock as an `SMPInstant`.
    static func monotonicNow() -> SMPInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return SMPInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }

    /// Wall-clock time as nanoseconds since the Unix epoch.
    static func unixNanosecondsNow() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
    }
}
