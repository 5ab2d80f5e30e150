#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Encodes `Encodable` values as CBOR with definite lengths and the shortest integer forms.
///
/// Structs become maps with text keys in the order their fields are encoded; `Data` becomes a byte
/// string; a `CBOR` value is written unchanged; `[String: X]` and `[Int: X]` become maps with text or
/// integer keys, sorted in deterministic (RFC 8949 §4.2.1) order. `Float` and `Double` are written as
/// single and double precision floats. Optional fields left `nil` by synthesized code are omitted;
/// an explicit `encodeNil` writes CBOR null.
public struct CBOREncoder: Sendable {
    /// Creates an encoder.
    public init() {}

    /// Encodes `value` as the bytes of one CBOR item.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let node = try _CBOREncoder.encodeNode(value)
        var out: [UInt8] = []
        out.reserveCapacity(node.encodedSize)
        node.write(into: &out)
        return out
    }

    /// Appends the CBOR encoding of `value` to `out`.
    public func encode<T: Encodable>(_ value: T, into out: inout [UInt8]) throws {
        let node = try _CBOREncoder.encodeNode(value)
        out.reserveCapacity(out.count + node.encodedSize)
        node.write(into: &out)
    }

    /// Encodes `value` as a CBOR item.
    public func encodeItem<T: Encodable>(_ value: T) throws -> CBOR {
        try _CBOREncoder.encodeNode(value).item
    }
}
