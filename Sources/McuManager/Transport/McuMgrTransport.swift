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
///
/// Five requirements: a name, what the link carries (`linkLimits`), and open, send, close. Everything a
/// client needs to size packets and windows is in `LinkLimits`; what is kept between connections (round
/// trips, the device's buffers) is the client's (`McuMgrClient.Configuration`).
public protocol McuMgrTransport: AnyObject, Sendable {
    /// The device this transport talks to, as a URI, for messages.
    var name: String { get }

    /// What the link carries now: the value the transport declares from its configuration (packet size,
    /// framing overhead, frames in flight, how the device's buffers turn into requests in flight, session
    /// settings, erase resend floor, console lines), with what it learned on this connection (probing,
    /// or the device's buffers where the link asks for them). The client refines it with `os params`
    /// (`McuMgrClient.linkLimits`).
    var linkLimits: LinkLimits { get }

    /// Opens the link. Events are delivered to `handler` in order until `.closed`.
    /// - Throws: `McuMgrError` of kind `.transport` when the link cannot be opened.
    func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws

    /// Queues one whole SMP packet for sending. Packets go out in call order; failures arrive as
    /// `.closed(error)`.
    func send(_ packet: [UInt8]) throws

    /// Closes the link; `.closed(nil)` follows.
    func close() async
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
    /// Whether there is something to learn: the user did not fix the limits and no probe ran yet.
    var needsConsoleProbe: Bool { get }
    /// Adopts limits learned from the device (`linkLimits.consoleLines` then has them); `final` ends
    /// probing for this transport.
    func learnConsoleLines(_ lines: LinkLimits.ConsoleLines, final: Bool)
    /// Holds the next `count` frames and writes them in one write once the last is sent, so that they
    /// reach the device at once (the probe's frames sent together: written one by one from several tasks,
    /// a device read could fall between them on a loaded machine and make a burst look as if the device
    /// held it). `releaseWrites()` writes what is still held and ends the hold.
    func holdWrites(count: Int)
    func releaseWrites()
}

extension McuMgrConsoleLineTransport {
    /// The console line limits in force (the link's, else Zephyr's defaults).
    public var currentConsoleLines: LinkLimits.ConsoleLines { linkLimits.consoleLines ?? .zephyrDefault }

    /// A transport whose sends reach the device at once anyway holds nothing.
    public func holdWrites(count: Int) {}
    public func releaseWrites() {}
}
