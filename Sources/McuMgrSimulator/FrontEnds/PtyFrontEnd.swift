#if canImport(Glibc)
import Glibc
#endif
import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Serves a simulated device over a pseudo-terminal, with console or raw framing and optional
/// emulation of the link's baud rate and latency. Clients open `path` like a real serial port.
public final class PtyFrontEnd: Sendable {
    /// Pty settings.
    public struct Configuration: Sendable {
        /// Console (Base64 lines) or raw framing.
        public var rawFraming: Bool
        /// Longest frame line the device sends, markers and newline included.
        public var lineLength: Int
        /// Emulated link speed in bits per second; nil = as fast as the pty goes.
        public var baudRate: Int?
        /// Delay added before every answer.
        public var latency: Duration
        /// Where to put a symlink to the pty (replacing what is there), if anywhere.
        public var linkPath: String?
        /// A device reset closes the pty and removes `linkPath` when the device goes down, and creates a
        /// fresh pty (usually at a new /dev/pts path) and link when it is back, as a USB CDC ACM port
        /// disappears and re-enumerates. Clients see EIO or hang-up, then must reopen the link.
        public var vanishOnReset: Bool
        /// Size of each receive line buffer (`CONFIG_UART_MCUMGR_RX_BUF_SIZE`): a console line longer
        /// than this, marker and newline included, is dropped. Nil (or `receiveLineCount` nil) = no line
        /// buffers: every line is taken at once (a link faster than any device, for speed tests).
        public var receiveLineSize: Int?
        /// Receive line buffers (`CONFIG_UART_MCUMGR_RX_BUF_COUNT`): lines beyond the free buffers are
        /// dropped until the device's next read gives buffers back (see `SerialLineBuffers`).
        public var receiveLineCount: Int?
        /// How often the device reads its console (20 ms on native_sim): lines are processed, and the
        /// requests they complete answered, at its reads.
        public var tick: Duration
        /// Called with the device's log line when a console line is dropped.
        public var onDrop: (@Sendable (String) -> Void)?
        /// Link faults to inject: frame loss both ways, duplication, reordering, delay, byte corruption
        /// both ways, console noise, lost lines, resets, silence.
        public var faults: FaultProfile = FaultProfile()
        /// Which stream of the fault seed the link draws from (`FaultPlan`): devices served side by side
        /// take different streams so their faults differ but replay.
        public var faultStream: UInt64 = 0

        /// Zephyr's defaults: `CONFIG_UART_MCUMGR_RX_BUF_SIZE` 128, `CONFIG_UART_MCUMGR_RX_BUF_COUNT` 2.
        public static let zephyrReceiveLineSize = 128
        public static let zephyrReceiveLineCount = 2

        public init(
            rawFraming: Bool = false, lineLength: Int = 127, baudRate: Int? = nil, latency: Duration = .zero,
            linkPath: String? = nil, vanishOnReset: Bool = false,
            receiveLineSize: Int? = Self.zephyrReceiveLineSize, receiveLineCount: Int? = Self.zephyrReceiveLineCount,
            tick: Duration = .milliseconds(20), onDrop: (@Sendable (String) -> Void)? = nil,
            faults: FaultProfile = FaultProfile(), faultStream: UInt64 = 0
        ) {
            self.faults = faults
            self.faultStream = faultStream
            self.rawFraming = rawFraming
            self.lineLength = lineLength
            self.baudRate = baudRate
            self.latency = latency
            self.linkPath = linkPath
            self.vanishOnReset = vanishOnReset
            self.receiveLineSize = receiveLineSize
            self.receiveLineCount = receiveLineCount
            self.tick = tick
            self.onDrop = onDrop
        }

        /// Whether console lines go through emulated line buffers.
        var emulatesLineBuffers: Bool { !rawFraming && receiveLineSize != nil && receiveLineCount != nil }
    }

