/// The receive side of Zephyr's SMP UDP transport on the shared native_sim build: a request holds two SMP
/// buffers (request and response) until it has been answered on the device's tick; a datagram read while
/// no buffers are free is dropped, and the receive thread then takes no datagram until a request has been
/// answered. Pure: datagrams and times go in, decisions come out.
///
/// Measured on native_sim_udp 4.4.0 (buf_count 2, 10 ms tick):
/// - of N echo requests sent back to back exactly every other one is answered (2: the first; 20: seq
///   0, 2, 4, ... 18), whatever their size (10 or 1400 bytes); six 1024-byte fs upload chunks back to back:
///   the first is written, the third and fifth get the offset error;
/// - of two requests the second is answered when sent 10 ms or more after the first, rarely before
///   (0-2 ms: 0 of 12, 5 ms: 2, 8 ms: 4, 10 ms: 12);
/// - a request sent as soon as the previous answer arrives is always answered (stop and wait: 30 of 30);
/// - 20 requests 10 ms apart: 15 answered, 15 ms apart: 18; round trips 2 to 17 ms (median 10).
struct UDPReceiveQueue: Sendable {
    /// Requests answered at once (buf_count / 2: each holds a request and a response buffer).
    let capacity: Int
    /// The device's tick, in nanoseconds: requests are processed and answered on it.
    let tick: UInt64

    /// When each request in flight is answered (its buffers free again).
    private(set) var inFlight: [UInt64] = []
    /// After a drop the receive thread takes nothing until this time.
    private(set) var stalledUntil: UInt64 = 0

    enum Decision: Sendable, Equatable {
        /// Handle the request and answer it at this time.
        case answer(at: UInt64)
        /// Dropped: no buffers.
        case drop
        /// Not read yet: try again at this time.
        case wait(until: UInt64)
    }

    init(bufferCount: Int, tick: Duration = .milliseconds(10)) {
        capacity = max(1, bufferCount / 2)
        self.tick = max(1, tick.nanosecondsClamped)
    }

    /// The first tick strictly after `time`.
    func nextTick(after time: UInt64) -> UInt64 { (time / tick + 1) * tick }

    /// What happens to the next queued datagram at `time`.
    mutating func take(at time: UInt64) -> Decision {
        inFlight.removeAll { $0 <= time }
        if time < stalledUntil { return .wait(until: stalledUntil) }
        if inFlight.count < capacity {
            let answer = nextTick(after: time)
            inFlight.append(answer)
            return .answer(at: answer)
        }
        stalledUntil = inFlight.min() ?? time
        return .drop
    }

    /// The request answered at `time` kept the device busy until `until` (a shell command that sleeps):
    /// it holds its buffers until then, and the requests queued behind it are answered no sooner
    /// (measured on native_sim_udp 4.4.0: echoes sent during `kernel sleep 1000` were dropped, "Failed
    /// to allocate mcumgr buffer", and one sent after it was answered).
    mutating func hold(at time: UInt64, until: UInt64) {
        if let index = inFlight.firstIndex(of: time) { inFlight.remove(at: index) }
        inFlight = inFlight.map { $0 > time ? max($0, until) : $0 }
        inFlight.append(until)
    }
}
