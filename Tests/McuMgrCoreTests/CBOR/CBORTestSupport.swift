import Foundation
import Testing
import TestSupport

@testable import McuMgrCore

/// Bytes from hex digits (spaces allowed).
func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8.filter { $0 != UInt8(ascii: " ") })
    precondition(digits.count % 2 == 0, "odd hex length")
    func value(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: preconditionFailure("bad hex digit")
        }
    }
    return stride(from: 0, to: digits.count, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
}

/// Lowercase hex of bytes.
func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    CBOR._hex(Array(bytes))
}

/// Item equality that compares floats by bit pattern (so NaN equals NaN and 0.0 differs from -0.0).
func sameItem(_ a: CBOR, _ b: CBOR) -> Bool {
    switch (a, b) {
    case (.half(let x), .half(let y)), (.float(let x), .float(let y)):
        return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN)
    case (.double(let x), .double(let y)):
        return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN)
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { sameItem($0, $1) }
    case (.map(let x), .map(let y)):
        return x.count == y.count
            && zip(x, y).allSatisfy { sameItem($0.key, $1.key) && sameItem($0.value, $1.value) }
    case (.tagged(let t, let x), .tagged(let u, let y)):
        return t == u && sameItem(x, y)
    default:
        return a == b
    }
}

/// The item in cbor2's canonical form: map keys sorted by encoded length then bytes, floats in the
/// shortest width that holds them exactly, NaN as half-precision 0x7e00.
func cbor2Canonical(_ item: CBOR) -> CBOR {
    switch item {
    case .array(let items):
        return .array(items.map(cbor2Canonical))
    case .map(let entries):
        let canonical = entries.map { CBORMapEntry(key: cbor2Canonical($0.key), value: cbor2Canonical($0.value)) }
        return .map(
            canonical.sorted { a, b in
                let ka = a.key.encoded, kb = b.key.encoded
                if ka.count != kb.count { return ka.count < kb.count }
                return ka.lexicographicallyPrecedes(kb)
            })
    case .tagged(let tag, let inner):
        return .tagged(tag, cbor2Canonical(inner))
    case .half(let f), .float(let f):
        return shortestFloat(Double(f))
    case .double(let d):
        return shortestFloat(d)
    default:
        return item
    }
}

private func shortestFloat(_ d: Double) -> CBOR {
    if d.isNaN { return .half(.nan) }
    let f = Float(d)
    if Double(f) == d || d.isInfinite {
        if Double(Float16Bits.decode(Float16Bits.encode(f))) == d { return .half(f) }
        return .float(f)
    }
    return .double(d)
}

/// A typed fixture value (see Scripts/cbor-vectors.py) as an item.
func itemFromFixture(_ json: Any) throws -> CBOR {
    let dict = try #require(json as? [String: Any])
    if let u = dict["u"] as? String { return .unsigned(try #require(UInt64(u))) }
    if let n = dict["n"] as? String { return .negative(try #require(UInt64(n))) }
    if let b = dict["b"] as? String { return .bytes(hexBytes(b)) }
    if let t = dict["t"] as? String { return .text(t) }
    if let a = dict["a"] as? [Any] { return .array(try a.map(itemFromFixture)) }
    if let m = dict["m"] as? [[Any]] {
        return .map(try m.map { CBORMapEntry(key: try itemFromFixture($0[0]), value: try itemFromFixture($0[1])) })
    }
    if let tag = dict["tag"] as? String { return .tagged(try #require(UInt64(tag)), try itemFromFixture(dict["v"]!)) }
    if let b = dict["bool"] as? Bool { return .bool(b) }
    if dict["null"] != nil { return .null }
    if dict["undef"] != nil { return .undefined }
    if let s = dict["simple"] as? Int {
        switch s {
        case 20: return .bool(false)
        case 21: return .bool(true)
        case 22: return .null
        case 23: return .undefined
        default: return .simple(UInt8(s))
        }
    }
    if let width = dict["f"] as? Int, let bitsHex = dict["bits"] as? String {
        let bits = hexBytes(bitsHex).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        switch width {
        case 16: return .half(Float16Bits.decode(UInt16(bits)))
        case 32: return .float(Float(bitPattern: UInt32(bits)))
        default: return .double(Double(bitPattern: bits))
        }
    }
    Issue.record("unknown fixture item \(dict)")
    return .undefined
}

/// A random item; tags avoid numbers that cbor2 gives meaning to (dates, bignums, …).
func randomItem(_ rng: inout SplitMix64, depth: Int = 0) -> CBOR {
    let kinds = depth < 4 ? 13 : 9
    switch Int.random(in: 0..<kinds, using: &rng) {
    case 0:
        let limits: [UInt64] = [23, 255, 65535, 0xFFFF_FFFF, .max]
        return .unsigned(UInt64.random(in: 0...limits.randomElement(using: &rng)!, using: &rng))
    case 1:
        let limits: [UInt64] = [23, 255, 65535, 0xFFFF_FFFF, .max]
        return .negative(UInt64.random(in: 0...limits.randomElement(using: &rng)!, using: &rng))
    case 2:
        let n = [0, 1, 23, 24, 300].randomElement(using: &rng)!
        return .bytes((0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) })
    case 3:
        let alphabet: [Character] = ["a", "Z", "0", " ", "é", "ü", "中", "🚀", "\u{301}", "\""]
        let n = [0, 1, 5, 30].randomElement(using: &rng)!
        return .text(String((0..<n).map { _ in alphabet.randomElement(using: &rng)! }))
    case 4:
        return .bool(Bool.random(using: &rng))
    case 5:
        return [CBOR.null, .undefined, .simple(UInt8.random(in: 0...19, using: &rng)),
                .simple(UInt8.random(in: 32...255, using: &rng))].randomElement(using: &rng)!
    case 6:
        return .half(Float16Bits.decode(UInt16.random(in: 0...0xFFFF, using: &rng)))
    case 7:
        return .float(Float(bitPattern: UInt32.random(in: 0...UInt32.max, using: &rng)))
    case 8:
        return .double(Double(bitPattern: UInt64.random(in: 0...UInt64.max, using: &rng)))
    case 9, 10:
        return .array((0..<Int.random(in: 0...5, using: &rng)).map { _ in randomItem(&rng, depth: depth + 1) })
    case 11:
        // Distinct keys, so that sorting is well defined.
        var entries: [CBORMapEntry] = []
        var seen = Set<CBOR>()
        for _ in 0..<Int.random(in: 0...5, using: &rng) {
            let key: CBOR = Bool.random(using: &rng)
                ? .int(Int.random(in: -600...600, using: &rng)) : .text("k\(Int.random(in: 0...999, using: &rng))")
            guard seen.insert(key).inserted else { continue }
            entries.append(CBORMapEntry(key: key, value: randomItem(&rng, depth: depth + 1)))
        }
        return .map(entries)
    default:
        let tags: [UInt64] = [6, 1000, 40000, 70000, 0x1_0000_0005]
        return .tagged(tags.randomElement(using: &rng)!, randomItem(&rng, depth: depth + 1))
    }
}
