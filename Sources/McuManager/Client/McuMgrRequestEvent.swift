import McuMgrCore

/// What a request submitted with ``McuMgrClient/submit(operation:group:command:payload:timeout:retransmittable:resendFloor:name:overdueAfter:beyondWindow:events:)``
/// goes through, in order: any number of resends (and at most one `overdue`), then its one outcome.
public enum McuMgrRequestEvent: Sendable {
    /// The session sent the request again (`attempt` counts resends): the link lost it or its answer,
    /// or the answer is late. A copy may still reach the device.
    case resent(attempt: Int)
    /// No answer yet after the `overdueAfter` the request was submitted with; it is still awaited.
    case overdue
    /// The raw response packet (any status), or why there is none. Nothing follows.
    case answered(Result<SMPPacket, McuMgrError>)
}
