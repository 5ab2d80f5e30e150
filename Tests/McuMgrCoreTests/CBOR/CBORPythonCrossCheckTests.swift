import Foundation
import TestSupport
import Testing

@testable import McuMgrCore

/// Live cross-check against cbor2: our bytes through cbor2, and cbor2's bytes through us.
@Suite(.enabled(if: TestPython.hasModule("cbor2"), TestPython.skipReason("cbor2")))
struct CBORPythonCrossCheckTests {
    /// Reads one hex item per line, writes cbor2's canonical re-encoding (or "ERR message") per line.
    static let canonicalizeScript = """
        import sys, cbor2
        for line in sys.stdin:
            line = line.strip()
            try:
                value = cbor2.loads(bytes.fromhex(line))
                print(cbor2.dumps(value, canonical=True).hex())
            except Exception as e:
                print("ERR " + repr(e).replace("\\n", " "))
        """

    struct Record: Codable, Equatable {
        var id: UInt64
        var name: String
        var delta: Int64
        var small: Int8?
        var ratio: Double
        var single: Float
        var blob: Data
        var bytes: [UInt8]
        var tags: [String]
        var counts: [String: Int]
        var byCode: [Int: String]
        var child: Child?
        var raw: CBOR

        struct Child: Codable, Equatable {
            var flag: Bool
            var values: [Int32?]
        }
    }

