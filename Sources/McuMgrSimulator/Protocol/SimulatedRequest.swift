import McuMgrCore

/// One request as a group handler sees it: the header fields and the CBOR payload, decoded on demand.
struct SimulatedRequest: Sendable {
    var operation: SMPOperation
    /// The version the request is handled in (errors are shaped for it).
    var version: SMPVersion
    var group: McuMgrGroup
    var command: McuMgrCommand
    var payload: ArraySlice<UInt8>

    var isRead: Bool { operation == .read }

    /// The request's map. An empty payload is an empty map; anything that is not one CBOR map fails
    /// the decode, which Zephyr answers with `rc 3`.
    func fields() throws(SimulatorFault) -> RequestFields {
        if payload.isEmpty { return RequestFields(entries: []) }
        return try decodedFields()
    }

    /// The request's map as Zephyr's handlers decode it (`zcbor_map_decode_bulk`): an empty payload is
    /// not a map and fails with `rc 3` too (measured on native_sim_udp 4.4.0: echo, OS info, enumeration
    /// details, settings save, ... without a payload answer `rc 3`).
    func decodedFields() throws(SimulatorFault) -> RequestFields {
        guard let item = try? CBOR(decoding: payload), case .map(let entries) = item else {
            throw .invalidValue
        }
        return RequestFields(entries: entries)
    }
}

/// Typed access to a request map's text keys. A key that is present with the wrong CBOR type fails the
/// whole decode (`rc 3`), as zcbor's bulk map decoder does; a missing key is nil.
struct RequestFields: Sendable {
    var entries: [CBORMapEntry]

    func value(_ key: String) -> CBOR? {
        for entry in entries {
            if case .text(let k) = entry.key, k == key { return entry.value }
        }
        return nil
    }

    func has(_ key: String) -> Bool { value(key) != nil }

    func text(_ key: String) throws(SimulatorFault) -> String? {
        guard let v = value(key) else { return nil }
        guard case .text(let s) = v else { throw .invalidValue }
        return s
    }

    func unsigned(_ key: String) throws(SimulatorFault) -> UInt64? {
        guard let v = value(key) else { return nil }
        guard case .unsigned(let n) = v else { throw .invalidValue }
        return n
    }

    /// An unsigned value that must also fit `Int`.
    func count(_ key: String) throws(SimulatorFault) -> Int? {
        guard let n = try unsigned(key) else { return nil }
        guard let i = Int(exactly: n) else { throw .invalidValue }
        return i
    }

    func signed(_ key: String) throws(SimulatorFault) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let n = v.int64 else { throw .invalidValue }
        return n
    }

    func bytes(_ key: String) throws(SimulatorFault) -> [UInt8]? {
        guard let v = value(key) else { return nil }
        guard case .bytes(let b) = v else { throw .invalidValue }
        return b
    }

    func bool(_ key: String) throws(SimulatorFault) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else { throw .invalidValue }
        return b
    }

    func array(_ key: String) throws(SimulatorFault) -> [CBOR]? {
        guard let v = value(key) else { return nil }
        guard case .array(let a) = v else { throw .invalidValue }
        return a
    }
}