    public let device: SimulatedDevice
    public let configuration: Configuration
    private let group: any EventLoopGroup
    private let state = NIOLockedValueBox<(channel: any Channel, slave: Int32, path: String)?>(nil)
    /// Reset observer token, started flag, and a generation that invalidates stale reappearances.
    private let lifecycle = NIOLockedValueBox<(observer: Int?, running: Bool, generation: Int, vanishings: Int)>((nil, false, 0, 0))

    public init(
        device: SimulatedDevice, configuration: Configuration = .init(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.device = device
        self.configuration = configuration
        self.group = group
    }

    /// The pty's device path (e.g. /dev/pts/3) once started; nil while a vanished pty is down.
    public var path: String? { state.withLockedValue { $0?.path } }

    /// Creates the pty and starts serving; returns its path.
    @discardableResult
    public func start() async throws -> String {
        let link = try await openLink()
        state.withLockedValue { $0 = link }
        lifecycle.withLockedValue { $0.running = true }
        if configuration.vanishOnReset {
            let token = device.addResetObserver { [weak self] event in self?.deviceReset(event) }
            lifecycle.withLockedValue { $0.observer = token }
        }
        return link.path
    }

    /// Whether the pty currently exists (false while a vanished link is down).
    public var isPresent: Bool { state.withLockedValue { $0 != nil } }

    /// How many times the pty went away for a reboot (`vanishOnReset`): a test that sees it gone and back
    /// without having to look while it is down.
    public var vanishings: Int { lifecycle.withLockedValue { $0.vanishings } }

    private func deviceReset(_ event: SimulatedResetEvent) {
        let generation = lifecycle.withLockedValue { value -> Int in
            value.generation += 1
            return value.generation
        }
        let loop = group.next()
        let now = SystemClock.monotonicNow()
        let delay: @Sendable (SMPInstant) -> TimeAmount = { instant in
            instant > now ? .nanoseconds(Int64(clamping: (instant - now).nanosecondsClamped)) : .zero
        }
        loop.scheduleTask(in: delay(event.rebootAt)) { [self] in
            guard lifecycle.withLockedValue({ $0.running && $0.generation == generation }) else { return }
            let link = state.withLockedValue { s -> (channel: any Channel, slave: Int32, path: String)? in
                defer { s = nil }
                return s
            }
            guard let link else { return }
            lifecycle.withLockedValue { $0.vanishings += 1 }
            if let path = configuration.linkPath { unlink(path) }
            link.channel.close(promise: nil)
            SystemCall.close(link.slave)
            loop.scheduleTask(in: delay(event.rebootingUntil)) { [self] in
                guard lifecycle.withLockedValue({ $0.running && $0.generation == generation }) else { return }
                Task {
                    guard let link = try? await self.openLink() else { return }
                    let keep = self.lifecycle.withLockedValue { $0.running && $0.generation == generation }
                    if keep {
                        self.state.withLockedValue { $0 = link }
                    } else {
                        try? await link.channel.close()
                        SystemCall.close(link.slave)
                        if let path = self.configuration.linkPath { unlink(path) }
                    }
                }
            }
        }
    }

    private func openLink() async throws -> (channel: any Channel, slave: Int32, path: String) {
        var master: Int32 = -1
        var slave: Int32 = -1
        guard openpty(&master, &slave, nil, nil, nil) == 0 else {
            throw SimulatorFrontEndError("openpty failed: \(String(cString: strerror(errno)))")
        }
        var t = termios()
        tcgetattr(slave, &t)
        cfmakeraw(&t)
        tcsetattr(slave, TCSANOW, &t)
        tcgetattr(master, &t)
        cfmakeraw(&t)
        tcsetattr(master, TCSANOW, &t)
        let flags = fcntl(master, F_GETFL)
        _ = fcntl(master, F_SETFL, flags | O_NONBLOCK)
        guard let name = ttyname(slave) else {
            SystemCall.close(master)
            SystemCall.close(slave)
            throw SimulatorFrontEndError("ttyname failed: \(String(cString: strerror(errno)))")
        }
        let path = String(cString: name)
        if let link = configuration.linkPath {
            unlink(link)
            guard symlink(path, link) == 0 else {
                let reason = String(cString: strerror(errno))
                SystemCall.close(master)
                SystemCall.close(slave)
                throw SimulatorFrontEndError("cannot create symlink \(link) -> \(path): \(reason)")
            }
        }
        let codec: any SMPFramingCodec =
            configuration.rawFraming
            ? RawSerialCodec() : ConsoleSerialCodec(maximumLineLength: configuration.lineLength)
        let lineBuffers =
            configuration.emulatesLineBuffers
            ? SerialLineBuffers(
                lineSize: configuration.receiveLineSize!, lineCount: configuration.receiveLineCount!,
                tick: configuration.tick)
            : nil
        let handler = SimulatorLinkHandler(
            device: device, codec: codec,
            emulation: LinkEmulation(baudRate: configuration.baudRate, latency: configuration.latency),
            lineBuffers: lineBuffers, onDrop: configuration.onDrop,
            faults: configuration.faults.isEmpty ? nil : FaultPlan(configuration.faults, stream: configuration.faultStream))
        let channel = try await NIOPipeBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .takingOwnershipOfDescriptor(inputOutput: master).get()
        // Keep a slave descriptor open ourselves: without one the master reads EIO whenever no client
        // has the port open.
        return (channel, slave, path)
    }

    /// Stops serving and removes the symlink.
    public func stop() async {
        let observer = lifecycle.withLockedValue { value -> Int? in
            value.running = false
            value.generation += 1
            defer { value.observer = nil }
            return value.observer
        }
        if let observer { device.removeResetObserver(observer) }
        guard let s = state.withLockedValue({ s -> (channel: any Channel, slave: Int32, path: String)? in
            defer { s = nil }
            return s
        }) else { return }
        try? await s.channel.close()
        SystemCall.close(s.slave)
        if let link = configuration.linkPath { unlink(link) }
    }
}

/// Decodes link bytes, hands whole requests to the device and writes back its answers, pacing both
/// directions when a baud rate is emulated.
final class SimulatorLinkHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    // Touched only on the channel's event loop.
    private let device: SimulatedDevice
    private var codec: any SMPFramingCodec
    private var emulation: LinkEmulation
    private var lineBuffers: SerialLineBuffers?
    private let onDrop: (@Sendable (String) -> Void)?
    /// Console framing: the frame's length and CRC share the SMP buffer with the packet.
    private let consoleFraming: Bool
    /// The origin of the device's ticks: when the handler joined its channel. Every time is read from
    /// the channel's event loop (the wall clock on a real one, virtual time in an `EmbeddedEventLoop`).
    private var start = NIODeadline.uptimeNanoseconds(0)
    /// The release time a task is scheduled for, if any.
    private var scheduledRelease: UInt64?
    private var faults: FaultPlan?
    /// Received bytes after the last newline, while lines are being dropped.
    private var partialLine: [UInt8] = []
    /// An answer held back by the reordering fault until the next one leaves.
    private var held: ByteBuffer?
    private var heldGeneration = 0
    /// When the device finishes the work (flash erases) of the last request that had some.
    private var busyUntil: NIODeadline?
    /// Raw framing into MCUboot's serial recovery: its own way of taking packets (`RecoveryRawInput`).
    private var recoveryInput: RecoveryRawInput?

