/// The outcome a response payload reports (PROTOCOL.md 2.5): success, an SMP-level `rc`, or a v2
/// group error `err {group, rc}`.
public enum SMPResponseStatus: Sendable, Hashable {
    case success
    /// `rc` ≠ 0, with the optional `rsn` explanation.
    case returnCode(McuMgrReturnCode, reason: String?)
    /// `err.rc` ≠ 0 in its group.
    case groupError(McuMgrGroupError)

    /// Reads the status from a decoded response map. Both channels are checked whatever the version.
    public init(response: CBOR) {
        if let err = response["err"], err.mapEntries != nil,
            let rc = err["rc"]?.int, rc != 0
        {
            let group = err["group"]?.uint64.flatMap { UInt16(exactly: $0) }.map(McuMgrGroup.init(rawValue:))
            self = .groupError(McuMgrGroupError(group: group ?? McuMgrGroup(rawValue: 0xFFFF), rc: rc))
            return
        }
        if let rc = response["rc"]?.int, rc != 0 {
            self = .returnCode(McuMgrReturnCode(rc), reason: response["rsn"]?.string)
            return
        }
        self = .success
    }
}
