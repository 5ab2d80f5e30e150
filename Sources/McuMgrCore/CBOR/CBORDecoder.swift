#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Decodes `Decodable` values from CBOR (definite or indefinite lengths).
///
/// Unknown map keys are ignored; tags are looked through unless the requested type is `CBOR`;
/// `Data` is read from a byte string; `Double` and `Float` accept any float width and integers.
/// Failures throw `CBORError` with the coding path, e.g. `images[0].hash`.
public struct CBORDecoder: Sendable {
    /// Creates a decoder.
    public init() {}

    /// Decodes a value from bytes that hold exactly one CBOR item.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try decode(type, from: try CBOR(decoding: bytes))
    }

    /// Decodes a value from a CBOR item.
    public func decode<T: Decodable>(_ type: T.Type, from item: CBOR) throws -> T {
        try _CBORDecoder(item: item, codingPath: []).decodeValue(type)
    }
}

// MARK: - Shared helpers
