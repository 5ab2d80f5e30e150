import Dispatch
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

/// A `McuMgrTransport` that hands packets straight to a `SimulatedDevice` in the same process and
/// delivers its answers asynchronously on a private serial queue, in order.
///
/// Fault injection: added latency, dropping every Nth response (to exercise retransmission and
/// timeouts), and a silent mode that never answers. While the device is rebooting after a reset,
/// requests are dropped as a real link would lose them (unless `honorsReboot` is off).
public final class InMemorySimulatorTransport: McuMgrTransport, @unchecked Sendable {
    /// Link behaviour.
    public struct Options: Sendable {
        /// Delay between a send and the device seeing the request (its answer follows at once).
        public var latency: Duration = .zero
        /// Drop every Nth response (counting all answered requests from 1); nil = never.
        public var dropEveryNthResponse: Int? = nil
        /// Never answer anything.
        public var silent: Bool = false
        /// Drop requests while the device is rebooting after a reset.
        public var honorsReboot: Bool = true
        /// Seeded link faults (request and answer loss, duplication, reordering, delay, resets, silence);
        /// the serial-only ones (corruption, noise, lost lines) do not apply to this packet link.
        public var faults: FaultProfile = FaultProfile()

        public init(
            latency: Duration = .zero, dropEveryNthResponse: Int? = nil, silent: Bool = false,
            honorsReboot: Bool = true, faults: FaultProfile = FaultProfile()
        ) {
            self.faults = faults
            self.latency = latency
            self.dropEveryNthResponse = dropEveryNthResponse
            self.silent = silent
            self.honorsReboot = honorsReboot
        }
    }

    public let device: SimulatedDevice
    private let lock = NIOLock()
    private var _options: Options
    private var handler: (@Sendable (McuMgrTransportEvent) -> Void)?
    private var answered = 0
    private var _droppedResponses = 0
    private var _handledRequests = 0
    private let queue = DispatchQueue(label: "McuMgrSimulator.InMemorySimulatorTransport")
    private let clock: @Sendable () -> SMPInstant
    private var faultPlan: FaultPlan?
    /// An answer held back by the reordering fault until the next one.
    private var held: [UInt8]?
    private var heldGeneration = 0

    /// - Parameter clock: the device's "now" for every request (uptime, RTC, reboot window); nil = the
    ///   host's monotonic clock. Tests pass a manual clock to step through a reboot deterministically.
    public init(
        device: SimulatedDevice = SimulatedDevice(), options: Options = Options(),
        clock: (@Sendable () -> SMPInstant)? = nil
    ) {
        self.device = device
        self._options = options
        self.faultPlan = options.faults.isEmpty ? nil : FaultPlan(options.faults)
        self.clock = clock ?? { SystemClock.monotonicNow() }
    }

    public var name: String { "sim:" }

    /// Packets of up to the device's `bufferSize`; a session window of `bufferCount - 1` (requests and
    /// responses share the device's buffers); when responses are being dropped, retransmission after
    /// 4 × latency (at least 100 ms).
    public var linkLimits: LinkLimits {
        let options = self.options
        let lossy = (options.dropEveryNthResponse ?? 0) > 0 || !options.faults.isEmpty
        return LinkLimits(
            maximumPacketSize: device.configuration.bufferSize, framesInFlight: 255,
            session: SMPSessionConfiguration(
                window: max(1, device.configuration.bufferCount - 1),
                retransmitInterval: lossy ? max(options.latency * 4, .milliseconds(100)) : nil))
    }

    /// The link behaviour; may be changed while open (e.g. go silent mid-transfer).
    public var options: Options {
        get { lock.withLock { _options } }
        set { lock.withLock { _options = newValue } }
    }

    /// Responses dropped so far by `dropEveryNthResponse`.
    public var droppedResponses: Int { lock.withLock { _droppedResponses } }

    /// Requests the link has finished with so far: answered (the answers already handed over, unless
    /// delayed by a fault), dropped, or ignored (silent, rebooting, closed). A test waits for this
    /// instead of sleeping to be sure that no answer to a request is still on its way.
    public var handledRequests: Int { lock.withLock { _handledRequests } }

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let alreadyOpen = lock.withLock { () -> Bool in
            if self.handler != nil { return true }
            self.handler = handler
            return false
        }
        if alreadyOpen {
            throw McuMgrError(.transport, "the simulated link is already open; close it first")
        }
    }

    public func send(_ packet: [UInt8]) throws {
        let (isOpen, latency) = lock.withLock { (handler != nil, _options.latency) }
        guard isOpen else {
            throw McuMgrError(.transport, "the simulated link is not open; open it before sending")
        }
        let deliver: @Sendable () -> Void = { [self] in self.deliver(packet) }
        let nanoseconds = latency.nanosecondsClamped
        if nanoseconds == 0 {
            queue.async(execute: deliver)
        } else {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds)), execute: deliver)
        }
    }

    private func deliver(_ packet: [UInt8]) {
        defer { lock.withLock { _handledRequests += 1 } }
        let options = self.options
        guard lock.withLock({ handler != nil }), !options.silent else { return }
        let now = clock()
        if options.honorsReboot && device.isRebooting(at: now) { return }
        let fate = lock.withLock { faultPlan?.request(packet) } ?? .deliver
        switch fate {
        case .deliver: break
        case .lose, .silence: return
        case .reset:
            device.powerCycle(now: now)
            return
        }
        let responses = device.responses(to: packet, now: now)
        for response in responses {
            if lock.withLock({ faultPlan != nil }) {
                answerWithFaults(response)
                continue
            }
            let handler = lock.withLock { () -> (@Sendable (McuMgrTransportEvent) -> Void)? in
                answered += 1
                if let n = options.dropEveryNthResponse, n > 0, answered % n == 0 {
                    _droppedResponses += 1
                    return nil
                }
                return self.handler
            }
            handler?(.packet(response))
        }
    }

    /// Delivers an answer as the fault plan decides (on the private queue).
    private func answerWithFaults(_ response: [UInt8]) {
        let (fate, handler) = lock.withLock { (faultPlan!.answer(), self.handler) }
        guard let handler else { return }
        switch fate {
        case .send(let copies, let delay):
            let previous = lock.withLock { () -> [UInt8]? in
                guard copies > 0, let previous = held else { return nil }
                held = nil
                heldGeneration += 1
                return previous
            }
            let packets = Array(repeating: response, count: copies) + (previous.map { [$0] } ?? [])
            guard !packets.isEmpty else { return }
            if delay == .zero {
                for packet in packets { handler(.packet(packet)) }
            } else {
                queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: delay.nanosecondsClamped))) {
                    for packet in packets { handler(.packet(packet)) }
                }
            }
        case .holdForNext(let delay):
            let (previous, generation) = lock.withLock { () -> ([UInt8]?, Int) in
                defer { held = response }
                heldGeneration += 1
                return (held, heldGeneration)
            }
            if let previous { handler(.packet(previous)) }
            let late = delay + .milliseconds(50)
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: late.nanosecondsClamped))) { [self] in
                let packet = lock.withLock { () -> [UInt8]? in
                    guard heldGeneration == generation else { return nil }
                    defer { held = nil }
                    return held
                }
                if let packet { handler(.packet(packet)) }
            }
        }
    }

    public func close() async {
        let handler = lock.withLock { () -> (@Sendable (McuMgrTransportEvent) -> Void)? in
            defer { self.handler = nil }
            return self.handler
        }
        guard let handler else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                handler(.closed(nil))
                continuation.resume()
            }
        }
    }
}
