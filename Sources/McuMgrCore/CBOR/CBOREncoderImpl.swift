#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The encoder builds a light tree of nodes (primitives inline, containers as shared boxes so that
// nested containers can be filled after they are handed out), then writes it to bytes in one pass
// after measuring the exact size. `Data` payloads are copied once, into the output.

/// A map key while encoding.
enum _CBORNodeKey {
    case text(String)
    case int(Int)

    init(_ key: some CodingKey) {
        if key._cborIsNumeric, let i = key.intValue {
            self = .int(i)
        } else {
            self = .text(key.stringValue)
        }
    }

    var encodedSize: Int {
        switch self {
        case .text(let s):
            let n = s.utf8.count
            return CBORWriter.headSize(argument: UInt64(n)) + n
        case .int(let i):
            return CBORWriter.headSize(argument: i >= 0 ? UInt64(i) : UInt64(~i))
        }
    }

    func write(into out: inout [UInt8]) {
        switch self {
        case .text(let s):
            let utf8 = s.utf8
            CBORWriter.writeHead(major: 3, argument: UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        case .int(let i):
            if i >= 0 {
                CBORWriter.writeHead(major: 0, argument: UInt64(i), into: &out)
            } else {
                CBORWriter.writeHead(major: 1, argument: UInt64(~i), into: &out)
            }
        }
    }

    var item: CBOR {
        switch self {
        case .text(let s): return .text(s)
        case .int(let i): return .int(i)
        }
    }
}

final class _CBORArrayBox {
    var items: [_CBORNode] = []
}

final class _CBORMapBox {
    var keys: [_CBORNodeKey] = []
    var values: [_CBORNode] = []

    func append(_ key: _CBORNodeKey, _ value: _CBORNode) {
        keys.append(key)
        values.append(value)
    }
}

/// One value being encoded.
enum _CBORNode {
    case unsigned(UInt64)
    case negative(UInt64)
    case text(String)
    case data(Data)
    case bool(Bool)
    case null
    case float(Float)
    case double(Double)
    case item(CBOR)
    case array(_CBORArrayBox)
    case map(_CBORMapBox)
    /// A super-encoder's value, known only once the caller has finished with it.
    case deferred(_CBOREncoder)

    static func int<I: BinaryInteger>(_ v: I) -> _CBORNode {
        v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(~v))
    }

    var encodedSize: Int {
        switch self {
        case .unsigned(let v), .negative(let v):
            return CBORWriter.headSize(argument: v)
        case .text(let s):
            let n = s.utf8.count
            return CBORWriter.headSize(argument: UInt64(n)) + n
        case .data(let d):
            return CBORWriter.headSize(argument: UInt64(d.count)) + d.count
        case .bool, .null:
            return 1
        case .float:
            return 5
        case .double:
            return 9
        case .item(let item):
            return item._encodedSize
        case .array(let box):
            var n = CBORWriter.headSize(argument: UInt64(box.items.count))
            for i in box.items { n += i.encodedSize }
            return n
        case .map(let box):
            var n = CBORWriter.headSize(argument: UInt64(box.keys.count))
            for k in box.keys { n += k.encodedSize }
            for v in box.values { n += v.encodedSize }
            return n
        case .deferred(let encoder):
            return encoder.resolvedNode.encodedSize
        }
    }

    func write(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let v):
            CBORWriter.writeHead(major: 0, argument: v, into: &out)
        case .negative(let v):
            CBORWriter.writeHead(major: 1, argument: v, into: &out)
        case .text(let s):
            let utf8 = s.utf8
            CBORWriter.writeHead(major: 3, argument: UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        case .data(let d):
            CBORWriter.writeHead(major: 2, argument: UInt64(d.count), into: &out)
            d.withUnsafeBytes { out.append(contentsOf: $0) }
        case .bool(let b):
            out.append(b ? 0xF5 : 0xF4)
        case .null:
            out.append(0xF6)
        case .float(let f):
            CBORWriter.write(.float(f), into: &out)
        case .double(let d):
            CBORWriter.write(.double(d), into: &out)
        case .item(let item):
            CBORWriter.write(item, into: &out)
        case .array(let box):
            CBORWriter.writeHead(major: 4, argument: UInt64(box.items.count), into: &out)
            for i in box.items { i.write(into: &out) }
        case .map(let box):
            CBORWriter.writeHead(major: 5, argument: UInt64(box.keys.count), into: &out)
            for i in box.keys.indices {
                box.keys[i].write(into: &out)
                box.values[i].write(into: &out)
            }
        case .deferred(let encoder):
            encoder.resolvedNode.write(into: &out)
        }
    }

    var item: CBOR {
        switch self {
        case .unsigned(let v): return .unsigned(v)
        case .negative(let v): return .negative(v)
        case .text(let s): return .text(s)
        case .data(let d): return .bytes([UInt8](d))
        case .bool(let b): return .bool(b)
        case .null: return .null
        case .float(let f): return .float(f)
        case .double(let d): return .double(d)
        case .item(let item): return item
        case .array(let box): return .array(box.items.map(\.item))
        case .map(let box):
            var entries: [CBORMapEntry] = []
            entries.reserveCapacity(box.keys.count)
            for i in box.keys.indices {
                entries.append(CBORMapEntry(key: box.keys[i].item, value: box.values[i].item))
            }
            return .map(entries)
        case .deferred(let encoder): return encoder.resolvedNode.item
        }
    }
}

