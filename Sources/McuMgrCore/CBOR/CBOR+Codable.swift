#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `CBOR` passes through `CBOREncoder`/`CBORDecoder` unchanged, tags and all.
///
/// With other coders (e.g. JSON) it maps to the natural value: integers and floats to numbers, text to
/// strings, byte strings to lowercase hex strings, arrays and maps to arrays and objects (non-text map
/// keys as their text form), null and undefined to null, tags to their content. Decoding from other
/// coders yields null, booleans, integers, doubles, text, arrays and text-keyed maps.
extension CBOR: Codable {
    /// Writes the item unchanged to a `CBOREncoder`, or as its natural value to other encoders.
    public func encode(to encoder: any Encoder) throws {
        if let cbor = encoder as? _CBOREncoder {
            cbor.node = .item(self)
            return
        }
        switch self {
        case .unsigned(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .negative(let n):
            var c = encoder.singleValueContainer()
            if n <= UInt64(Int64.max) {
                try c.encode(-1 - Int64(n))
            } else {
                try c.encode(-1 - Double(n))
            }
        case .bytes(let b):
            var c = encoder.singleValueContainer()
            try c.encode(CBOR._hex(b))
        case .text(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for i in items { try c.encode(i) }
        case .map(let entries):
            var c = encoder.container(keyedBy: _CBORKey.self)
            for e in entries {
                try c.encode(e.value, forKey: _CBORKey(stringValue: e.key._jsonKey))
            }
        case .tagged(_, let inner):
            try inner.encode(to: encoder)
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .null, .undefined:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .simple(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .half(let f), .float(let f):
            var c = encoder.singleValueContainer()
            try c.encode(Double(f))
        case .double(let d):
            var c = encoder.singleValueContainer()
            try c.encode(d)
        }
    }

    /// Reads the item unchanged from a `CBORDecoder`, or the natural value from other decoders.
    public init(from decoder: any Decoder) throws {
        if let cbor = decoder as? _CBORDecoder {
            self = cbor.item
            return
        }
        if let c = try? decoder.singleValueContainer() {
            if c.decodeNil() {
                self = .null
                return
            }
            if let b = try? c.decode(Bool.self) {
                self = .bool(b)
                return
            }
            if let i = try? c.decode(Int64.self) {
                self = .int(i)
                return
            }
            if let u = try? c.decode(UInt64.self) {
                self = .unsigned(u)
                return
            }
            if let d = try? c.decode(Double.self) {
                self = .double(d)
                return
            }
            if let s = try? c.decode(String.self) {
                self = .text(s)
                return
            }
        }
        if var c = try? decoder.unkeyedContainer() {
            var items: [CBOR] = []
            while !c.isAtEnd { items.append(try c.decode(CBOR.self)) }
            self = .array(items)
            return
        }
        if let c = try? decoder.container(keyedBy: _CBORKey.self) {
            var entries: [CBORMapEntry] = []
            for key in c.allKeys {
                entries.append(CBORMapEntry(key: .text(key.stringValue), value: try c.decode(CBOR.self, forKey: key)))
            }
            self = .map(entries)
            return
        }
        throw DecodingError.dataCorrupted(
            DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "value cannot be read as CBOR"))
    }

    static func _hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A map key as text, for formats whose keys are strings.
    var _jsonKey: String {
        switch self._untagged {
        case .text(let s): return s
        case .unsigned(let v): return String(v)
        case .negative(let n): return n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .bytes(let b): return CBOR._hex(b)
        case .bool(let b): return String(b)
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple(let v): return "simple(\(v))"
        case .half(let f), .float(let f): return String(f)
        case .double(let d): return String(d)
        case let other: return CBOR._hex(other.encoded)
        }
    }
}
