#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The decoder reads from `CBOR` items produced by `CBORReader`. Tags are looked through unless the
// requested type is `CBOR` itself. Errors are `CBORError` values that carry the coding path.

struct _CBORDecoder: Decoder {
    let item: CBOR
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(item: CBOR, codingPath: [any CodingKey]) {
        self.item = item
        self.codingPath = codingPath
    }

    var path: String { _cborPathString(codingPath) }

    func mismatch(_ expected: String, _ found: CBOR) -> CBORError {
        .typeMismatch(expected: expected, found: found._kindName, path: path)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .map(let entries) = item._untagged else { throw mismatch("map", item._untagged) }
        return KeyedDecodingContainer(_CBORKeyedDecodingContainer<Key>(decoder: self, entries: entries))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = item._untagged else { throw mismatch("array", item._untagged) }
        return _CBORUnkeyedDecodingContainer(decoder: self, items: items)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        _CBORSingleValueDecodingContainer(decoder: self)
    }

    // MARK: Values

    var isNil: Bool {
        switch item._untagged {
        case .null, .undefined: return true
        default: return false
        }
    }

    func decodeBool() throws -> Bool {
        guard case .bool(let b) = item._untagged else { throw mismatch("boolean", item._untagged) }
        return b
    }

    func decodeString() throws -> String {
        guard case .text(let s) = item._untagged else { throw mismatch("text string", item._untagged) }
        return s
    }

    func decodeData() throws -> Data {
        guard case .bytes(let b) = item._untagged else { throw mismatch("byte string", item._untagged) }
        return Data(b)
    }

    func decodeInteger<I: FixedWidthInteger>(_: I.Type) throws -> I {
        switch item._untagged {
        case .unsigned(let v):
            guard let r = I(exactly: v) else { throw CBORError.valueOutOfRange("\(I.self) value \(v)", path: path) }
            return r
        case .negative(let n):
            // The value is -1 - n.
            guard I.isSigned, n <= UInt64(I.max) else {
                let text = n == .max ? "-18446744073709551616" : "-\(n + 1)"
                throw CBORError.valueOutOfRange("\(I.self) value \(text)", path: path)
            }
            return -1 - I(n)
        case let other:
            throw mismatch("integer", other)
        }
    }

    func decodeDouble() throws -> Double {
        guard let d = item._untagged.doubleValue else { throw mismatch("number", item._untagged) }
        return d
    }

    func decodeFloat() throws -> Float {
        let untagged = item._untagged
        switch untagged {
        case .half(let f), .float(let f):
            return f
        default:
            guard let d = untagged.doubleValue else { throw mismatch("number", untagged) }
            let f = Float(d)
            if f.isInfinite && d.isFinite {
                throw CBORError.valueOutOfRange("Float value \(d)", path: path)
            }
            return f
        }
    }

    /// Decodes any type, with fast paths for primitives, `Data` and `CBOR`.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == CBOR.self { return item as! T }
        if T.self == Data.self { return try decodeData() as! T }
        if T.self == String.self { return try decodeString() as! T }
        if T.self == Int.self { return try decodeInteger(Int.self) as! T }
        if T.self == UInt8.self { return try decodeInteger(UInt8.self) as! T }
        if T.self == Bool.self { return try decodeBool() as! T }
        if T.self == UInt.self { return try decodeInteger(UInt.self) as! T }
        if T.self == UInt16.self { return try decodeInteger(UInt16.self) as! T }
        if T.self == UInt32.self { return try decodeInteger(UInt32.self) as! T }
        if T.self == UInt64.self { return try decodeInteger(UInt64.self) as! T }
        if T.self == Int8.self { return try decodeInteger(Int8.self) as! T }
        if T.self == Int16.self { return try decodeInteger(Int16.self) as! T }
        if T.self == Int32.self { return try decodeInteger(Int32.self) as! T }
        if T.self == Int64.self { return try decodeInteger(Int64.self) as! T }
        if T.self == Double.self { return try decodeDouble() as! T }
        if T.self == Float.self { return try decodeFloat() as! T }
        return try T(from: self)
    }
}

// MARK: - Keyed

