/// RFC 4648 Base64 (standard alphabet, `=` padding) for the serial console framing.
///
/// Encoding produces ASCII bytes; decoding is incremental so frame lines can be decoded as they
/// arrive, one line at a time or concatenated.
enum Base64 {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Marks in `decodeTable` for bytes that are not alphabet characters.
    static let invalid: UInt8 = 0xFF
    static let padding: UInt8 = 0xFE

    /// Maps an ASCII byte to its 6-bit value, `padding` for `=`, or `invalid`.
    static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        table[Int(UInt8(ascii: "="))] = padding
        return table
    }()

    /// Number of Base64 characters for `count` bytes.
    static func encodedCount(of count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Appends the Base64 text of `bytes` to `output`.
    static func encode(_ bytes: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        output.reserveCapacity(output.count + encodedCount(of: bytes.count))
        alphabet.withUnsafeBufferPointer { alphabet in
            var index = 0
            while index + 3 <= bytes.count {
                let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
                output.append(alphabet[Int(group >> 18 & 0x3F)])
                output.append(alphabet[Int(group >> 12 & 0x3F)])
                output.append(alphabet[Int(group >> 6 & 0x3F)])
                output.append(alphabet[Int(group & 0x3F)])
                index += 3
            }
            let rest = bytes.count - index
            if rest > 0 {
                let group = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
                output.append(alphabet[Int(group >> 18 & 0x3F)])
                output.append(alphabet[Int(group >> 12 & 0x3F)])
                output.append(rest == 2 ? alphabet[Int(group >> 6 & 0x3F)] : UInt8(ascii: "="))
                output.append(UInt8(ascii: "="))
            }
        }
    }

    /// Decodes Base64 text fed one character at a time.
    ///
    /// Lenient where devices differ: a padded quad may be followed by more quads (each frame of a
    /// Zephyr packet is encoded on its own), and trailing bits of a padded quad are ignored.
    struct StreamDecoder: Sendable {
        private var accumulator: UInt32 = 0
        /// Characters of the current quad seen so far (0...3).
        private(set) var pendingCount = 0
        private var paddingCount = 0

        /// Feeds one character's `decodeTable` entry. Returns how many bytes (0...3) the character
        /// completed, stored big-endian in the low 24 bits of `bytes`, or nil when the text is invalid.
        @inline(__always)
        mutating func feed(_ code: UInt8) -> (count: Int, bytes: UInt32)? {
            if code < 64 {
                guard paddingCount == 0 else { return nil }
                accumulator = accumulator << 6 | UInt32(code)
                pendingCount += 1
                guard pendingCount == 4 else { return (0, 0) }
                pendingCount = 0
                let bytes = accumulator
                accumulator = 0
                return (3, bytes)
            }
            guard code == Base64.padding, pendingCount >= 2 else { return nil }
            paddingCount += 1
            pendingCount += 1
            accumulator <<= 6
            guard pendingCount == 4 else { return (0, 0) }
            let count = 3 - paddingCount
            let bytes = accumulator
            accumulator = 0
            pendingCount = 0
            paddingCount = 0
            return (count, bytes)
        }

        /// Forgets a partial quad.
        mutating func reset() {
            self = StreamDecoder()
        }
    }
}
