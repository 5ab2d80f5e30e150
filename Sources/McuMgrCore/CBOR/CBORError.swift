/// Why CBOR bytes could not be decoded.
public enum CBORError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The input ended inside an item.
    case truncated
    /// A reserved additional-information value (28-30), or an indefinite length where none is allowed.
    case malformed(String)
    /// A text string that is not valid UTF-8.
    case invalidUTF8
    /// Nesting deeper than the decoder allows.
    case tooDeep
    /// A declared length larger than the input could hold.
    case lengthTooLarge(UInt64)
    /// Bytes left after the top-level item.
    case trailingBytes(Int)
    /// A Codable mapping failed: what was expected, where.
    case typeMismatch(expected: String, found: String, path: String)
    /// A required key is missing.
    case missingKey(String, path: String)
    /// A value does not fit the requested Swift type.
    case valueOutOfRange(String, path: String)

    public var description: String {
        switch self {
        case .truncated: return "CBOR data ends inside an item"
        case .malformed(let why): return "malformed CBOR: \(why)"
        case .invalidUTF8: return "CBOR text string is not valid UTF-8"
        case .tooDeep: return "CBOR nesting is too deep"
        case .lengthTooLarge(let n): return "CBOR item declares length \(n), more than the data holds"
        case .trailingBytes(let n): return "\(n) bytes follow the CBOR item"
        case .typeMismatch(let expected, let found, let path):
            return "expected \(expected) but found \(found) at \(path.isEmpty ? "top level" : path)"
        case .missingKey(let key, let path):
            return "missing key \"\(key)\" at \(path.isEmpty ? "top level" : path)"
        case .valueOutOfRange(let what, let path):
            return "\(what) out of range at \(path.isEmpty ? "top level" : path)"
        }
    }
}
