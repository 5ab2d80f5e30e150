/// Encodes `Encodable` values as CBOR (definite lengths). `Data`/`[UInt8]`-as-bytes map to byte strings.
/// (Placeholder signature; implemented in the CBOR Codable work.)
public struct CBOREncoder: Sendable {
    public init() {}
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        fatalError("CBOREncoder not implemented yet")
    }
}

/// Decodes `Decodable` values from CBOR (definite or indefinite lengths).
public struct CBORDecoder: Sendable {
    public init() {}
    public func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        fatalError("CBORDecoder not implemented yet")
    }
    public func decode<T: Decodable>(_ type: T.Type, from item: CBOR) throws -> T {
        fatalError("CBORDecoder not implemented yet")
    }
}
