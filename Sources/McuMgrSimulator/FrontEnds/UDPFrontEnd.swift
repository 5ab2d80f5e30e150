import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Serves a simulated device over UDP: one request per datagram, the answer to the sender, as
/// Zephyr's UDP transport does (port 1337 by default; IPv4 or IPv6 by the bind address).
public final class UDPFrontEnd: Sendable {
    public let device: SimulatedDevice
    public let host: String
    public let port: Int
    /// Delay added before every answer.
    public let latency: Duration
    /// Emulate Zephyr's SMP buffers on the receive side (see `UDPReceiveQueue`: a request holds two buffers
    /// until answered on the 10 ms tick; datagrams that find none are dropped); false answers every
    /// datagram at once.
    public let emulatesBuffers: Bool
    /// Link faults to inject (datagram loss both ways, duplication, reordering, delay, resets, silence).
    public let faults: FaultProfile
    /// Which stream of the fault seed this front end draws from (`FaultPlan`): devices served side by side
    /// take different streams so their faults differ but replay.
    public let faultStream: UInt64
    private let group: any EventLoopGroup
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    /// - Parameter faultStream: the stream of the fault seed (default: the port asked for).
    public init(
        device: SimulatedDevice, host: String = "127.0.0.1", port: Int = 1337, latency: Duration = .zero,
        emulatesBuffers: Bool = false, faults: FaultProfile = FaultProfile(), faultStream: UInt64? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.emulatesBuffers = emulatesBuffers
        self.faults = faults
        self.faultStream = faultStream ?? UInt64(port)
        self.device = device
        self.host = host
        self.port = port
        self.latency = latency
        self.group = group
    }

    /// The bound address (with the real port when 0 was asked for).
    public var localAddress: SocketAddress? { channel.withLockedValue { $0?.localAddress } }

    /// The open socket (tests read its options).
    var boundChannel: (any Channel)? { channel.withLockedValue { $0 } }

    @discardableResult
    public func start() async throws -> SocketAddress {
        let handler = UDPSimulatorHandler(
            device: device, latency: latency, faults: faults.isEmpty ? nil : FaultPlan(faults, stream: faultStream),
            receiveQueue: emulatesBuffers ? UDPReceiveQueue(bufferCount: device.configuration.bufferCount) : nil)
        // SO_REUSEADDR only for a port asked for by number: with it, Linux may give port 0 a port another
        // socket with the option already has (seen: two of 64 devices of one smp-sim on the same port).
        let channel = try await DatagramBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: port == 0 ? 0 : 1)
            .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .bind(host: host, port: port).get()
        self.channel.withLockedValue { $0 = channel }
        guard let address = channel.localAddress else {
            throw SimulatorFrontEndError("UDP socket has no local address")
        }
        return address
    }

    public func stop() async {
        let c = channel.withLockedValue { c -> (any Channel)? in
            defer { c = nil }
            return c
        }
        try? await c?.close()
    }
}

