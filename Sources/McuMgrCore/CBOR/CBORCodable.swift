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

/// A coding key for array positions and dynamic map keys.
struct _CBORKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    init(index: Int) {
        self.init(intValue: index)
    }

    static let `super` = _CBORKey(stringValue: "super")
}

extension CodingKey {
    /// True when the key stands for an integer (a dictionary `Int` key or an array index) rather than a name.
    var _cborIsNumeric: Bool {
        guard let i = intValue else { return false }
        return stringValue == String(i)
    }
}

/// A coding path as text: `images[0].hash`.
func _cborPathString(_ path: [any CodingKey]) -> String {
    var s = ""
    for key in path {
        if key._cborIsNumeric {
            s += "[\(key.intValue!)]"
        } else {
            if !s.isEmpty { s += "." }
            s += key.stringValue
        }
    }
    return s
}

extension CBOR {
    /// A short name of the item's kind, for error messages.
    var _kindName: String {
        switch self {
        case .unsigned: return "unsigned integer"
        case .negative: return "negative integer"
        case .bytes: return "byte string"
        case .text: return "text string"
        case .array: return "array"
        case .map: return "map"
        case .tagged(let tag, _): return "tag \(tag)"
        case .bool: return "boolean"
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple(let v): return "simple value \(v)"
        case .half: return "half-precision float"
        case .float: return "single-precision float"
        case .double: return "double-precision float"
        }
    }

    /// The item with any tags removed.
    var _untagged: CBOR {
        var item = self
        while case .tagged(_, let inner) = item { item = inner }
        return item
    }
}
