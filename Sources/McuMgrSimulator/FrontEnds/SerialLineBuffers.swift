/// The receive side of Zephyr's `uart_mcumgr` console transport: a few line buffers of fixed size
/// (`CONFIG_UART_MCUMGR_RX_BUF_SIZE`, `CONFIG_UART_MCUMGR_RX_BUF_COUNT`), taken at a line's first byte
/// and given back when the SMP work queue has processed the line. Pure: bytes and times go in, accepted
/// lines come out when the device would process them.
///
/// Measured on native_sim_serial 4.4.0 (2 x 128-byte buffers; `uart_native_pty` reads the pty every 20 ms:
/// its thread sleeps one 10 ms tick, and the kernel adds a tick to every relative timeout):
/// - a line of 127 bytes (marker, 124 Base64 characters, newline) is taken, one of 131 is dropped
///   ("Line too long, fragment dropped"); the serial_fs build (512-byte buffers) takes 511, drops 515;
/// - two lines sent back to back are taken, a third is dropped ("Insufficient buffers, fragment
///   dropped"): a frame of three lines, or a second frame sent right behind a two-line frame, gets no
///   answer; two one-line frames back to back are both answered, three are not;
/// - lines are given back at the device's read: with 10 ms between lines a frame of any length up to
///   `buf_size` is answered (3 lines at 8 ms gaps: 11 of 12; 4 lines at 5 ms gaps: 4 of 12);
/// - a two-line frame sent right behind another frame is taken about half the time 9-12 ms later and
///   always 21 ms later (the first frame is read within 20 ms);
/// - an echo sent right behind an answer is answered 20 ms later (14 to 23 ms); a 4-line frame sent
///   right behind an answer in bursts of 2 lines 22 to 38 ms apart is answered 40 ms later (two reads),
///   42 ms apart 60 ms later, 12 to 18 ms apart mostly not at all (both bursts in one read).
///
/// The model: the device reads every `tick` on a fixed grid from the front end's start; a complete line
/// keeps its buffer until the first read after its newline arrived, when the device processes it and
/// answers the request it completes at once; a line that completes a request answered later (a device
/// busy with an earlier one) keeps its buffer until then (`holdProcessedBuffer(until:)`); a partial line
/// keeps one too. A line that finds no free buffer, or grows beyond `lineSize` bytes (newline included),
/// is dropped up to its newline. The real device's host timing adds jitter this model does not have.
struct SerialLineBuffers: Sendable {
    /// Bytes a buffer holds (a line, marker and newline included).
    let lineSize: Int
    /// Buffers.
    let lineCount: Int
    /// The processing tick, in nanoseconds.
    let tick: UInt64

    /// Complete lines waiting for the tick that processes them, oldest first.
    private var waiting: [(line: [UInt8], release: UInt64)] = []
    /// The line being received (it holds a buffer), or nil between lines.
    private var current: [UInt8]?
    /// Dropping the rest of a line (no buffer, or too long).
    private var ignoring = false
    /// Buffers of processed lines still taken, by the time they are given back.
    private var held: [UInt64] = []

    /// Why a line was dropped.
    enum Drop: Sendable, Hashable, CustomStringConvertible {
        case lineTooLong, insufficientBuffers

        var description: String {
            switch self {
            case .lineTooLong: return "Line too long, fragment dropped"
            case .insufficientBuffers: return "Insufficient buffers, fragment dropped"
            }
        }
    }

    init(lineSize: Int, lineCount: Int, tick: Duration = .milliseconds(20)) {
        precondition(lineSize > 0 && lineCount > 0)
        self.lineSize = lineSize
        self.lineCount = lineCount
        self.tick = max(1, tick.nanosecondsClamped)
    }

    /// The first tick strictly after `time`.
    func nextTick(after time: UInt64) -> UInt64 { (time / tick + 1) * tick }

    /// When the oldest waiting line is processed, if any waits.
    var nextRelease: UInt64? { waiting.first?.release }

    /// Buffers taken now (waiting lines, processed lines still held, and the line being received).
    var buffersInUse: Int { waiting.count + held.count + (current == nil ? 0 : 1) }

    /// Keeps the buffer of the line just processed until `time` (the line completed a request: its
    /// buffer is given back once the request is answered).
    mutating func holdProcessedBuffer(until time: UInt64) { held.append(time) }

    /// Lines the device has processed by `time`, in order; their buffers are free again.
    mutating func release(upTo time: UInt64) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        while let first = waiting.first, first.release <= time {
            lines.append(first.line)
            waiting.removeFirst()
        }
        return lines
    }

    /// Receives bytes at `time` (after releasing what is due); returns the lines dropped, if any.
    mutating func receive(_ bytes: [UInt8], at time: UInt64) -> [Drop] {
        held.removeAll { $0 <= time }
        var drops: [Drop] = []
        for byte in bytes {
            if !ignoring && current == nil {
                if buffersInUse >= lineCount {
                    ignoring = true
                    drops.append(.insufficientBuffers)
                } else {
                    current = []
                }
            }
            if !ignoring {
                if current!.count >= lineSize {
                    current = nil
                    ignoring = true
                    drops.append(.lineTooLong)
                } else {
                    current!.append(byte)
                }
            }
            if byte == UInt8(ascii: "\n") {
                if ignoring {
                    ignoring = false
                } else if let line = current {
                    waiting.append((line, nextTick(after: time)))
                    current = nil
                }
            }
        }
        return drops
    }
}