extension CBOR {
    /// Size of the item's definite-length encoding.
    var _encodedSize: Int {
        switch self {
        case .unsigned(let v), .negative(let v):
            return CBORWriter.headSize(argument: v)
        case .bytes(let b):
            return CBORWriter.headSize(argument: UInt64(b.count)) + b.count
        case .text(let s):
            let n = s.utf8.count
            return CBORWriter.headSize(argument: UInt64(n)) + n
        case .array(let items):
            var n = CBORWriter.headSize(argument: UInt64(items.count))
            for i in items { n += i._encodedSize }
            return n
        case .map(let entries):
            var n = CBORWriter.headSize(argument: UInt64(entries.count))
            for e in entries { n += e.key._encodedSize + e.value._encodedSize }
            return n
        case .tagged(let tag, let inner):
            return CBORWriter.headSize(argument: tag) + inner._encodedSize
        case .bool, .null, .undefined:
            return 1
        case .simple(let v):
            return v < 24 ? 1 : 2
        case .half:
            return 3
        case .float:
            return 5
        case .double:
            return 9
        }
    }
}

// MARK: - Encoder

final class _CBOREncoder: Encoder {
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// What has been encoded so far; nil until a container or value is requested.
    var node: _CBORNode?

    init(codingPath: [any CodingKey]) {
        self.codingPath = codingPath
    }

    /// The value, or an empty map if nothing was encoded.
    var resolvedNode: _CBORNode {
        node ?? .map(_CBORMapBox())
    }

    static func encodeNode<T: Encodable>(_ value: T) throws -> _CBORNode {
        try _CBOREncoder(codingPath: []).node(for: value, at: [])
    }

