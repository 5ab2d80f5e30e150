import McuMgrCore

/// What a transport reports to its client.
public enum McuMgrTransportEvent: Sendable {
    /// One whole SMP packet (header and payload) from the device.
    case packet([UInt8])
    /// Received bytes that the link codec had to discard.
    case dropped(SMPFramingDrop)
    /// The link closed; with an error when it failed rather than being closed by us.
    case closed(McuMgrError?)
}

/// A transport plugin: moves whole SMP packets over one link, framing them with the link's codec
/// (an `SMPFramingCodec`). Serial, UDP, Bluetooth LE and the in-memory simulator conform.
public protocol McuMgrTransport: AnyObject, Sendable {
    /// The device this transport talks to, as a URI, for messages.
    var name: String { get }
    /// The largest SMP packet (header included) the link carries as one message.
    var mtu: Int { get }
    /// Session settings that suit this link (window, retransmission).
    var sessionDefaults: SMPSessionConfiguration { get }

    /// Opens the link. Events are delivered to `handler` in order until `.closed`.
    /// - Throws: `McuMgrError` of kind `.transport` when the link cannot be opened.
    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws

    /// Queues one whole SMP packet for sending. Packets go out in call order; failures arrive as
    /// `.closed(error)`.
    func send(_ packet: [UInt8]) throws

    /// Closes the link; `.closed(nil)` follows.
    func close() async

    /// The largest SMP packet to send to a device whose SMP buffer (`buf_size`) is `deviceBufferSize`.
    func maximumPacketSize(deviceBufferSize: Int) -> Int

    /// What the link carries now, before the device's own buffers are known: the starting value built from
    /// the transport's configuration, or what probing taught it since.
    var linkLimits: LinkLimits { get }

    /// Requests a device with `deviceBufferCount` SMP buffers (`buf_count`) takes in flight over this link.
    func framesInFlight(deviceBufferCount: Int) -> Int

    /// Where the client keeps the device's measured round trip between connections (it starts the
    /// adaptive resend timeout); nil (the default) to start from `sessionDefaults` every time.
    var roundTripMemory: RoundTripMemory? { get }

    /// Where transfers keep the device's buffers (`os params`) and unfinished file uploads between
    /// connections, so that a known device's uploads send neither `os params` nor a resume check; nil
    /// (the default) asks every time.
    var parametersMemory: DeviceParametersMemory? { get }

    /// The shortest wait before resending a request the device may take seconds to answer because it
    /// erases flash first (the first chunk of an image upload): a copy sent sooner only queues behind the
    /// erase, on a serial line in buffers the device needs for what follows. nil: resend it after the
    /// measured timeout like any other request (datagram links, where a copy costs nothing, the device
    /// drops what it has no buffer for, and a lost first chunk would otherwise cost the whole wait).
    /// Default: 2 s.
    var eraseResendFloor: Duration? { get }
}

extension McuMgrTransport {
    public func maximumPacketSize(deviceBufferSize: Int) -> Int { min(mtu, deviceBufferSize) }

    /// One buffer answers while the others hold requests.
    public func framesInFlight(deviceBufferCount: Int) -> Int { max(1, deviceBufferCount - 1) }

    public var roundTripMemory: RoundTripMemory? { nil }

    public var parametersMemory: DeviceParametersMemory? { nil }

    public var eraseResendFloor: Duration? { .seconds(2) }

    /// The packet limit is the MTU; the window ceiling is the session's (devices refine it with `buf_count`).
    public var linkLimits: LinkLimits {
        LinkLimits(maximumPacketSize: mtu, framesInFlight: max(sessionDefaults.window, 255))
    }
}

/// A transport that knows what a device's return code most likely means on its link: rc 9 (ECORRUPT)
/// is noise or a wrong baud rate on a serial line, but a device without SMP reassembly over Bluetooth.
public protocol McuMgrLinkAdvising: McuMgrTransport {
    /// What the user can do about `returnCode` on this link, or nil for the code's generic hint.
    func hint(for returnCode: McuMgrReturnCode) -> String?
    /// What the user can do when data arrived but could not be read as SMP packets.
    var unusableDataHint: String? { get }
    /// What the user can do when the link is up, requests went out and nothing at all came back
    /// within the timeout; nil for the generic advice.
    var noAnswerHint: String? { get }
}

extension McuMgrLinkAdvising {
    public var noAnswerHint: String? { nil }
}

/// A transport over a serial console whose line limits can be learned from the device (`LinkProbe`).
public protocol McuMgrConsoleLineTransport: McuMgrTransport {
    /// The console line limits in force.
    var currentConsoleLines: LinkLimits.ConsoleLines { get }
    /// Whether there is something to learn: the user did not fix the limits and no probe ran yet.
    var needsConsoleProbe: Bool { get }
    /// Adopts limits learned from the device; `final` ends probing for this transport.
    func learnConsoleLines(_ lines: LinkLimits.ConsoleLines, final: Bool)
    /// The pause between bursts of lines of one frame.
    var lineGap: Duration { get }
    /// Where limits learned on earlier connections are kept; nil to probe every time.
    var consoleLineMemory: ConsoleLineMemory? { get }
    /// The line's speed in bits per second when known (a UART's baud rate), to bound a frame's wire time.
    var bitsPerSecond: Int? { get }
}

extension McuMgrConsoleLineTransport {
    public var bitsPerSecond: Int? { nil }
}
