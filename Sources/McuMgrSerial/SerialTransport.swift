import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// SMP over a serial port (USB CDC-ACM or UART): termios raw mode, console framing (Base64 lines,
/// CRC16) or raw packets, SwiftNIO on the file descriptor. The port may also be remote: a raw TCP
/// socket (`tcp://HOST:PORT`, e.g. ser2net's `tcp` accepter) or Telnet with RFC 2217 port control
/// (`rfc2217://HOST:PORT`, ser2net's `telnet(rfc2217)`), with the same framing, link sizing and pacing.
public final class SerialTransport: McuMgrConsoleLineTransport {
    /// Where the serial port is.
    public enum Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// A local port, e.g. /dev/ttyACM0.
        case device(path: String)
        /// A raw TCP connection to a port server (bytes pass unchanged; the server sets the baud rate).
        case tcp(host: String, port: Int)
        /// Telnet with the RFC 2217 com port option: the baud rate and line settings are sent to the server.
        case rfc2217(host: String, port: Int)

        /// `serial:PATH`, `tcp://HOST:PORT` or `rfc2217://HOST:PORT` (an IPv6 host in brackets).
        public var description: String {
            switch self {
            case .device(let path): return "serial:\(path)"
            case .tcp(let host, let port): return "tcp://\(Self.hostPort(host, port))"
            case .rfc2217(let host, let port): return "rfc2217://\(Self.hostPort(host, port))"
            }
        }

        /// How messages name it: the port path, or the URI of a remote port.
        var displayName: String {
            if case .device(let path) = self { return path }
            return description
        }

