import McuMgrCore

/// What a group handler answers.
enum SimulatedOutcome: Sendable {
    /// Success: the response map's entries (no `rc`).
    case success([CBORMapEntry])
    /// A group error (`err {group, rc}` in v2, translated `rc` in v1), plus keys that go with it
    /// (e.g. `len` with the file-system offset error).
    case groupError(McuMgrGroup, Int, extra: [CBORMapEntry])
    /// An SMP-level error, `{"rc": n}` in every version.
    case returnCode(Int)

    static func ok(_ pairs: KeyValuePairs<String, CBOR>) -> SimulatedOutcome {
        .success(pairs.map { CBORMapEntry(key: .text($0.key), value: $0.value) })
    }

    static let empty = SimulatedOutcome.success([])
}

/// A failure a handler throws; carries the outcome to answer with.
struct SimulatorFault: Error, Sendable {
    var outcome: SimulatedOutcome

    init(_ outcome: SimulatedOutcome) { self.outcome = outcome }

    static func returnCode(_ rc: McuMgrReturnCode) -> SimulatorFault { SimulatorFault(.returnCode(rc.rawValue)) }

    static func group(_ group: McuMgrGroup, _ rc: Int, extra: [CBORMapEntry] = []) -> SimulatorFault {
        SimulatorFault(.groupError(group, rc, extra: extra))
    }

    /// `rc 3` (EINVAL): a decode failure or a bad value.
    static let invalidValue = SimulatorFault(.returnCode(3))
    /// `rc 8` (ENOTSUP).
    static let notSupported = SimulatorFault(.returnCode(8))
}

extension Array where Element == CBORMapEntry {
    /// Map entries from text keys, in order.
    static func entries(_ pairs: KeyValuePairs<String, CBOR>) -> [CBORMapEntry] {
        pairs.map { CBORMapEntry(key: .text($0.key), value: $0.value) }
    }

    mutating func append(_ key: String, _ value: CBOR) {
        append(CBORMapEntry(key: .text(key), value: value))
    }
}
