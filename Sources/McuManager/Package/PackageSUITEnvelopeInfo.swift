#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// What a package needs from a SUIT envelope (PROTOCOL.md 7.2): the SHA-256 digest of its
/// authentication wrapper (key 2) and the manifest's sequence number (key 3 → 2).
struct PackageSUITEnvelopeInfo: Sendable, Hashable {
    /// CBOR tag of a SUIT_Envelope.
    static let tag: UInt64 = 107
    /// COSE algorithm id of SHA-256.
    static let sha256Algorithm: Int64 = -16

    /// The SHA-256 digest from the authentication wrapper; the envelope's hash for clients.
    var digest: Data
    /// `suit-manifest-sequence-number`, when the manifest carries one.
    var sequenceNumber: UInt64?

    /// Parses `data`; `name` names the file in error messages.
    init(parsing data: Data, name: String) throws {
        let hint = "use the .suit envelope the nRF Connect SDK build wrote (e.g. root.suit)"
        func invalid(_ why: String) -> McuMgrError {
            McuMgrError(.file, "\(name) is not a valid SUIT envelope: \(why); \(hint)")
        }
        func decode(_ bytes: [UInt8], _ what: String) throws -> CBOR {
            do {
                return try CBOR(decoding: bytes)
            } catch let error as CBORError {
                throw invalid("\(what) is not valid CBOR (\(error))")
            }
        }
        func value(_ key: Int, in map: CBOR) -> CBOR? {
            map.mapEntries?.first(where: { $0.key.int == key })?.value
        }

        let top = try decode([UInt8](data), "the file")
        let envelope: CBOR
        switch top {
        case .tagged(Self.tag, let inner): envelope = inner
        case .tagged(let other, _): throw invalid("it carries CBOR tag \(other), not 107 (SUIT_Envelope)")
        default: throw invalid("it does not start with CBOR tag 107 (SUIT_Envelope)")
        }
        guard envelope.mapEntries != nil else { throw invalid("the envelope is not a CBOR map") }

        guard let wrapperBytes = value(2, in: envelope)?.byteString else {
            throw invalid("it has no authentication wrapper (key 2, a byte string)")
        }
        guard let wrapper = try decode(wrapperBytes, "the authentication wrapper").arrayValue,
            let digestBytes = wrapper.first?.byteString
        else {
            throw invalid("the authentication wrapper is not an array starting with a digest byte string")
        }
        guard let digest = try decode(digestBytes, "the digest").arrayValue, digest.count == 2,
            let algorithm = digest[0].int64, let digestValue = digest[1].byteString
        else {
            throw invalid("the digest is not [algorithm, bytes]")
        }
        guard algorithm == Self.sha256Algorithm else {
            throw invalid("its digest algorithm is \(algorithm), but only SHA-256 (-16) is supported")
        }
        guard digestValue.count == 32 else {
            throw invalid("its SHA-256 digest holds \(digestValue.count) bytes, not 32")
        }
        self.digest = Data(digestValue)

        if let manifestBytes = value(3, in: envelope)?.byteString {
            let manifest = try decode(manifestBytes, "the manifest (key 3)")
            self.sequenceNumber = value(2, in: manifest)?.uint64
        } else {
            self.sequenceNumber = nil
        }
    }
}