        static func hostPort(_ host: String, _ port: Int) -> String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }

    /// How SMP packets are framed on the line.
    public enum Framing: String, Sendable, Hashable, CaseIterable {
        /// SMP over console: 0x06 0x09 / 0x04 0x14 lines, Base64, length and CRC16 (the default).
        case console
        /// Raw binary packets back to back (Zephyr raw UART transport).
        case raw
    }

    /// Serial port settings.
    public struct Configuration: Sendable, Hashable {
        /// Where the port is.
        public var endpoint: Endpoint
        /// The local port, e.g. /dev/ttyACM0 (setting it makes the endpoint local); a remote endpoint's URI.
        public var path: String {
            get { endpoint.displayName }
            set { endpoint = .device(path: newValue) }
        }
        /// Applied to a local port, and sent to an RFC 2217 server; a raw TCP server keeps its own.
        public var baudRate: Int
        /// RTS/CTS hardware flow control (local port, or sent to an RFC 2217 server).
        public var flowControl: Bool
        /// Data bits, parity and stop bits sent to an RFC 2217 server (8N1 unless set); a local port is
        /// always 8N1.
        public var dataBits: Int = 8
        public var parity: RFC2217Codec.Parity = .none
        public var stopBits: RFC2217Codec.StopBits = .one
        /// How long connecting to a remote port (and its RFC 2217 negotiation) may take.
        public var connectTimeout: Duration = .seconds(5)
        public var framing: Framing
        /// Longest console frame line, markers and newline included; nil starts from Zephyr's default
        /// (127, for its 128-byte line buffers) and lets probing find longer lines the device takes.
        public var lineLength: Int?
        /// Receive lines the device holds at once; nil starts from Zephyr's default (2) and lets probing
        /// find more. Longer frames are sent in bursts of this many lines, `lineGap` apart.
        public var lines: Int?
        /// Pause between bursts of `lines` lines of one frame: the device frees its line buffers once it
        /// has read and handled them. Zephyr's native_sim reads its pty every 20 ms; a second burst sent
        /// 30 ms after the first (which follows an answer, itself written at a read) arrives midway
        /// between the next two reads, so the device's or the host's lateness of up to 10 ms either way
        /// still puts the two bursts into different reads.
        public var lineGap: Duration
        /// `lineGap` unless the device URI says otherwise (`gap=`).
        public static let defaultLineGap = Duration.milliseconds(30)
        /// Largest SMP packet to send; nil lets the line limits and the device's `buf_size` decide.
        public var mtu: Int?
        /// Requests in flight at once; nil lets the device's buffers and line buffers decide: with
        /// Zephyr's default 2 lines, two one-line requests (a download's) or one frame that fills both (a
        /// second that arrives before the first is answered is dropped).
        public var window: Int?
        /// Resend a request that got no answer after this fixed interval instead of the timeout measured
        /// from round trips (`retransmit=` in the device URI): for a device whose answers come late now and
        /// then, or a test that counts the requests a command decides to send.
        public var retransmitInterval: Duration?

        public init(
            path: String, baudRate: Int = 115_200, flowControl: Bool = false, framing: Framing = .console,
            lineLength: Int? = nil, lines: Int? = nil, lineGap: Duration = Configuration.defaultLineGap, mtu: Int? = nil,
            window: Int? = nil
        ) {
            self.init(
                endpoint: .device(path: path), baudRate: baudRate, flowControl: flowControl, framing: framing,
                lineLength: lineLength, lines: lines, lineGap: lineGap, mtu: mtu, window: window)
        }

        /// A port at `endpoint`: local, raw TCP or RFC 2217.
        public init(
            endpoint: Endpoint, baudRate: Int = 115_200, flowControl: Bool = false, framing: Framing = .console,
            lineLength: Int? = nil, lines: Int? = nil, lineGap: Duration = Configuration.defaultLineGap, mtu: Int? = nil,
            window: Int? = nil
        ) {
            self.endpoint = endpoint
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
    public var name: String { configuration.endpoint.description }
    /// The session on a serial line: a frame the device drops (a CRC error, a full line buffer) gets no
    /// answer, so it is resent after the measured timeout, not sooner than 300 ms (devices erase flash
    /// sectors between chunks; a late copy is answered and ignored). A frame we drop is resent at once
    /// (`answerLost`).
    private var session: SMPSessionConfiguration {
        SMPSessionConfiguration(
            window: configuration.window ?? 1, retransmitInterval: configuration.retransmitInterval,
            adaptiveRetransmit: true, retransmitFloor: .milliseconds(300), maximumRetransmits: 16)
    }

    /// What the link carries now: the console line limits in force (configured, or learned by probing)
    /// bound the packet that goes out in one frame (one burst, or the bursts per frame the probe found
    /// worth pacing), and longer frames go in bursts `lineGap` apart;
    /// console framing spends 4 bytes of the device's buffer on length and CRC; `window=` frames in
    /// flight, else as many as the device's buffers and line buffers hold (a request keeps its lines
    /// until answered: `LinkLimits.window(forPacket:)`); a 2 s erase resend floor. The line's speed: the configured baud rate (a pty ignores it:
    /// there it bounds the wire time from above); for an RFC 2217 port the rate the server acknowledged;
    /// unknown behind a raw TCP port server.
    public var linkLimits: LinkLimits {
        let bitsPerSecond: Int? =
            switch configuration.endpoint {
            case .device: configuration.baudRate
            case .rfc2217: acknowledgedBaudRate.withLockedValue { $0 } ?? configuration.baudRate
            case .tcp: nil
            }
        switch configuration.framing {
        case .console:
            let lines = consoleLines.withLockedValue { $0 }
            return LinkLimits(
                maximumPacketSize: min(configuration.mtu ?? lines.largestPacketPerFrame, ConsoleSerialCodec.largestEncodablePacketSize),
                framingOverhead: 4, consoleLines: lines, lineGap: configuration.lineGap, bitsPerSecond: bitsPerSecond,
                framesInFlight: configuration.window ?? lines.count, framesFollowConsoleLines: configuration.window == nil,
                session: session)
        case .raw:
            return LinkLimits(
                maximumPacketSize: configuration.mtu ?? Self.defaultRawMTU, bitsPerSecond: bitsPerSecond,
                framesInFlight: configuration.window ?? 1, session: session)
        }
    }

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
            length: configuration.lineLength ?? learned.length, count: configuration.lines ?? learned.count,
            burstsPerFrame: learned.burstsPerFrame)
        consoleLines.withLockedValue { $0 = lines }
        if final { probed.withLockedValue { $0 = true } }
    }

    private let consoleLines: NIOLockedValueBox<LinkLimits.ConsoleLines>
    private let probed = NIOLockedValueBox(false)
    let group: any EventLoopGroup
    let logger: Logger
    let channel = NIOLockedValueBox<(any Channel)?>(nil)
    /// The pacing of console bursts (see `send`).
    private let pacing = NIOLockedValueBox(Pacing())
    /// Frames held to be written together (`holdWrites(count:)`): how many more, and their bytes.
    private let held = NIOLockedValueBox<(remaining: Int, bytes: [UInt8])?>(nil)
    let acknowledgedBaudRate = NIOLockedValueBox<Int?>(nil)
    /// Why the open link ended, once its close event came (nil while it is up, and before it opened).
    private let ended = NIOLockedValueBox<McuMgrError?>(nil)

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

    public func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        switch configuration.endpoint {
        case .device: try await openDevice(handler)
        case .tcp(let host, let port): try await openRemote(host: host, port: port, rfc2217: false, handler)
        case .rfc2217(let host, let port): try await openRemote(host: host, port: port, rfc2217: true, handler)
        }
    }

    private func openDevice(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
        let fd = try Termios.openRaw(
            path: configuration.path, baud: configuration.baudRate, flowControl: configuration.flowControl)
        let inbound = LinkInboundHandler(
            codec: Self.makeCodec(configuration, lineLength: ConsoleSerialCodec.defaultMaximumLineLength),
            name: name, messages: .device(configuration.path), handler: recordingTheEnd(handler))
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
            throw McuMgrError(.transport, "cannot attach to serial port \(configuration.path): \(error)", cause: error)
        }
    }

    /// `handler`, and the reason the link ended (its `.closed` event) kept for `send`: a request that finds
    /// the link down says what the close event says, whichever of the two the client sees first. Answers
    /// go to the pacing too (`Pacing.heardAnswer(at:)`).
    func recordingTheEnd(
        _ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) -> @Sendable (McuMgrTransportEvent) -> Void {
        let ended = self.ended
        let pacing = self.pacing
        let channel = self.channel
        ended.withLockedValue { $0 = nil }
        return { event in
            switch event {
            case .closed(let error): ended.withLockedValue { $0 = error }
            case .packet:
                if let now = channel.withLockedValue({ $0?.eventLoop.now }) {
                    pacing.withLockedValue { $0.heardAnswer(at: now) }
                }
            case .dropped: break
            }
            handler(event)
        }
    }

    public func send(_ packet: [UInt8]) throws {
        guard let channel = channel.withLockedValue({ $0 }), channel.isActive else {
            // Opened and gone (not closed on purpose): what its close event says, or will say.
            if self.channel.withLockedValue({ $0 }) != nil {
                if let reason = ended.withLockedValue({ $0 }) { throw reason }
                let messages: LinkInboundHandler.Messages =
                    if case .device(let path) = configuration.endpoint { .device(path) } else { .remote(name) }
                throw McuMgrError(.transport, messages.closed)
            }
            switch configuration.endpoint {
            case .device(let path):
                throw McuMgrError(.transport, "serial port \(path) is not open; the board may have been unplugged or reset")
            default:
                throw McuMgrError(.transport, "\(name) is not connected; the port server may have closed the connection")
            }
        }
        guard configuration.framing == .console else {
            Self.write(packet, to: channel)
            return
        }
        let lines = consoleLines.withLockedValue { $0 }
        guard packet.count <= ConsoleSerialCodec.largestEncodablePacketSize else {
            throw McuMgrError(
                .usage, "a \(packet.count)-byte request does not fit a serial frame (at most \(ConsoleSerialCodec.largestEncodablePacketSize) bytes)")
        }
        let units = ConsoleSerialCodec(maximumLineLength: lines.length).encode(packet)
        // A frame of one burst held to go with others (`holdWrites(count:)`).
        if units.count <= lines.count, let batch = hold(units.flatMap { $0 }) {
            if !batch.isEmpty { Self.write(batch, to: channel) }
            return
        }
        // The device holds `lines.count` lines: a longer frame goes out in bursts that many lines long,
        // one line-buffer release (`lineGap`) apart. Later frames queue behind paced ones until the
        // device answers (`Pacing`). Time is the channel's event loop's (virtual on an
        // `EmbeddedEventLoop`, so the pacing is tested without waiting).
        let bursts = lines.bursts(of: units, gap: configuration.lineGap)
        let now = channel.eventLoop.now
        let first = pacing.withLockedValue {
            $0.start(
                bursts: bursts.count, lastDelay: Self.timeAmount(bursts.last?.delay ?? .zero),
                gap: Self.timeAmount(configuration.lineGap), now: now)
        }
        for burst in bursts {
            var filling = channel.allocator.buffer(capacity: burst.lines.reduce(0) { $0 + $1.count })
            for line in burst.lines { filling.writeBytes(line) }
            let buffer = filling
            let deadline = first + Self.timeAmount(burst.delay)
            if deadline <= now {
                channel.writeAndFlush(buffer, promise: nil)
            } else {
                channel.eventLoop.scheduleTask(deadline: deadline) { channel.writeAndFlush(buffer, promise: nil) }
            }
        }
    }

    public func holdWrites(count: Int) {
        held.withLockedValue { $0 = count > 0 ? (count, []) : nil }
    }

    public func releaseWrites() {
        let bytes = held.withLockedValue { batch -> [UInt8] in
            defer { batch = nil }
            return batch?.bytes ?? []
        }
        guard !bytes.isEmpty, let channel = channel.withLockedValue({ $0 }) else { return }
        Self.write(bytes, to: channel)
    }

    private static func write(_ bytes: [UInt8], to channel: any Channel) {
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        channel.writeAndFlush(buffer, promise: nil)
    }

    /// Adds a frame's bytes to the held ones: nil when nothing is held (send it now); else the bytes to
    /// write now, all the held frames' once this was the last, or nothing yet.
    private func hold(_ frame: [UInt8]) -> [UInt8]? {
        held.withLockedValue { batch -> [UInt8]? in
            guard var current = batch else { return nil }
            current.bytes += frame
            current.remaining -= 1
            if current.remaining > 0 {
                batch = current
                return []
            }
            batch = nil
            return current.bytes
        }
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

    /// What the link's failure and closure messages say.
    enum Messages: Sendable {
        /// A local serial port (its path).
        case device(String)
        /// A remote port (its URI, `tcp://...` or `rfc2217://...`).
        case remote(String)

        func failed(_ error: any Error) -> String {
            switch self {
            case .device(let path):
                return "serial port \(path) failed (\(error)): the board was unplugged, reset or re-enumerated; reconnect it and retry"
            case .remote(let uri):
                if isConnectionReset(error) { return closed }
                return "connection to \(uri) failed (\(error)): the port server or the network went away; check it and retry"
            }
        }

        var closed: String {
            switch self {
            case .device(let path):
                return "serial port \(path) closed: the board was unplugged, reset or re-enumerated; reconnect it and retry"
            case .remote(let uri):
                return "connection to \(uri) closed by the server: the port server (e.g. ser2net) stopped, lost its serial port or gave it to another client; check it and retry"
            }
        }
    }

    private let codec: NIOLockedValueBox<any SMPFramingCodec>
    private let name: String
    private let messages: Messages
    private let handler: @Sendable (McuMgrTransportEvent) -> Void
    private let closedReported = NIOLockedValueBox(false)
    private let failure = NIOLockedValueBox<McuMgrError?>(nil)

    init(
        codec: any SMPFramingCodec, name: String, messages: Messages,
        handler: @escaping @Sendable (McuMgrTransportEvent) -> Void
    ) {
        self.codec = NIOLockedValueBox(codec)
        self.name = name
        self.messages = messages
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
        let message = messages.failed(error)
        failure.withLockedValue { $0 = $0 ?? McuMgrError(.transport, message) }
        context.close(promise: nil)
    }

    /// Reports `error` as the reason the link closes (e.g. the RFC 2217 server withdrew the port).
    func fail(_ error: McuMgrError) {
        failure.withLockedValue { $0 = $0 ?? error }
    }

    func channelInactive(context: ChannelHandlerContext) {
        let already = closedReported.withLockedValue { v -> Bool in
            defer { v = true }
            return v
        }
        guard !already else { return }
        let error = failure.withLockedValue { $0 } ?? McuMgrError(.transport, messages.closed)
        handler(.closed(error))
    }
}

