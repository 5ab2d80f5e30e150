extension CBOR {
    /// The item encoded with definite lengths and the shortest argument forms.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        CBORWriter.write(self, into: &out)
        return out
    }
}

/// Encodes CBOR items (definite lengths, shortest integer forms).
public enum CBORWriter {
    /// Appends the head of an item: major type and argument in the shortest form.
    @inlinable
    public static func writeHead(major: UInt8, argument: UInt64, into out: inout [UInt8]) {
        let m = major << 5
        switch argument {
        case 0..<24:
            out.append(m | UInt8(argument))
        case 24...0xFF:
            out.append(m | 24)
            out.append(UInt8(argument))
        case 0x100...0xFFFF:
            out.append(m | 25)
            out.append(UInt8(argument >> 8))
            out.append(UInt8(argument & 0xFF))
        case 0x1_0000...0xFFFF_FFFF:
            out.append(m | 26)
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8((argument >> UInt64(shift)) & 0xFF)) }
        default:
            out.append(m | 27)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((argument >> UInt64(shift)) & 0xFF)) }
        }
    }

    /// Number of bytes the head of an item with this argument takes.
    @inlinable
    public static func headSize(argument: UInt64) -> Int {
        switch argument {
        case 0..<24: return 1
        case 24...0xFF: return 2
        case 0x100...0xFFFF: return 3
        case 0x1_0000...0xFFFF_FFFF: return 5
        default: return 9
        }
    }

    /// Appends an item.
    public static func write(_ item: CBOR, into out: inout [UInt8]) {
        switch item {
        case .unsigned(let v):
            writeHead(major: 0, argument: v, into: &out)
        case .negative(let n):
            writeHead(major: 1, argument: n, into: &out)
        case .bytes(let b):
            writeHead(major: 2, argument: UInt64(b.count), into: &out)
            out.append(contentsOf: b)
        case .text(let s):
            let utf8 = s.utf8
            writeHead(major: 3, argument: UInt64(utf8.count), into: &out)
            out.append(contentsOf: utf8)
        case .array(let items):
            writeHead(major: 4, argument: UInt64(items.count), into: &out)
            for i in items { write(i, into: &out) }
        case .map(let entries):
            writeHead(major: 5, argument: UInt64(entries.count), into: &out)
            for e in entries {
                write(e.key, into: &out)
                write(e.value, into: &out)
            }
        case .tagged(let tag, let inner):
            writeHead(major: 6, argument: tag, into: &out)
            write(inner, into: &out)
        case .bool(let b):
            out.append(b ? 0xF5 : 0xF4)
        case .null:
            out.append(0xF6)
        case .undefined:
            out.append(0xF7)
        case .simple(let v):
            if v < 24 {
                out.append(0xE0 | v)
            } else {
                out.append(0xF8)
                out.append(v)
            }
        case .half(let f):
            out.append(0xF9)
            let h = Float16Bits.encode(f)
            out.append(UInt8(h >> 8))
            out.append(UInt8(h & 0xFF))
        case .float(let f):
            out.append(0xFA)
            let bits = f.bitPattern
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8((bits >> UInt32(shift)) & 0xFF)) }
        case .double(let d):
            out.append(0xFB)
            let bits = d.bitPattern
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((bits >> UInt64(shift)) & 0xFF)) }
        }
    }
}

/// IEEE 754 half-precision conversion without relying on the platform's Float16.
enum Float16Bits {
    static func decode(_ h: UInt16) -> Float {
        let sign: Float = (h & 0x8000) != 0 ? -1 : 1
        let exponent = Int((h >> 10) & 0x1F)
        let mantissa = Float(h & 0x3FF)
        switch exponent {
        case 0: return sign * mantissa * powf2(-24)
        case 31: return mantissa == 0 ? sign * .infinity : .nan
        default: return sign * (1 + mantissa / 1024) * powf2(exponent - 15)
        }
    }

    /// The nearest half-precision value (round half to even), infinity when too large.
    static func encode(_ f: Float) -> UInt16 {
        let bits = f.bitPattern
        let sign = UInt16((bits >> 16) & 0x8000)
        if f.isNaN { return 0x7E00 }
        if f.isInfinite { return sign | 0x7C00 }
        let exponent = Int((bits >> 23) & 0xFF) - 127
        let mantissa = bits & 0x7F_FFFF
        if exponent > 15 { return sign | 0x7C00 }
        if exponent >= -14 {
            // Normal: keep 10 mantissa bits; a carry may roll into the exponent (up to infinity).
            let base = UInt32(exponent + 15) << 10 | mantissa >> 13
            return sign | UInt16(roundHalfEven(base, remainder: mantissa & 0x1FFF, halfway: 0x1000))
        }
        if exponent >= -25 {
            // Subnormal: value = m * 2^-24.
            let full = mantissa | 0x80_0000
            let shift = UInt32(-exponent - 1)
            let base = full >> shift
            let remainder = full & ((1 << shift) - 1)
            return sign | UInt16(roundHalfEven(base, remainder: remainder, halfway: 1 << (shift - 1)))
        }
        return sign
    }

    private static func roundHalfEven(_ base: UInt32, remainder: UInt32, halfway: UInt32) -> UInt32 {
        if remainder > halfway || (remainder == halfway && base & 1 == 1) { return base + 1 }
        return base
    }

    private static func powf2(_ e: Int) -> Float {
        var r: Float = 1
        if e >= 0 { for _ in 0..<e { r *= 2 } } else { for _ in 0..<(-e) { r /= 2 } }
        return r
    }
}
