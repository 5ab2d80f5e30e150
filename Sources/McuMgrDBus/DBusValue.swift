/// One D-Bus value, with its type. Containers carry their element signatures so that empty arrays
/// and dictionaries still marshal with the right type.
public indirect enum DBusValue: Sendable, Hashable, CustomStringConvertible {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(DBusObjectPath)
    case signature(String)
    /// A file descriptor (`h`). Received descriptors are owned by the `DBusUnixFD`.
    case unixFD(DBusUnixFD)
    /// `ay`, kept as bytes (the common case: characteristic values).
    case bytes([UInt8])
    /// `a<element>` other than bytes and dictionaries.
    case array(element: String, [DBusValue])
    /// `a{<key><value>}`, entries in order.
    case dictionary(key: String, value: String, [DBusDictionaryEntry])
    /// `(...)`.
    case structure([DBusValue])
    /// `v`.
    case variant(DBusValue)

    /// The value's D-Bus type signature.
    public var signature: String {
        switch self {
        case .byte: return "y"
        case .boolean: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .bytes: return "ay"
        case .array(let element, _): return "a" + element
        case .dictionary(let key, let value, _): return "a{" + key + value + "}"
        case .structure(let members): return "(" + members.map(\.signature).joined() + ")"
        case .variant: return "v"
        }
    }

    /// An `a{sv}` dictionary (BlueZ options and properties), keys sorted for a stable order.
    public static func properties(_ values: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: "s", value: "v",
            values.sorted { $0.key < $1.key }.map { DBusDictionaryEntry(.string($0.key), .variant($0.value)) })
    }

    /// An `as` array.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(element: "s", values.map(DBusValue.string))
    }

    /// An `ao` array.
    public static func objectPaths(_ values: [DBusObjectPath]) -> DBusValue {
        .array(element: "o", values.map(DBusValue.objectPath))
    }

    public var description: String {
        switch self {
        case .byte(let v): return "byte \(v)"
        case .boolean(let v): return "\(v)"
        case .int16(let v): return "int16 \(v)"
        case .uint16(let v): return "uint16 \(v)"
        case .int32(let v): return "int32 \(v)"
        case .uint32(let v): return "uint32 \(v)"
        case .int64(let v): return "int64 \(v)"
        case .uint64(let v): return "uint64 \(v)"
        case .double(let v): return "double \(v)"
        case .string(let v): return "\"\(v)\""
        case .objectPath(let v): return "object \(v)"
        case .signature(let v): return "signature \(v)"
        case .unixFD(let v): return "fd \(v.rawValue)"
        case .bytes(let v): return "bytes[\(v.count)]"
        case .array(_, let v): return "[" + v.map(\.description).joined(separator: ", ") + "]"
        case .dictionary(_, _, let v):
            return "{" + v.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .structure(let v): return "(" + v.map(\.description).joined(separator: ", ") + ")"
        case .variant(let v): return "<\(v)>"
        }
    }
}

/// One entry of a D-Bus dictionary.
public struct DBusDictionaryEntry: Sendable, Hashable {
    public var key: DBusValue
    public var value: DBusValue

    public init(_ key: DBusValue, _ value: DBusValue) {
        self.key = key
        self.value = value
    }
}

// MARK: - Reading values

extension DBusValue {
    /// The value inside any number of variants.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    public var string: String? {
        switch unwrapped {
        case .string(let s), .signature(let s): return s
        case .objectPath(let p): return p.rawValue
        default: return nil
        }
    }

    public var bool: Bool? {
        if case .boolean(let b) = unwrapped { return b }
        return nil
    }

    public var objectPath: DBusObjectPath? {
        if case .objectPath(let p) = unwrapped { return p }
        return nil
    }

    /// Any integer type, as an Int (nil when it does not fit).
    public var int: Int? {
        switch unwrapped {
        case .byte(let v): return Int(v)
        case .int16(let v): return Int(v)
        case .uint16(let v): return Int(v)
        case .int32(let v): return Int(v)
        case .uint32(let v): return Int(v)
        case .int64(let v): return Int(v)
        case .uint64(let v): return Int(exactly: v)
        default: return nil
        }
    }

    /// `ay` (or an array of bytes built another way).
    public var bytes: [UInt8]? {
        switch unwrapped {
        case .bytes(let b): return b
        case .array("y", let items):
            var out: [UInt8] = []
            out.reserveCapacity(items.count)
            for item in items {
                guard case .byte(let b) = item else { return nil }
                out.append(b)
            }
            return out
        default: return nil
        }
    }

    public var fileDescriptor: DBusUnixFD? {
        if case .unixFD(let fd) = unwrapped { return fd }
        return nil
    }

    /// The elements of an array (bytes become `.byte` values).
    public var arrayElements: [DBusValue]? {
        switch unwrapped {
        case .array(_, let items): return items
        case .bytes(let b): return b.map(DBusValue.byte)
        case .dictionary(_, _, let entries): return entries.map { .structure([$0.key, $0.value]) }
        default: return nil
        }
    }

    /// `as` as Swift strings.
    public var strings: [String]? {
        arrayElements?.compactMap(\.string)
    }

    /// A dictionary keyed by strings or object paths (`a{sv}`, `a{oa{sa{sv}}}`, ...), values with
    /// their variants removed.
    public var stringKeyedDictionary: [String: DBusValue]? {
        guard case .dictionary(_, _, let entries) = unwrapped else { return nil }
        var out: [String: DBusValue] = [:]
        for entry in entries {
            guard let key = entry.key.string else { return nil }
            out[key] = entry.value.unwrapped
        }
        return out
    }
}