    init(
        device: SimulatedDevice, codec: any SMPFramingCodec, emulation: LinkEmulation,
        lineBuffers: SerialLineBuffers? = nil, onDrop: (@Sendable (String) -> Void)? = nil,
        faults: FaultPlan? = nil
    ) {
        self.faults = faults
        self.consoleFraming = codec is ConsoleSerialCodec
        self.device = device
        self.codec = codec
        self.emulation = emulation
        self.lineBuffers = lineBuffers
        self.onDrop = onDrop
    }

    func handlerAdded(context: ChannelHandlerContext) {
        start = context.eventLoop.now
    }

    /// Nanoseconds since the handler started (the device's tick clock).
    private func elapsed(_ deadline: NIODeadline) -> UInt64 {
        deadline > start ? UInt64(deadline.uptimeNanoseconds - start.uptimeNanoseconds) : 0
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = Array(unwrapInboundIn(data).readableBytesView)
        if faults != nil {
            faults!.corrupt(&bytes)
            if consoleFraming, faults!.profile.lineLoss > 0 { bytes = keptLines(bytes) }
            if bytes.isEmpty { return }
        }
        let now = context.eventLoop.now
        let arrival = emulation.arrival(of: bytes.count, now: now)
        if arrival <= now {
            process(bytes, context: context)
        } else {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let bytes = bytes
            context.eventLoop.scheduleTask(deadline: arrival) {
                let (handler, context) = loopBound.value
                handler.process(bytes, context: context)
            }
        }
    }

