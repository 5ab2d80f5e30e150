import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// SMP over a serial port (USB CDC-ACM or UART): termios raw mode, console framing (Base64 lines,
/// CRC16) or raw packets, SwiftNIO on the file descriptor.
public final class SerialTransport: McuMgrConsoleLineTransport {
    /// How SMP packets are framed on the line.
    public enum Framing: String, Sendable, Hashable, CaseIterable {
        /// SMP over console: 0x06 0x09 / 0x04 0x14 lines, Base64, length and CRC16 (the default).
        case console
        /// Raw binary packets back to back (Zephyr raw UART transport).
        case raw
    }

    /// Serial port settings.
    public struct Configuration: Sendable, Hashable {
        /// The port, e.g. /dev/ttyACM0.
        public var path: String
        public var baudRate: Int
        /// RTS/CTS hardware flow control.
        public var flowControl: Bool
        public var framing: Framing
        /// Longest console frame line, markers and newline included; nil starts from Zephyr's default
        /// (127, for its 128-byte line buffers) and lets probing find longer lines the device takes.
        public var lineLength: Int?
        /// Receive lines the device holds at once; nil starts from Zephyr's default (2) and lets probing
        /// find more. Longer frames are sent in bursts of this many lines, `lineGap` apart.
        public var lines: Int?
        /// Pause between bursts of `lines` lines of one frame: the device frees its line buffers on its
        /// next scheduling tick (10 ms on Zephyr's native_sim).
        public var lineGap: Duration
        /// Largest SMP packet to send; nil lets the line limits and the device's `buf_size` decide.
        public var mtu: Int?
        /// Requests in flight at once; nil lets the device's buffers decide (1 on a console with
        /// Zephyr's default line buffers, which drop a second frame that arrives before the first is answered).
        public var window: Int?
        /// Where line limits learned by probing are kept for the next connection; nil probes every time.
        public var consoleLineMemory: ConsoleLineMemory?

        public init(
            path: String, baudRate: Int = 115_200, flowControl: Bool = false, framing: Framing = .console,
            lineLength: Int? = nil, lines: Int? = nil, lineGap: Duration = .milliseconds(20), mtu: Int? = nil,
            window: Int? = nil, consoleLineMemory: ConsoleLineMemory? = nil
        ) {
            self.consoleLineMemory = consoleLineMemory
            self.path = path
            self.baudRate = baudRate
            self.flowControl = flowControl
            self.framing = framing
            self.lineLength = lineLength
            self.lines = lines
            self.lineGap = lineGap
            self.mtu = mtu
            self.window = window
        }

        /// The line limits to start from.
        public var initialConsoleLines: LinkLimits.ConsoleLines {
            LinkLimits.ConsoleLines(
                length: lineLength ?? LinkLimits.ConsoleLines.zephyrDefault.length,
                count: lines ?? LinkLimits.ConsoleLines.zephyrDefault.count)
        }
    }

    /// Raw framing has no line buffers; without `mtu=` packets are bounded by this.
    public static let defaultRawMTU = 4096

    public let configuration: Configuration
    public var name: String { "serial:\(configuration.path)" }
    public var mtu: Int { linkLimits.maximumPacketSize }
    public var sessionDefaults: SMPSessionConfiguration {
        // A frame the device drops (a CRC error, a full line buffer) gets no answer: resend after the
        // measured timeout, not sooner than 300 ms (devices erase flash sectors between chunks; a late
        // copy is answered and ignored). A frame we drop is resent at once (`answerLost`).
        SMPSessionConfiguration(
            window: configuration.window ?? 1, adaptiveRetransmit: true, retransmitFloor: .milliseconds(300),
            maximumRetransmits: 16)
    }

    /// What the link carries now: the console line limits (configured, or learned by probing) bound the
    /// packet that goes out in one burst.
    public var linkLimits: LinkLimits {
        let lines = consoleLines.withLockedValue { $0 }
        switch configuration.framing {
        case .console:
            let burst = lines.largestPacketPerBurst
            return LinkLimits(
                maximumPacketSize: min(configuration.mtu ?? burst, ConsoleSerialCodec.largestEncodablePacketSize),
                consoleLines: lines, framesInFlight: configuration.window ?? 1)
        case .raw:
            return LinkLimits(
                maximumPacketSize: configuration.mtu ?? Self.defaultRawMTU, framesInFlight: configuration.window ?? 1)
        }
    }

    public var lineGap: Duration { configuration.lineGap }
    public var consoleLineMemory: ConsoleLineMemory? { configuration.consoleLineMemory }
    /// The configured baud rate (a pty ignores it: there it bounds the wire time from above).
    public var bitsPerSecond: Int? { configuration.baudRate }

    /// The console line limits in force; probing may raise them.
    public var currentConsoleLines: LinkLimits.ConsoleLines { consoleLines.withLockedValue { $0 } }

    /// Whether a probe may teach something: console framing, line limits not fixed by the user
    /// (`line=` and `lines=`, or `mtu=`), and no probe yet on this transport.
    public var needsConsoleProbe: Bool {
        guard configuration.framing == .console, configuration.mtu == nil,
            configuration.lineLength == nil || configuration.lines == nil
        else { return false }
        return !probed.withLockedValue { $0 }
    }

    /// Adopts line limits learned from the device (by `LinkProbe`); options the user gave stay as given.
    public func learnConsoleLines(_ learned: LinkLimits.ConsoleLines, final: Bool) {
        let lines = LinkLimits.ConsoleLines(
            length: configuration.lineLength ?? learned.length, count: configuration.lines ?? learned.count)
        consoleLines.withLockedValue { $0 = lines }
        if final { probed.withLockedValue { $0 = true } }
    }