extension SerialTransport {
    /// When a console frame's first burst may go: a frame of several bursts takes the device's line
    /// buffers until a gap after its last burst, and frames behind it queue until then, unless the
    /// device answered after that last burst went out. Such an answer means the device handled every
    /// line sent (a frame of several bursts is alone in flight, `LinkLimits.framesInFlight(forPacket:)`),
    /// so the next frame goes at once: at the start of the device's read period that the answer marks,
    /// as early as it can be taken. Times are the channel's event loop's.
    struct Pacing: Sendable {
        /// When the line buffers are free again after the last paced frame.
        var until = NIODeadline.uptimeNanoseconds(0)
        /// When the last burst of the last paced frame goes out.
        var lastBurst = NIODeadline.uptimeNanoseconds(0)
        /// An answer came after that last burst went out.
        var answered = false

        /// An answer arrived at `now`.
        mutating func heardAnswer(at now: NIODeadline) {
            if now >= lastBurst { answered = true }
        }

        /// Plans a frame of `bursts` bursts, the last `lastDelay` after the first, at `now`; returns
        /// when its first burst goes.
        mutating func start(bursts: Int, lastDelay: TimeAmount, gap: TimeAmount, now: NIODeadline) -> NIODeadline {
            if answered { until = min(until, now) }
            answered = false
            let first = max(until, now)
            if bursts > 1 {
                lastBurst = first + lastDelay
                until = lastBurst + gap
            }
            return first
        }
    }
}

