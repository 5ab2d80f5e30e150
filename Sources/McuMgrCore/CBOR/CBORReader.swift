extension CBOR {
    /// Decodes exactly one item that spans all of `bytes`.
    public init<C: Collection>(decoding bytes: C) throws where C.Element == UInt8 {
        var reader = CBORReader(Array(bytes))
        self = try reader.readItem()
        guard reader.remaining == 0 else { throw CBORError.trailingBytes(reader.remaining) }
    }
}

/// Decodes CBOR items from a buffer; accepts definite and indefinite lengths.
public struct CBORReader: Sendable {
    /// Maximum nesting depth accepted; deeper input is rejected, never a stack overflow.
    public static let maximumDepth = 64

    private let bytes: [UInt8]
    private(set) public var position: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.position = 0
    }

    /// Bytes not read yet.
    public var remaining: Int { bytes.count - position }

    /// Reads the next item.
    public mutating func readItem() throws -> CBOR {
        try readItem(depth: 0)
    }

    private mutating func byte() throws -> UInt8 {
        guard position < bytes.count else { throw CBORError.truncated }
        defer { position += 1 }
        return bytes[position]
    }

    private mutating func bigEndian(_ count: Int) throws -> UInt64 {
        guard remaining >= count else { throw CBORError.truncated }
        var v: UInt64 = 0
        for i in 0..<count { v = v << 8 | UInt64(bytes[position + i]) }
        position += count
        return v
    }

    /// Reads the argument for additional information `info`; nil means indefinite length (31).
    private mutating func argument(_ info: UInt8) throws -> UInt64? {
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return try bigEndian(1)
        case 25: return try bigEndian(2)
        case 26: return try bigEndian(4)
        case 27: return try bigEndian(8)
        case 31: return nil
        default: throw CBORError.malformed("reserved additional information \(info)")
        }
    }

    private mutating func take(_ count: UInt64) throws -> ArraySlice<UInt8> {
        guard count <= UInt64(remaining) else { throw CBORError.lengthTooLarge(count) }
        let n = Int(count)
        defer { position += n }
        return bytes[position..<(position + n)]
    }

    private func peekIsBreak() throws -> Bool {
        guard position < bytes.count else { throw CBORError.truncated }
        return bytes[position] == 0xFF
    }

    private mutating func readItem(depth: Int) throws -> CBOR {
        guard depth <= CBORReader.maximumDepth else { throw CBORError.tooDeep }
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1F
        switch major {
        case 0:
            guard let v = try argument(info) else { throw CBORError.malformed("indefinite-length integer") }
            return .unsigned(v)
        case 1:
            guard let v = try argument(info) else { throw CBORError.malformed("indefinite-length integer") }
            return .negative(v)
        case 2, 3:
            var data: [UInt8] = []
            if let length = try argument(info) {
                data = Array(try take(length))
            } else {
                // Indefinite: a sequence of definite chunks of the same major type, then break.
                while try !peekIsBreak() {
                    let chunkHead = try byte()
                    guard chunkHead >> 5 == major, let length = try argument(chunkHead & 0x1F) else {
                        throw CBORError.malformed("bad chunk in indefinite-length string")
                    }
                    data.append(contentsOf: try take(length))
                }
                position += 1
            }
            if major == 2 { return .bytes(data) }
            guard let s = String(validating: data, as: UTF8.self) else { throw CBORError.invalidUTF8 }
            return .text(s)
        case 4:
            var items: [CBOR] = []
            if let count = try argument(info) {
                // Each item takes at least one byte: a larger count cannot be real.
                guard count <= UInt64(remaining) else { throw CBORError.lengthTooLarge(count) }
                items.reserveCapacity(Int(count))
                for _ in 0..<count { items.append(try readItem(depth: depth + 1)) }
            } else {
                while try !peekIsBreak() { items.append(try readItem(depth: depth + 1)) }
                position += 1
            }
            return .array(items)
        case 5:
            var entries: [CBORMapEntry] = []
            if let count = try argument(info) {
                guard count <= UInt64(remaining / 2) else { throw CBORError.lengthTooLarge(count) }
                entries.reserveCapacity(Int(count))
                for _ in 0..<count {
                    let key = try readItem(depth: depth + 1)
                    let value = try readItem(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
            } else {
                while try !peekIsBreak() {
                    let key = try readItem(depth: depth + 1)
                    let value = try readItem(depth: depth + 1)
                    entries.append(CBORMapEntry(key: key, value: value))
                }
                position += 1
            }
            return .map(entries)
        case 6:
            guard let tag = try argument(info) else { throw CBORError.malformed("indefinite-length tag") }
            return .tagged(tag, try readItem(depth: depth + 1))
        default:  // 7
            switch info {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: return .undefined
            case 24:
                let v = try byte()
                guard v >= 32 else { throw CBORError.malformed("two-byte simple value \(v) below 32") }
                return .simple(v)
            case 25: return .half(Float16Bits.decode(UInt16(try bigEndian(2))))
            case 26: return .float(Float(bitPattern: UInt32(try bigEndian(4))))
            case 27: return .double(Double(bitPattern: try bigEndian(8)))
            case 31: throw CBORError.malformed("unexpected break")
            case 28, 29, 30: throw CBORError.malformed("reserved additional information \(info)")
            default: return .simple(info)
            }
        }
    }
}
