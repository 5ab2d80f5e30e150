import Foundation
import Testing

@testable import McuMgrCore

/// Vectors made by the independent cbor2 implementation (Scripts/cbor-vectors.py).
@Suite struct CBORVectorTests {
    struct Vector: CustomTestStringConvertible, Sendable {
        var description: String
        var hex: String
        var canonical: String
        var itemJSON: String
        var testDescription: String { description }
    }

    static let fixtureURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Fixtures/cbor-vectors.json")

    static func fixture() throws -> [String: Any] {
        let data = try Data(contentsOf: fixtureURL)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static let valid: [Vector] = {
        guard let doc = try? fixture(), let list = doc["valid"] as? [[String: Any]] else { return [] }
        return list.map { v in
            let hex = v["hex"] as! String
            let itemData = try! JSONSerialization.data(withJSONObject: v["item"]!, options: [.fragmentsAllowed])
            return Vector(
                description: v["description"] as! String, hex: hex, canonical: (v["canonical"] as? String) ?? hex,
                itemJSON: String(decoding: itemData, as: UTF8.self))
        }
    }()

    static let invalid: [Vector] = {
        guard let doc = try? fixture(), let list = doc["invalid"] as? [[String: Any]] else { return [] }
        return list.map { v in
            Vector(description: v["description"] as! String, hex: v["hex"] as! String, canonical: "", itemJSON: "")
        }
    }()

    @Test func fixtureIsPresentAndLarge() throws {
        #expect(Self.valid.count > 250)
        #expect(Self.invalid.count > 30)
        #expect(Self.valid.contains { $0.description.hasPrefix("RFC 8949 A:") })
    }

    @Test(arguments: valid)
    func decodesToExpectedItemAndReencodes(_ vector: Vector) throws {
        let expected = try itemFromFixture(
            try JSONSerialization.jsonObject(with: Data(vector.itemJSON.utf8), options: [.fragmentsAllowed]))
        let item = try CBOR(decoding: hexBytes(vector.hex))
        #expect(sameItem(item, expected), "decoded \(item)")
        #expect(hexString(item.encoded) == vector.canonical)
        // The canonical form decodes to the same item, and is its own re-encoding.
        let again = try CBOR(decoding: hexBytes(vector.canonical))
        #expect(sameItem(again, expected))
        #expect(hexString(again.encoded) == vector.canonical)
        // The Codable layer passes items through unchanged, and CBOREncoder writes them the same way.
        let viaDecoder = try CBORDecoder().decode(CBOR.self, from: hexBytes(vector.hex))
        #expect(sameItem(viaDecoder, expected))
        #expect(hexString(try CBOREncoder().encode(viaDecoder)) == vector.canonical)
        // The encoder's size estimate is exact.
        #expect(item._encodedSize == item.encoded.count)
    }

    @Test(arguments: invalid)
    func rejectsInvalidInput(_ vector: Vector) {
        #expect(throws: CBORError.self) { try CBOR(decoding: hexBytes(vector.hex)) }
        #expect(throws: (any Error).self) { try CBORDecoder().decode(CBOR.self, from: hexBytes(vector.hex)) }
    }

    @Test func halfFloatConversionMatchesFixture() throws {
        // Every fixture half-float value: decoding its bits gives the value cbor2 computed, and
        // encoding that value gives the bits back.
        let doc = try Self.fixture()
        let list = try #require(doc["valid"] as? [[String: Any]])
        var checked = 0
        for v in list {
            guard let item = v["item"] as? [String: Any], item["f"] as? Int == 16,
                let bits = item["bits"] as? String, let value = item["value"] as? Double
            else { continue }
            let raw = UInt16(hexBytes(bits)[0]) << 8 | UInt16(hexBytes(bits)[1])
            #expect(Double(Float16Bits.decode(raw)) == value, "\(bits)")
            #expect(Float16Bits.encode(Float(value)) == raw, "\(bits)")
            checked += 1
        }
        #expect(checked >= 8)
    }

    @Test func halfFloatEncodingRoundsToNearestEven() {
        // 1 + 2^-11 is halfway between 1.0 and the next half (1 + 2^-10): ties go to even (1.0).
        #expect(Float16Bits.encode(1 + 0x1p-11) == 0x3C00)
        #expect(Float16Bits.encode(1 + 0x1p-11 + 0x1p-20) == 0x3C01)
        #expect(Float16Bits.encode(1 + 3 * 0x1p-11) == 0x3C02)
        #expect(Float16Bits.encode(65520) == 0x7C00)  // rounds up to infinity
        #expect(Float16Bits.encode(65519) == 0x7BFF)
        #expect(Float16Bits.encode(0x1p-25) == 0x0000)  // tie below the smallest subnormal → 0
        #expect(Float16Bits.encode(0x1.8p-25) == 0x0001)
        #expect(Float16Bits.encode(-0x1p-24) == 0x8001)
        // Every half value survives a round trip.
        let failures = (UInt16(0)...UInt16.max).filter { bits in
            let isNaN = (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0
            return !isNaN && Float16Bits.encode(Float16Bits.decode(bits)) != bits
        }
        #expect(failures.isEmpty, "first failures: \(failures.prefix(5))")
    }
}