    /// Encodes a value below this encoder, with fast paths for common types.
    func node<T: Encodable>(for value: T, at path: @autoclosure () -> [any CodingKey]) throws -> _CBORNode {
        if let fast = _CBORNode.fast(value) { return fast }
        if let dict = value as? any _CBORDictionaryEncodable {
            return try dict._cborEncode(encoder: self, path: path())
        }
        let sub = _CBOREncoder(codingPath: path())
        try value.encode(to: sub)
        return sub.resolvedNode
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: _CBORMapBox
        if case .map(let existing) = node {
            box = existing
        } else {
            box = _CBORMapBox()
            node = .map(box)
        }
        return KeyedEncodingContainer(_CBORKeyedEncodingContainer<Key>(encoder: self, box: box, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: _CBORArrayBox
        if case .array(let existing) = node {
            box = existing
        } else {
            box = _CBORArrayBox()
            node = .array(box)
        }
        return _CBORUnkeyedEncodingContainer(encoder: self, box: box, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        _CBORSingleValueEncodingContainer(encoder: self)
    }
}

extension _CBORNode {
    /// Direct conversion for primitive types, `Data` and `CBOR`, without a nested encoder.
    @inline(__always)
    static func fast<T>(_ value: T) -> _CBORNode? {
        if T.self == Data.self { return .data(value as! Data) }
        if T.self == CBOR.self { return .item(value as! CBOR) }
        if T.self == String.self { return .text(value as! String) }
        if T.self == Int.self { return .int(value as! Int) }
        if T.self == UInt8.self { return .unsigned(UInt64(value as! UInt8)) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == UInt.self { return .unsigned(UInt64(value as! UInt)) }
        if T.self == UInt16.self { return .unsigned(UInt64(value as! UInt16)) }
        if T.self == UInt32.self { return .unsigned(UInt64(value as! UInt32)) }
        if T.self == UInt64.self { return .unsigned(value as! UInt64) }
        if T.self == Int8.self { return .int(value as! Int8) }
        if T.self == Int16.self { return .int(value as! Int16) }
        if T.self == Int32.self { return .int(value as! Int32) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Double.self { return .double(value as! Double) }
        if T.self == Float.self { return .float(value as! Float) }
        return nil
    }
}

/// Dictionaries with `String` or `Int` keys, encoded as maps sorted in deterministic key order.
protocol _CBORDictionaryEncodable {
    func _cborEncode(encoder: _CBOREncoder, path: [any CodingKey]) throws -> _CBORNode
}

extension Dictionary: _CBORDictionaryEncodable where Key: _CBORMapKey, Value: Encodable {
    func _cborEncode(encoder: _CBOREncoder, path: [any CodingKey]) throws -> _CBORNode {
        let box = _CBORMapBox()
        box.keys.reserveCapacity(count)
        box.values.reserveCapacity(count)
        for key in keys.sorted(by: Key._cborPrecedes) {
            let codingKey = key._cborCodingKey
            box.append(key._cborNodeKey, try encoder.node(for: self[key]!, at: path + [codingKey]))
        }
        return .map(box)
    }
}

protocol _CBORMapKey: Hashable {
    var _cborNodeKey: _CBORNodeKey { get }
    var _cborCodingKey: _CBORKey { get }
    static func _cborPrecedes(_ a: Self, _ b: Self) -> Bool
}

extension String: _CBORMapKey {
    var _cborNodeKey: _CBORNodeKey { .text(self) }
    var _cborCodingKey: _CBORKey { _CBORKey(stringValue: self) }
    /// Deterministic order: shorter encodings first, then bytewise.
    static func _cborPrecedes(_ a: String, _ b: String) -> Bool {
        let au = a.utf8, bu = b.utf8
        if au.count != bu.count { return au.count < bu.count }
        return au.lexicographicallyPrecedes(bu)
    }
}

extension Int: _CBORMapKey {
    var _cborNodeKey: _CBORNodeKey { .int(self) }
    var _cborCodingKey: _CBORKey { _CBORKey(intValue: self) }
    /// Deterministic order: non-negative ascending, then negative by magnitude.
    static func _cborPrecedes(_ a: Int, _ b: Int) -> Bool {
        if (a >= 0) != (b >= 0) { return a >= 0 }
        return a >= 0 ? a < b : a > b
    }
}

// MARK: - Containers

struct _CBORKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: _CBOREncoder
    let box: _CBORMapBox
    let codingPath: [any CodingKey]

    private func put(_ node: _CBORNode, _ key: Key) {
        box.append(_CBORNodeKey(key), node)
    }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.text(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(.double(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(.float(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.unsigned(value), key) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try encoder.node(for: value, at: codingPath + [key]), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = _CBORMapBox()
        put(.map(nested), key)
        return KeyedEncodingContainer(
            _CBORKeyedEncodingContainer<NestedKey>(encoder: encoder, box: nested, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = _CBORArrayBox()
        put(.array(nested), key)
        return _CBORUnkeyedEncodingContainer(encoder: encoder, box: nested, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        let sub = _CBOREncoder(codingPath: codingPath + [_CBORKey.super])
        box.append(.text("super"), .deferred(sub))
        return sub
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let sub = _CBOREncoder(codingPath: codingPath + [key])
        put(.deferred(sub), key)
        return sub
    }
}

struct _CBORUnkeyedEncodingContainer: UnkeyedEncodingContainer {
    let encoder: _CBOREncoder
    let box: _CBORArrayBox
    let codingPath: [any CodingKey]
    var count: Int { box.items.count }

    private func put(_ node: _CBORNode) { box.items.append(node) }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.text(value)) }
    mutating func encode(_ value: Double) throws { put(.double(value)) }
    mutating func encode(_ value: Float) throws { put(.float(value)) }
    mutating func encode(_ value: Int) throws { put(.int(value)) }
    mutating func encode(_ value: Int8) throws { put(.int(value)) }
    mutating func encode(_ value: Int16) throws { put(.int(value)) }
    mutating func encode(_ value: Int32) throws { put(.int(value)) }
    mutating func encode(_ value: Int64) throws { put(.int(value)) }
    mutating func encode(_ value: UInt) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { put(.unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let index = box.items.count
        put(try encoder.node(for: value, at: codingPath + [_CBORKey(index: index)]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        let path = codingPath + [_CBORKey(index: count)]
        let nested = _CBORMapBox()
        put(.map(nested))
        return KeyedEncodingContainer(
            _CBORKeyedEncodingContainer<NestedKey>(encoder: encoder, box: nested, codingPath: path))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = codingPath + [_CBORKey(index: count)]
        let nested = _CBORArrayBox()
        put(.array(nested))
        return _CBORUnkeyedEncodingContainer(encoder: encoder, box: nested, codingPath: path)
    }

    mutating func superEncoder() -> any Encoder {
        let sub = _CBOREncoder(codingPath: codingPath + [_CBORKey(index: count)])
        put(.deferred(sub))
        return sub
    }
}

struct _CBORSingleValueEncodingContainer: SingleValueEncodingContainer {
    let encoder: _CBOREncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ node: _CBORNode) { encoder.node = node }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.text(value)) }
    mutating func encode(_ value: Double) throws { put(.double(value)) }
    mutating func encode(_ value: Float) throws { put(.float(value)) }
    mutating func encode(_ value: Int) throws { put(.int(value)) }
    mutating func encode(_ value: Int8) throws { put(.int(value)) }
    mutating func encode(_ value: Int16) throws { put(.int(value)) }
    mutating func encode(_ value: Int32) throws { put(.int(value)) }
    mutating func encode(_ value: Int64) throws { put(.int(value)) }
    mutating func encode(_ value: UInt) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { put(.unsigned(value)) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        put(try encoder.node(for: value, at: encoder.codingPath))
    }
}
