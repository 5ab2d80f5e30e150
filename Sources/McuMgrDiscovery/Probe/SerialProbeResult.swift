import Logging
import McuManager
import McuMgrSerial

/// What a probe of one port found.
public struct SerialProbeResult: Sendable {
    public enum Outcome: Sendable {
        /// The port answered the MCUmgr parameters request with its buffer size and count.
        case answered(bufferSize: Int, bufferCount: Int)
        /// The port answered in SMP, with an error code (e.g. the request is not supported): it speaks SMP.
        case answeredWithError(String)
        /// Nothing came back in time.
        case silent
        /// The port could not be used (permission, busy, gone) or answered with something that is not SMP.
        case failed(String)
    }

    public var device: SerialDevice
    public var outcome: Outcome
    /// How long the probe took, in seconds.
    public var seconds: Double

    /// Whether the port speaks SMP.
    public var answered: Bool {
        switch outcome {
        case .answered, .answeredWithError: return true
        case .silent, .failed: return false
        }
    }

    /// A few words for people: "SMP (buf_size 2475, buf_count 4)", "no answer", ...
    public var summary: String {
        switch outcome {
        case .answered(let size, let count): return "SMP (buf_size \(size), buf_count \(count))"
        case .answeredWithError(let message): return "SMP (\(message))"
        case .silent: return "no answer"
        case .failed(let message): return "error: \(message)"
        }
    }
}