final class UDPSimulatorHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    private let device: SimulatedDevice
    private let latency: Duration
    // Touched only on the channel's event loop.
    private var queue: UDPReceiveQueue?
    private var pending: [AddressedEnvelope<ByteBuffer>] = []
    private var pumpScheduled: UInt64?
    /// The origin of the device's ticks: when the handler joined its channel. Every time is read from
    /// the channel's event loop (the wall clock on a real one, virtual time in an `EmbeddedEventLoop`).
    private var start = NIODeadline.uptimeNanoseconds(0)
    private var faults: FaultPlan?
    /// An answer held back by the reordering fault until the next one leaves.
    private var held: AddressedEnvelope<ByteBuffer>?
    private var heldGeneration = 0
    /// While the device works on a request (`SimulatedDevice.responsesAndBusyTime`), requests due to be
    /// handled wait here, in order, until `busyUntil` (time since `start`).
    private var busyUntil: UInt64 = 0
    private var deferred: [AddressedEnvelope<ByteBuffer>] = []

    /// - Parameter receiveQueue: Zephyr's buffer limits (see `UDPReceiveQueue`); nil answers every
    ///   datagram at once.
    init(device: SimulatedDevice, latency: Duration, faults: FaultPlan? = nil, receiveQueue: UDPReceiveQueue? = nil) {
        self.faults = faults
        self.device = device
        self.latency = latency
        self.queue = receiveQueue
    }

    func handlerAdded(context: ChannelHandlerContext) {
        start = context.eventLoop.now
    }

    private func elapsed(_ context: ChannelHandlerContext) -> UInt64 {
        let now = context.eventLoop.now
        return now > start ? UInt64(now.uptimeNanoseconds - start.uptimeNanoseconds) : 0
    }

    private func deadline(_ time: UInt64) -> NIODeadline { start + .nanoseconds(Int64(clamping: time)) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        if faults != nil {
            switch faults!.request(Array(envelope.data.readableBytesView)) {
            case .deliver: break
            case .lose, .silence: return
            case .reset:
                device.powerCycle()
                return
            }
        }
        guard queue != nil else {
            answer(envelope, context: context)
            return
        }
        pending.append(envelope)
        pump(context: context)
    }

    /// Takes queued datagrams as the device's receive thread would.
    private func pump(context: ChannelHandlerContext) {
        while !pending.isEmpty {
            let now = elapsed(context)
            switch queue!.take(at: now) {
            case .answer(let time):
                let envelope = pending.removeFirst()
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(deadline: deadline(time)) {
                    let (handler, context) = loopBound.value
                    handler.answer(envelope, context: context)
                }
            case .drop:
                pending.removeFirst()
            case .wait(let time):
                schedulePump(at: time, context: context)
                return
            }
        }
    }

    private func schedulePump(at time: UInt64, context: ChannelHandlerContext) {
        if let scheduled = pumpScheduled, scheduled <= time { return }
        pumpScheduled = time
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(deadline: deadline(time)) {
            let (handler, context) = loopBound.value
            if handler.pumpScheduled == time { handler.pumpScheduled = nil }
            handler.pump(context: context)
        }
    }

    private func answer(_ envelope: AddressedEnvelope<ByteBuffer>, context: ChannelHandlerContext) {
        // Zephyr's UDP transport receives into a 1500-byte buffer and truncates beyond it; the SMP layer
        // then answers a header whose length runs past the data with rc 9, and handles several packets
        // in one datagram one after the other (measured on native_sim_udp 4.4.0: a datagram of 1501
        // bytes or more gets `{"rc": 9}` in a response with the request's header, v1 or v2).
        let now = elapsed(context)
        // The one thread that handles SMP is still on an earlier request: this one waits its turn.
        if now < busyUntil {
            deferred.append(envelope)
            if deferred.count == 1 {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(deadline: deadline(busyUntil)) {
                    let (handler, context) = loopBound.value
                    let waiting = handler.deferred
                    handler.deferred = []
                    for envelope in waiting { handler.answer(envelope, context: context) }
                }
            }
            return
        }
        let bytes = Array(envelope.data.readableBytesView.prefix(DatagramCodec.zephyrReceiveBufferSize))
        let (responses, busy) = device.responsesAndBusyTimeUnlessRebooting(bytes)
        if busy > .zero {
            busyUntil = now + busy.nanosecondsClamped
            queue?.hold(at: now, until: busyUntil)
        }
        for response in responses {
            let out = AddressedEnvelope(
                remoteAddress: envelope.remoteAddress, data: context.channel.allocator.buffer(bytes: response))
            guard faults != nil else {
                send([out], after: latency + busy, context: context)
                continue
            }
            switch faults!.answer() {
            case .send(let copies, let delay):
                send(Array(repeating: out, count: copies), after: latency + busy + delay, context: context)
            case .holdForNext(let delay):
                // Reordering: this answer leaves right behind the next one, or late on its own.
                if let previous = held { send([previous], after: latency + busy + delay, context: context) }
                held = out
                heldGeneration += 1
                let generation = heldGeneration
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(50) + .nanoseconds(Int64(clamping: (latency + delay).nanosecondsClamped))) {
                    let (handler, context) = loopBound.value
                    guard handler.heldGeneration == generation, let late = handler.held else { return }
                    handler.held = nil
                    context.writeAndFlush(handler.wrapOutboundOut(late), promise: nil)
                }
            }
        }
    }

    /// Writes `envelopes` after `delay`; an answer held back for reordering follows them.
    private func send(_ envelopes: [AddressedEnvelope<ByteBuffer>], after delay: Duration, context: ChannelHandlerContext) {
        var envelopes = envelopes
        if !envelopes.isEmpty, let previous = held {
            held = nil
            heldGeneration += 1
            envelopes.append(previous)
        }
        guard !envelopes.isEmpty else { return }
        if delay == .zero {
            for out in envelopes { context.write(wrapOutboundOut(out), promise: nil) }
            context.flush()
        } else {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let envelopes = envelopes
            context.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: delay.nanosecondsClamped))) {
                let (handler, context) = loopBound.value
                for out in envelopes { context.write(handler.wrapOutboundOut(out), promise: nil) }
                context.flush()
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client that went away (ICMP unreachable) must not stop the device.
    }
}