struct _CBORKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: _CBORDecoder
    let entries: [CBORMapEntry]
    /// Index of the first entry for each key, built only for larger maps.
    private let index: [CBOR: Int]?

    init(decoder: _CBORDecoder, entries: [CBORMapEntry]) {
        self.decoder = decoder
        self.entries = entries
        if entries.count > 12 {
            var index: [CBOR: Int] = [:]
            index.reserveCapacity(entries.count)
            for (i, e) in entries.enumerated() where index[e.key] == nil {
                index[e.key] = i
            }
            self.index = index
        } else {
            self.index = nil
        }
    }

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] {
        entries.compactMap { entry in
            switch entry.key._untagged {
            case .text(let s):
                return Key(stringValue: s)
            case let k:
                guard let i = k.int else { return nil }
                return Key(intValue: i) ?? Key(stringValue: String(i))
            }
        }
    }

    private func find(_ key: CBOR) -> CBOR? {
        if let index {
            return index[key].map { entries[$0].value }
        }
        for e in entries where e.key == key { return e.value }
        return nil
    }

    private func lookup(_ key: Key) -> CBOR? {
        if key._cborIsNumeric, let i = key.intValue, let v = find(.int(i)) { return v }
        return find(.text(key.stringValue))
    }

    private func value(_ key: Key) throws -> _CBORDecoder {
        guard let v = lookup(key) else {
            throw CBORError.missingKey(key.stringValue, path: decoder.path)
        }
        return _CBORDecoder(item: v, codingPath: decoder.codingPath + [key])
    }

    func contains(_ key: Key) -> Bool { lookup(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { try value(key).isNil }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key).decodeBool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key).decodeString() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key).decodeDouble() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try value(key).decodeFloat() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key).decodeInteger(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(key).decodeInteger(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(key).decodeInteger(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(key).decodeInteger(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key).decodeInteger(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(key).decodeInteger(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(key).decodeInteger(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(key).decodeInteger(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key).decodeInteger(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key).decodeInteger(type) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try value(key).decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try value(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try value(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        _CBORDecoder(item: find(.text("super")) ?? .null, codingPath: decoder.codingPath + [_CBORKey.super])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        _CBORDecoder(item: lookup(key) ?? .null, codingPath: decoder.codingPath + [key])
    }
}

// MARK: - Unkeyed

struct _CBORUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let decoder: _CBORDecoder
    let items: [CBOR]
    private(set) var currentIndex = 0

    init(decoder: _CBORDecoder, items: [CBOR]) {
        self.decoder = decoder
        self.items = items
    }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    /// The decoder for the next element; advances past it.
    private mutating func next(_ expected: @autoclosure () -> String) throws -> _CBORDecoder {
        let path = decoder.codingPath + [_CBORKey(index: currentIndex)]
        guard currentIndex < items.count else {
            throw CBORError.typeMismatch(expected: expected(), found: "end of array", path: _cborPathString(path))
        }
        defer { currentIndex += 1 }
        return _CBORDecoder(item: items[currentIndex], codingPath: path)
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < items.count else {
            let path = decoder.codingPath + [_CBORKey(index: currentIndex)]
            throw CBORError.typeMismatch(expected: "null", found: "end of array", path: _cborPathString(path))
        }
        switch items[currentIndex]._untagged {
        case .null, .undefined:
            currentIndex += 1
            return true
        default:
            return false
        }
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next("boolean").decodeBool() }
    mutating func decode(_ type: String.Type) throws -> String { try next("text string").decodeString() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next("number").decodeDouble() }
    mutating func decode(_ type: Float.Type) throws -> Float { try next("number").decodeFloat() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next("integer").decodeInteger(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next("integer").decodeInteger(type) }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next("\(T.self)").decodeValue(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try next("map").container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next("array").unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        try next("value")
    }
}

// MARK: - Single value

struct _CBORSingleValueDecodingContainer: SingleValueDecodingContainer {
    let decoder: _CBORDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.isNil }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool() }
    func decode(_ type: String.Type) throws -> String { try decoder.decodeString() }
    func decode(_ type: Double.Type) throws -> Double { try decoder.decodeDouble() }
    func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloat() }
    func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try decoder.decodeValue(type)
    }
}
