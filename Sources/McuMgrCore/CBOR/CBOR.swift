/// A CBOR data item (RFC 8949). Maps keep their order; duplicate keys are kept as sent.
public indirect enum CBOR: Sendable, Hashable {
    /// Major type 0.
    case unsigned(UInt64)
    /// Major type 1: the value is `-1 - n`.
    case negative(UInt64)
    /// Major type 2.
    case bytes([UInt8])
    /// Major type 3.
    case text(String)
    /// Major type 4.
    case array([CBOR])
    /// Major type 5, in wire order.
    case map([CBORMapEntry])
    /// Major type 6.
    case tagged(UInt64, CBOR)
    case bool(Bool)
    case null
    case undefined
    /// A simple value other than false/true/null/undefined: 0...19 or 32...255 (others cannot be written).
    case simple(UInt8)
    case half(Float)
    case float(Float)
    case double(Double)

    /// An integer item from a signed value.
    public static func int<I: BinaryInteger>(_ value: I) -> CBOR {
        if value >= 0 { return .unsigned(UInt64(value)) }
        // -1 - value, computed without overflow for every signed width.
        return .negative(UInt64(~value))
    }

    /// A map item from text keys, in the given order.
    public static func textMap(_ pairs: KeyValuePairs<String, CBOR>) -> CBOR {
        .map(pairs.map { CBORMapEntry(key: .text($0.key), value: $0.value) })
    }

    /// The value for a text key of a map, nil for other items or a missing key.
    public subscript(key: String) -> CBOR? {
        guard case .map(let entries) = self else { return nil }
        for entry in entries {
            if case .text(let k) = entry.key, k == key { return entry.value }
        }
        return nil
    }

    /// The value as a signed 64-bit integer, if it is an integer that fits.
    public var int64: Int64? {
        switch self {
        case .unsigned(let v): return v <= UInt64(Int64.max) ? Int64(v) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer.
    public var uint64: UInt64? {
        if case .unsigned(let v) = self { return v }
        return nil
    }

    /// The value as `Int`, if it is an integer that fits.
    public var int: Int? { int64.flatMap { Int(exactly: $0) } }

    public var string: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    public var byteString: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [CBOR]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var mapEntries: [CBORMapEntry]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// The value as a floating-point number (any float width, or an integer).
    public var doubleValue: Double? {
        switch self {
        case .half(let f), .float(let f): return Double(f)
        case .double(let d): return d
        case .unsigned(let v): return Double(v)
        case .negative(let n): return -1 - Double(n)
        default: return nil
        }
    }
}

extension CBOR: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: CBOR...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (CBOR, CBOR)...) {
        self = .map(elements.map { CBORMapEntry(key: $0.0, value: $0.1) })
    }
    public init(nilLiteral: ()) { self = .null }
}
