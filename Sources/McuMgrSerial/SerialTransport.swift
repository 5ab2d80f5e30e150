import Logging
import McuManager
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// SMP over a serial port (USB CDC-ACM or UART): termios raw mode, console framing (Base64 lines,
/// CRC16) or raw packets, SwiftNIO on the file descriptor.
public final class SerialTransport: McuMgrTransport {
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
        /// Longest console frame line, markers and newline included (the device's limit; 127 on Zephyr).
        public var lineLength: Int
        /// Largest SMP packet to send; the device's `buf_size` - 4 also limits it.
        public var mtu: Int

        public init(
            path: String, baudRate: Int = 115_200, flowControl: Bool = false, framing: Framing = .console,
            lineLength: Int = 127, mtu: Int = 4096
        ) {
            self.path = path
            self.baudRate = baudRate
            self.flowControl = flowControl
            self.framing = framing
            self.lineLength = lineLength
            self.mtu = mtu
        }
    }

    public let configuration: Configuration
    public var name: String { "serial:\(configuration.path)" }
    public var mtu: Int { configuration.mtu }
    public var sessionDefaults: SMPSessionConfiguration { SMPSessionConfiguration(window: 1) }

    private let encoder: any SMPFramingCodec
    private let group: any EventLoopGroup
    private let logger: Logger
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    public init(
        configuration: Configuration, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "mcumgr.serial", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.configuration = configuration
        self.encoder = Self.makeCodec(configuration)
        self.group = group
        self.logger = logger
    }

    static func makeCodec(_ configuration: Configuration) -> any SMPFramingCodec {
        switch configuration.framing {
        case .console: return ConsoleSerialCodec(maximumLineLength: configuration.lineLength)
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
            codec: Self.makeCodec(configuration), name: name, path: configuration.path, handler: handler)
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
        let units = encoder.encode(packet)
        var buffer = channel.allocator.buffer(capacity: units.reduce(0) { $0 + $1.count })
        for unit in units { buffer.writeBytes(unit) }
        channel.writeAndFlush(buffer, promise: nil)
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