    /// The whole lines in `bytes` (with what was left of the last read) that the line-loss fault keeps.
    private func keptLines(_ bytes: [UInt8]) -> [UInt8] {
        partialLine += bytes
        guard let last = partialLine.lastIndex(of: 0x0A) else { return [] }
        var kept: [UInt8] = []
        for line in partialLine[...last].split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
        where faults!.keepLine() {
            kept += line
            kept.append(0x0A)
        }
        partialLine = Array(partialLine[(last + 1)...])
        return kept
    }

    private func process(_ bytes: [UInt8], context: ChannelHandlerContext) {
        guard lineBuffers != nil else {
            decodeAndAnswer(bytes, context: context)
            return
        }
        let now = elapsed(context.eventLoop.now)
        releaseLines(upTo: now, context: context)
        let drops = lineBuffers!.receive(bytes, at: now)
        if let onDrop { for drop in drops { onDrop(drop.description) } }
        scheduleRelease(context: context)
    }

    /// Hands the lines the device has processed by `time` to the framing decoder, one by one; a line that
    /// completes a request keeps its buffer until the answer leaves.
    private func releaseLines(upTo time: UInt64, context: ChannelHandlerContext) {
        guard let lines = lineBuffers?.release(upTo: time) else { return }
        for line in lines {
            if let answeredAt = decodeAndAnswer(line, context: context) {
                lineBuffers?.holdProcessedBuffer(until: elapsed(answeredAt))
            }
        }
    }

    private func scheduleRelease(context: ChannelHandlerContext) {
        guard let next = lineBuffers?.nextRelease else { return }
        if let scheduled = scheduledRelease, scheduled <= next { return }
        scheduledRelease = next
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(deadline: start + .nanoseconds(Int64(clamping: next))) {
            let (handler, context) = loopBound.value
            if handler.scheduledRelease == next { handler.scheduledRelease = nil }
            handler.releaseLines(upTo: handler.elapsed(context.eventLoop.now), context: context)
            handler.scheduleRelease(context: context)
        }
    }

    /// The whole requests in `bytes`: through the framing codec, or, for raw framing into MCUboot's serial
    /// recovery, as the bootloader takes them (`RecoveryRawInput`).
    private func requests(in bytes: [UInt8]) -> [[UInt8]] {
        guard !consoleFraming, device.runMode == .serialRecovery else {
            recoveryInput = nil
            return codec.decode(bytes).compactMap { event in
                if case .packet(let request) = event { return request }
                return nil
            }
        }
        if recoveryInput == nil {
            let bootloader = device.configuration.bootloader
            recoveryInput = RecoveryRawInput(
                bufferSize: bootloader.serialRecoveryBufferSize, busyCapacity: bootloader.serialRecoveryBusyReceiveLimit)
        }
        let now = NIODeadline.now()
        func instant(_ deadline: NIODeadline) -> SMPInstant { SMPInstant(nanoseconds: deadline.uptimeNanoseconds) }
        return recoveryInput!.receive(bytes, now: instant(now), busyUntil: busyUntil.map(instant))
    }