    private let consoleLines: NIOLockedValueBox<LinkLimits.ConsoleLines>
    private let probed = NIOLockedValueBox(false)
    private let group: any EventLoopGroup
    private let logger: Logger
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)
    /// When the line buffers of the device are free again after the last paced burst.
    private let pacedUntil = NIOLockedValueBox<NIODeadline>(.uptimeNanoseconds(0))

    public init(
        configuration: Configuration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "mcumgr.serial", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.configuration = configuration
        self.consoleLines = NIOLockedValueBox(configuration.initialConsoleLines)
        self.group = group
        self.logger = logger
    }

    static func makeCodec(_ configuration: Configuration, lineLength: Int) -> any SMPFramingCodec {
        switch configuration.framing {
        case .console: return ConsoleSerialCodec(maximumLineLength: lineLength)
        case .raw: return RawSerialCodec()
        }
    }

    /// The serial link spends 4 bytes of the device's buffer on length and CRC.
    public func maximumPacketSize(deviceBufferSize: Int) -> Int {
        min(mtu, deviceBufferSize - (configuration.framing == .console ? 4 : 0))
    }

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let fd = try Termios.openRaw(
            path: configuration.path, baud: configuration.baudRate, flowControl: configuration.flowControl)
        let inbound = LinkInboundHandler(
            codec: Self.makeCodec(configuration, lineLength: ConsoleSerialCodec.defaultMaximumLineLength),
            name: name, path: configuration.path, handler: handler)
        do {
            let channel = try await NIOPipeBootstrap(group: group)
                .channelOption(.allowRemoteHalfClosure, value: false)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(inbound)
                    }
                }
                .takingOwnershipOfDescriptor(inputOutput: fd).get()
            self.channel.withLockedValue { $0 = channel }
        } catch {
            throw McuMgrError(.transport, "cannot attach to serial port \(configuration.path): \(error)")
        }
    }

    public func send(_ packet: [UInt8]) throws {
        guard let channel = channel.withLockedValue({ $0 }), channel.isActive else {
            throw McuMgrError(.transport, "serial port \(configuration.path) is not open; the board may have been unplugged or reset")
        }
        guard configuration.framing == .console else {
            var buffer = channel.allocator.buffer(capacity: packet.count)
            buffer.writeBytes(packet)
            channel.writeAndFlush(buffer, promise: nil)
            return
        }
        let lines = currentConsoleLines
        guard packet.count <= ConsoleSerialCodec.largestEncodablePacketSize else {
            throw McuMgrError(
                .usage, "a \(packet.count)-byte request does not fit a serial frame (at most \(ConsoleSerialCodec.largestEncodablePacketSize) bytes)")
        }
        let units = ConsoleSerialCodec(maximumLineLength: lines.length).encode(packet)
        // The device holds `lines.count` lines: a longer frame goes out in bursts that many lines long,
        // one line-buffer release (`lineGap`) apart. Bursts of later frames queue behind paced ones.
        let bursts = lines.bursts(of: units, gap: configuration.lineGap)
        let now = NIODeadline.now()
        let first = pacedUntil.withLockedValue { max($0, now) }
        if bursts.count > 1, let last = bursts.last {
            // The last burst's lines are freed a gap after it arrives, too.
            pacedUntil.withLockedValue { $0 = first + Self.timeAmount(last.delay + configuration.lineGap) }
        }
        for burst in bursts {
            var buffer = channel.allocator.buffer(capacity: burst.lines.reduce(0) { $0 + $1.count })
            for line in burst.lines { buffer.writeBytes(line) }
            let deadline = first + Self.timeAmount(burst.delay)
            if deadline <= now {
                channel.writeAndFlush(buffer, promise: nil)
            } else {
                channel.eventLoop.scheduleTask(deadline: deadline) { channel.writeAndFlush(buffer, promise: nil) }
            }
        }
    }

    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(clamping: duration.nanosecondsClamped))
    }

    public func close() async {
        let channel = self.channel.withLockedValue { c -> (any Channel)? in
            defer { c = nil }
            return c
        }
        try? await channel?.close()
    }
}

/// Feeds received link bytes through a framing codec and reports packets, drops and closure.
final class LinkInboundHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private let codec: NIOLockedValueBox<any SMPFramingCodec>
    private let name: String
    private let path: String
    private let handler: @Sendable (McuMgrTransportEvent) -> Void
    private let closedReported = NIOLockedValueBox(false)
    private let failure = NIOLockedValueBox<McuMgrError?>(nil)

    init(codec: any SMPFramingCodec, name: String, path: String, handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) {
        self.codec = NIOLockedValueBox(codec)
        self.name = name
        self.path = path
        self.handler = handler
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let bytes = Array(buffer.readableBytesView)
        let events = codec.withLockedValue { $0.decode(bytes) }
        for event in events {
            switch event {
            case .packet(let packet): handler(.packet(packet))
            case .dropped(let drop): handler(.dropped(drop))
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failure.withLockedValue {
            $0 = McuMgrError(
                .transport,
                "serial port \(path) failed (\(error)): the board was unplugged, reset or re-enumerated; reconnect it and retry"
            )
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let already = closedReported.withLockedValue { v -> Bool in
            defer { v = true }
            return v
        }
        guard !already else { return }
        let error =
            failure.withLockedValue { $0 }
            ?? McuMgrError(
                .transport,
                "serial port \(path) closed: the board was unplugged, reset or re-enumerated; reconnect it and retry")
        handler(.closed(error))
    }
}
