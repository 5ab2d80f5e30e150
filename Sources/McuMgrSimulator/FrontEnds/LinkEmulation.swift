import McuMgrCore
import NIOCore

/// Emulates a link's speed and latency for a front end: bytes take `10 / baud` seconds each on the
/// wire (8N1), in each direction independently, plus a fixed latency per packet.
struct LinkEmulation: Sendable {
    /// Bits per second, or nil for an unthrottled link.
    var baudRate: Int?
    /// Added to every answer.
    var latency: Duration

    private var receiveFree = NIODeadline.uptimeNanoseconds(0)
    private var transmitFree = NIODeadline.uptimeNanoseconds(0)

    init(baudRate: Int?, latency: Duration) {
        self.baudRate = baudRate
        self.latency = latency
    }

    private func wireTime(_ count: Int) -> TimeAmount {
        guard let baudRate, baudRate > 0 else { return .zero }
        return .nanoseconds(Int64(count) * 10 * 1_000_000_000 / Int64(baudRate))
    }

    /// When `count` bytes read now have fully arrived over the emulated wire.
    mutating func arrival(of count: Int, now: NIODeadline) -> NIODeadline {
        guard baudRate != nil else { return now }
        receiveFree = max(receiveFree, now) + wireTime(count)
        return receiveFree
    }

    /// When `count` bytes written now have fully left over the emulated wire (latency included).
    mutating func departure(of count: Int, now: NIODeadline) -> NIODeadline {
        let start = now + .nanoseconds(Int64(clamping: latency.nanosecondsClamped))
        guard baudRate != nil else { return start }
        transmitFree = max(transmitFree, start) + wireTime(count)
        return transmitFree
    }
}

extension SimulatedDevice {
    /// Answers a request as a front end does: nothing while the device is rebooting (its link is down).
    func handleUnlessRebooting(_ request: [UInt8]) -> [UInt8]? {
        let now = SystemClock.monotonicNow()
        guard !isRebooting(at: now) else { return nil }
        return handle(request, now: now)
    }

    /// The answer to a request and how long the device works on it first; nil while rebooting or silent.
    func handleUnlessRebootingWithBusyTime(_ request: [UInt8]) -> (response: [UInt8], busy: Duration)? {
        let now = SystemClock.monotonicNow()
        guard !isRebooting(at: now) else { return nil }
        let (responses, busy) = responsesAndBusyTime(to: request, now: now)
        guard !responses.isEmpty else { return nil }
        return (responses.count == 1 ? responses[0] : Array(responses.joined()), busy)
    }

    /// The responses to the requests in a datagram, one datagram each, and how long the device works on
    /// them before it answers; none while rebooting.
    func responsesAndBusyTimeUnlessRebooting(_ packet: [UInt8]) -> (responses: [[UInt8]], busy: Duration) {
        let now = SystemClock.monotonicNow()
        guard !isRebooting(at: now) else { return ([], .zero) }
        return responsesAndBusyTime(to: packet, now: now)
    }
}