    /// Decodes bytes, answers every request they complete; returns when the last answer leaves, if any.
    @discardableResult
    private func decodeAndAnswer(_ bytes: [UInt8], context: ChannelHandlerContext) -> NIODeadline? {
        var answeredAt: NIODeadline?
        for request in requests(in: bytes) {
            // uart_mcumgr reassembles a frame (length, packet, CRC) in one SMP buffer: a packet of more
            // than buf_size - 4 bytes is dropped (native_sim_serial_fs: 1024-byte packet, buf_size 1024).
            // MCUboot's serial recovery takes one byte more: packets of up to MCUBOOT_SERIAL_MAX_RECEIVE_SIZE
            // - 3 (1021 of 1024 answered, 1022 dropped on the shared mps2_an385 MCUboot).
            let overhead = device.runMode == .serialRecovery ? 3 : 4
            if consoleFraming, request.count + overhead > device.currentBufferSize { continue }
            if faults != nil {
                switch faults!.request(request) {
                case .deliver: break
                case .lose, .silence: continue
                case .reset:
                    device.powerCycle()
                    continue
                }
            }
            guard let (response, busy) = device.handleUnlessRebootingWithBusyTime(request) else { continue }
            var encoded = context.channel.allocator.buffer(capacity: response.count * 2)
            var fate = FaultPlan.AnswerFate.send(copies: 1, delay: .zero)
            if faults != nil {
                var bytes: [UInt8] = []
                for unit in codec.encode(response) {
                    if consoleFraming, let noise = faults!.noiseLine() { bytes += noise }
                    bytes += unit
                }
                faults!.corrupt(&bytes)
                encoded.writeBytes(bytes)
                fate = faults!.answer()
            } else {
                for unit in codec.encode(response) { encoded.writeBytes(unit) }
            }
            var buffer = encoded
            // With line buffers this runs at the device's read that completed the request (see
            // `releaseLines`), and the answer leaves at once.
            var ready = context.eventLoop.now
            // A device still working on an earlier request (serial recovery erasing flash) answers after it,
            // and this request's own work (its erase) comes before its answer.
            if let busyUntil, busyUntil > ready { ready = busyUntil }
            if busy > .zero {
                ready = ready + .nanoseconds(Int64(clamping: busy.nanosecondsClamped))
                busyUntil = ready
            }
            answeredAt = ready
            switch fate {
            case .send(let copies, let delay):
                if copies == 0 { continue }
                if delay > .zero { ready = ready + .nanoseconds(Int64(clamping: delay.nanosecondsClamped)) }
                let copy = buffer
                for _ in 1..<copies { buffer.writeImmutableBuffer(copy) }
                if let previous = held {
                    held = nil
                    heldGeneration += 1
                    buffer.writeImmutableBuffer(previous)
                }
            case .holdForNext(let delay):
                // Reordering: this answer leaves right behind the next one, or late on its own.
                let late = ready + .nanoseconds(Int64(clamping: delay.nanosecondsClamped)) + .milliseconds(50)
                if let previous = held { buffer.writeImmutableBuffer(previous) }
                held = buffer
                heldGeneration += 1
                let generation = heldGeneration
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(deadline: late) {
                    let (handler, context) = loopBound.value
                    guard handler.heldGeneration == generation, let bytes = handler.held else { return }
                    handler.held = nil
                    handler.write(bytes, ready: context.eventLoop.now, context: context)
                }
                continue
            }
            write(buffer, ready: ready, context: context)
        }
        return answeredAt
    }

    /// Writes an answer when the emulated wire has room for it after `ready`.
    private func write(_ buffer: ByteBuffer, ready: NIODeadline, context: ChannelHandlerContext) {
        let now = context.eventLoop.now
        let departure = emulation.departure(of: buffer.readableBytes, now: ready)
        if departure <= now {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(deadline: departure) {
                let (handler, context) = loopBound.value
                context.writeAndFlush(handler.wrapOutboundOut(buffer), promise: nil)
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // EIO when no client holds the port open is normal for a pty master; keep serving.
        if let io = error as? IOError, io.errnoCode == EIO { return }
        context.fireErrorCaught(error)
    }
}