extension SerialTransport: McuMgrLinkAdvising {
    /// A request the device could not parse came over a noisy line or at another baud rate.
    public func hint(for returnCode: McuMgrReturnCode) -> String? {
        returnCode.rawValue == 9 ? "check the link for noise or a wrong baud rate" : nil
    }

    public var unusableDataHint: String? { "check the baud rate and framing (console vs raw)" }

    /// The link limits the device URI fixes (`line=`, `lines=`, `gap=`, `mtu=`, `window=`): `smp` sends
    /// exactly what they allow and learns nothing over them, so a device that drops such lines or frames
    /// answers nothing, and the advice names them first.
    public var noAnswerHint: String? {
        var fixed: [String] = []
        if let line = configuration.lineLength { fixed.append("line=\(line)") }
        if let lines = configuration.lines { fixed.append("lines=\(lines)") }
        if configuration.lineGap != Configuration.defaultLineGap {
            fixed.append("gap=\(configuration.lineGap.milliseconds)")
        }
        if let mtu = configuration.mtu { fixed.append("mtu=\(mtu)") }
        if let window = configuration.window { fixed.append("window=\(window)") }
        guard !fixed.isEmpty else { return nil }
        return "The device URI fixes \(fixed.joined(separator: ", ")), and smp sends exactly that, without learning the link: "
            + "a device whose line buffers drop such lines or frames answers nothing. Try without \(fixed.count == 1 ? "it" : "them"); "
            + "else check that the device is connected and powered and runs firmware with SMP enabled."
    }
}
