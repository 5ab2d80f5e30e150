/// Every wait of a command, derived from one setting: `answer`, the longest wait for the answer to one
/// request (`smp --timeout`; the session resends a lost request within it). The library's defaults live
/// here, and `smp --timeout` means exactly this:
///
/// | Wait | Default | With `answer` given |
/// |---|---|---|
/// | an answer to one request; each upload chunk after the first | 10 s | `answer` |
/// | the first upload chunk (it may erase a whole slot) | 40 s | `answer` |
/// | a download without data before it fails (requests are repeated within it) | 30 s | 3 x `answer` |
/// | a file hash the device computes; a flash erase; a board coming back after a reset | 60 s, 75 s, 30 s | at least `answer` |
/// | the hash that verifies a transfer of N bytes | 2 x (1 s + N / 64 KiB/s), at least 10 s | at least `answer` |
///
/// A request the device works on for long is not sent again sooner than its `resendFloor`
/// (`McuMgrRequest`): a hash (1 s + N / 64 KiB/s), an image slot's erase (40 s), the storage erase (15 s).
public struct McuMgrTimeouts: Sendable, Hashable {
    /// The default wait for one answer.
    public static let defaultAnswer = Duration.seconds(10)
    /// The default wait for the first chunk of an upload, which may erase a slot before answering.
    public static let defaultFirstChunk = Duration.seconds(40)
    /// A download fails after this many `answer`s without data.
    public static let downloadStallAnswers = 3
    /// Least wait for a file hash the device computes over a whole file (seconds on a large file).
    public static let fileHashFloor = Duration.seconds(60)
    /// Least wait for an image slot's erase (an nRF52840's 472 KiB slot: about 40 s).
    public static let imageEraseFloor = Duration.seconds(75)
    /// Least wait for the storage partition's erase.
    public static let storageEraseFloor = Duration.seconds(30)
    /// Least wait for a board's serial port to come back after a reset.
    public static let reconnectFloor = Duration.seconds(30)
    /// The slowest a device is taken to hash or checksum a file, in bytes per second (a small
    /// microcontroller reading its flash through LittleFS): the waits for a file's hash follow from it.
    public static let slowestHashRate = 64 * 1024
    /// Least time before an image slot's erase is asked for again: the device erases the slot for every
    /// copy it gets.
    public static let imageEraseResendFloor = Duration.seconds(40)
    /// Least time before the storage partition's erase is asked for again.
    public static let storageEraseResendFloor = Duration.seconds(15)

    /// Least time before a hash of `bytes` bytes (nil: a whole file of unknown size) is asked for again:
    /// what a device hashing at `slowestHashRate` takes, and a second. Asked sooner, the device hashes the
    /// file once more for every copy, queued behind the first, and the next request waits behind them
    /// all (seen: a 1 MiB file over UDP, resent seven times, and the file close after it unanswered
    /// for 10 s).
    public static func hashResendFloor(bytes: Int?) -> Duration {
        guard let bytes else { return .seconds(10) }
        // In whole milliseconds, rounded up.
        return .seconds(1) + .milliseconds((Int64(max(0, bytes)) * 1000 + Int64(slowestHashRate) - 1) / Int64(slowestHashRate))
    }

    /// The wait for one answer.
    public var answer: Duration
    /// Whether `answer` was given (then the first chunk waits no longer than any other).
    public var isGiven: Bool

    /// - Parameter answer: the wait for one answer; nil takes the defaults.
    public init(answer: Duration? = nil) {
        self.answer = answer ?? Self.defaultAnswer
        self.isGiven = answer != nil
    }

    /// The wait for the first chunk of an upload.
    public var firstChunk: Duration { isGiven ? answer : Self.defaultFirstChunk }
    /// The wait for every other upload chunk.
    public var chunk: Duration { answer }
    /// The time a download may go without data.
    public var downloadStall: Duration { answer * Self.downloadStallAnswers }
    /// `answer`, or `floor` when that is longer: for operations known to take long.
    public func atLeast(_ floor: Duration) -> Duration { max(answer, floor) }
    /// The wait for the device's hash of `bytes` bytes (nil: unknown): `answer`, or two of its resend
    /// floors (`hashResendFloor`) when that is longer, so that a lost request is asked for once more.
    public func hash(bytes: Int?) -> Duration { atLeast(Self.hashResendFloor(bytes: bytes) * 2) }
}
