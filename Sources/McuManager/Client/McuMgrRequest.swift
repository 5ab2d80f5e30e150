import McuMgrCore

/// A typed SMP request: its group, command and operation, its CBOR body (its `Encodable` fields) and
/// the type its successful response decodes to. Custom groups are supported by defining one.
public protocol McuMgrRequest: Encodable, Sendable {
    associatedtype Response: Decodable & Sendable
    static var group: McuMgrGroup { get }
    static var command: McuMgrCommand { get }
    static var operation: SMPOperation { get }
    /// How the request is named in messages, e.g. "image upload".
    static var operationName: String { get }
    /// The least time to wait for an answer before sending the request again, for a request the device
    /// works on for long (a hash over a large file, an erase): the device does the work again for every
    /// copy it gets, queued behind the first. nil (the default): the link's resend timeout alone.
    var resendFloor: Duration? { get }
    /// Whether the device may get the request twice without harm. Nothing on a device recognises a copy:
    /// Zephyr runs every copy it gets, one after another. false (a shell command): the request is never
    /// sent again without an answer, so a command slower than the link's resend timeout runs once.
    static var isIdempotent: Bool { get }
}

extension McuMgrRequest {
    public var resendFloor: Duration? { nil }
    public static var isIdempotent: Bool { true }
}