    static func randomRecord(_ rng: inout SplitMix64) -> Record {
        func text(_ rng: inout SplitMix64) -> String {
            let alphabet: [Character] = ["a", "b", "Z", "9", "é", "水", "😀", " "]
            return String((0..<Int.random(in: 0...12, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
        }
        var counts: [String: Int] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) { counts[text(&rng)] = Int.random(in: .min ... .max, using: &rng) }
        var byCode: [Int: String] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) { byCode[Int.random(in: -1000...1000, using: &rng)] = text(&rng) }
        return Record(
            id: UInt64.random(in: 0...UInt64.max, using: &rng),
            name: text(&rng),
            delta: Int64.random(in: .min ... .max, using: &rng),
            small: Bool.random(using: &rng) ? Int8.random(in: .min ... .max, using: &rng) : nil,
            ratio: Double.random(in: -1e9...1e9, using: &rng),
            single: Float.random(in: -1000...1000, using: &rng),
            blob: Data((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }),
            bytes: (0..<Int.random(in: 0...5, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) },
            tags: (0..<Int.random(in: 0...3, using: &rng)).map { _ in text(&rng) },
            counts: counts,
            byCode: byCode,
            child: Bool.random(using: &rng)
                ? Record.Child(flag: Bool.random(using: &rng),
                               values: [Int32.random(in: .min ... .max, using: &rng), nil]) : nil,
            raw: randomItem(&rng, depth: 2))
    }

    @Test func ourEncodingsReadBackThroughCBOR2() throws {
        var rng = SplitMix64(seed: 0xC0B0_0001)
        let encoder = CBOREncoder()
        var inputs: [[UInt8]] = []
        var records: [Record] = []
        for _ in 0..<150 { inputs.append(try encoder.encode(randomItem(&rng))) }
        for _ in 0..<60 {
            let record = Self.randomRecord(&rng)
            records.append(record)
            inputs.append(try encoder.encode(record))
        }
        let output = try TestPython.run(
            script: Self.canonicalizeScript, input: inputs.map { hexString($0) }.joined(separator: "\n") + "\n")
        let lines = output.split(separator: "\n").map(String.init)
        try #require(lines.count == inputs.count)
        for (i, bytes) in inputs.enumerated() {
            let line = lines[i]
            #expect(!line.hasPrefix("ERR"), "cbor2 rejected \(hexString(bytes)): \(line)")
            guard !line.hasPrefix("ERR") else { continue }
            let ours = cbor2Canonical(try CBOR(decoding: bytes)).encoded
            #expect(hexString(ours) == line, "input \(hexString(bytes))")
            // Records survive the trip through cbor2 (canonical map order and float widths).
            if i >= 150 {
                let back = try CBORDecoder().decode(Record.self, from: hexBytes(line))
                var expected = records[i - 150]
                expected.raw = cbor2Canonical(expected.raw)
                #expect(sameItem(back.raw, expected.raw))
                var comparable = back
                comparable.raw = expected.raw
                #expect(comparable == expected)
            }
        }
    }

    /// Writes random values with cbor2 (default and indefinite-length forms) and their canonical form.
    static let generateScript = """
        import random, struct, sys, cbor2
        rng = random.Random(int(sys.stdin.read().strip() or "1"))
        ALPHABET = "abcXYZ09 \\u00e9\\u00fc\\u4e2d\\U0001f680"
        class Indef:
            def __init__(self, value): self.value = value
        def hook(enc, v):
            if isinstance(v.value, list):
                enc.write(b"\\x9f"); [enc.encode(x) for x in v.value]; enc.write(b"\\xff")
            elif isinstance(v.value, dict):
                enc.write(b"\\xbf")
                for k, x in v.value.items(): enc.encode(k); enc.encode(x)
                enc.write(b"\\xff")
            elif isinstance(v.value, bytes):
                enc.write(b"\\x5f"); enc.encode(v.value[:2]); enc.encode(v.value[2:]); enc.write(b"\\xff")
            else:
                enc.write(b"\\x7f"); enc.encode(v.value[:1]); enc.encode(v.value[1:]); enc.write(b"\\xff")
        def plain(v):
            if isinstance(v, Indef): return plain(v.value)
            if isinstance(v, list): return [plain(x) for x in v]
            if isinstance(v, dict): return {k: plain(x) for k, x in v.items()}
            if isinstance(v, cbor2.CBORTag): return cbor2.CBORTag(v.tag, plain(v.value))
            return v
        def value(depth=0):
            kinds = ["int", "neg", "bytes", "text", "bool", "none", "float", "undef", "simple"]
            if depth < 4: kinds += ["list", "dict", "tag", "indef"] * 2
            k = rng.choice(kinds)
            if k == "int": return rng.choice([rng.randrange(24), rng.randrange(2**16), rng.randrange(2**64)])
            if k == "neg": return -1 - rng.choice([rng.randrange(24), rng.randrange(2**32), rng.randrange(2**64)])
            if k == "bytes": return bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 40, 300])))
            if k == "text": return "".join(rng.choice(ALPHABET) for _ in range(rng.choice([0, 2, 30])))
            if k == "bool": return rng.random() < 0.5
            if k == "none": return None
            if k == "undef": return cbor2.undefined
            if k == "simple": return cbor2.CBORSimpleValue(rng.choice([0, 19, 32, 255]))
            if k == "float": return rng.choice([0.0, -0.0, 1.5, 0.1, 1e300, float("inf"), float("nan"), rng.uniform(-1e6, 1e6)])
            if k == "list": return [value(depth + 1) for _ in range(rng.randrange(5))]
            if k == "dict": return {rng.choice([rng.randrange(-300, 300), "k%d" % rng.randrange(999)]): value(depth + 1) for _ in range(rng.randrange(5))}
            if k == "tag": return cbor2.CBORTag(rng.choice([6, 1000, 40000, 2**32 + 5]), value(depth + 1))
            inner = rng.choice([[value(depth + 1) for _ in range(rng.randrange(4))],
                                {"i%d" % i: value(depth + 1) for i in range(rng.randrange(4))},
                                bytes(range(rng.randrange(6))), "ab\\u00e9cd"[:rng.randrange(1, 6)]])
            return Indef(inner)
        for _ in range(200):
            v = value()
            data = cbor2.dumps(v, default=hook)
            print(data.hex(), cbor2.dumps(plain(v), canonical=True).hex())
        """

    @Test func cbor2EncodingsDecodeHere() throws {
        let output = try TestPython.run(script: Self.generateScript, input: "8949")
        let lines = output.split(separator: "\n")
        try #require(lines.count == 200)
        for line in lines {
            let parts = line.split(separator: " ").map(String.init)
            try #require(parts.count == 2)
            let item = try CBOR(decoding: hexBytes(parts[0]))
            #expect(hexString(cbor2Canonical(item).encoded) == parts[1], "input \(parts[0])")
            // And through the Codable layer.
            let viaDecoder = try CBORDecoder().decode(CBOR.self, from: hexBytes(parts[0]))
            #expect(sameItem(viaDecoder, item))
        }
    }
}
