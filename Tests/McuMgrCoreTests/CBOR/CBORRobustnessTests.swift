import Foundation
import Testing
import TestSupport

@testable import McuMgrCore

private struct Slot: Codable {
    var slot: Int
    var version: String
    var hash: Data
    var active: Bool?
    var flags: [String: Bool]?
}

private struct State: Codable {
    var images: [Slot]
    var splitStatus: Int?
    var extra: CBOR?
    var byID: [Int: UInt8]?
}

/// Malformed and hostile input must throw (or decode), never crash, hang or allocate wildly.
@Suite struct CBORRobustnessTests {
    /// Decodes `bytes` every way we can; returns whether the item decode succeeded.
    @discardableResult
    private func feed(_ bytes: [UInt8]) -> Bool {
        let decoder = CBORDecoder()
        _ = try? decoder.decode(State.self, from: bytes)
        _ = try? decoder.decode([String: CBOR].self, from: bytes)
        _ = try? decoder.decode([Data].self, from: bytes)
        _ = try? decoder.decode([Int: String?].self, from: bytes)
        guard let item = try? CBOR(decoding: bytes) else { return false }
        // Whatever decodes re-encodes to something that decodes to the same item.
        let again = try? CBOR(decoding: item.encoded)
        #expect(again.map { sameItem($0, item) } == true, "\(hexString(bytes))")
        return true
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 0x5EED_0001)
        // Bias towards interesting initial bytes: containers, indefinite lengths, long arguments.
        let interesting: [UInt8] = [0x18, 0x19, 0x1A, 0x1B, 0x1F, 0x3B, 0x5B, 0x5F, 0x7B, 0x7F, 0x9B, 0x9F, 0xBB, 0xBF,
                                    0xA1, 0x81, 0xC1, 0xD8, 0xF8, 0xF9, 0xFA, 0xFB, 0xFF, 0x00, 0x60, 0x40]
        var decoded = 0
        for _ in 0..<10_000 {
            let count = Int.random(in: 0...48, using: &rng)
            let bytes = (0..<count).map { _ in
                Bool.random(using: &rng) ? interesting.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
            if feed(bytes) { decoded += 1 }
        }
        #expect(decoded > 0)
    }

    @Test func mutatedValidEncodingsNeverCrash() throws {
        var rng = SplitMix64(seed: 0x5EED_0002)
        let encoder = CBOREncoder()
        var seeds: [[UInt8]] = (0..<50).map { _ in randomItem(&rng).encoded }
        let state = State(
            images: [Slot(slot: 0, version: "1.2.3", hash: Data(count: 32), active: true, flags: ["a": true])],
            splitStatus: 0, extra: ["x": [1, 2]], byID: [1: 2])
        seeds.append(try encoder.encode(state))
        // Indefinite-length forms too.
        seeds.append(hexBytes("bf 66696d61676573 9f bf 64736c6f74 00 6776657273696f6e 6131 6468617368 5f 4101 ff ff ff ff"))
        var decoded = 0
        for _ in 0..<10_000 {
            var bytes = seeds.randomElement(using: &rng)!
            for _ in 0...Int.random(in: 0...3, using: &rng) {
                switch Int.random(in: 0..<5, using: &rng) {
                case 0 where !bytes.isEmpty:
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1 where !bytes.isEmpty:
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                case 2:
                    bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
                case 3 where !bytes.isEmpty:
                    bytes.remove(at: Int.random(in: 0..<bytes.count, using: &rng))
                default:
                    bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng)))
                }
            }
            if feed(bytes) { decoded += 1 }
        }
        #expect(decoded > 100)
    }

    @Test func deepNestingThrowsTooDeep() {
        for head: [UInt8] in [[0x81], [0x9F], [0xA1, 0x00], [0xBF, 0x00], [0xC1], [0xD9, 0xD9, 0xF7]] {
            let deep = Array([[UInt8]](repeating: head, count: 10_000).joined()) + [0x00]
            #expect(throws: CBORError.tooDeep) { try CBOR(decoding: deep) }
            #expect(throws: CBORError.tooDeep) { try CBORDecoder().decode(CBOR.self, from: deep) }
            #expect(throws: CBORError.tooDeep) { try CBORDecoder().decode(State.self, from: deep) }
        }
        // The limit itself is accepted.
        let atLimit = [UInt8](repeating: 0x81, count: CBORReader.maximumDepth) + [0x00]
        #expect((try? CBOR(decoding: atLimit)) != nil)
        let overLimit = [UInt8](repeating: 0x81, count: CBORReader.maximumDepth + 1) + [0x00]
        #expect(throws: CBORError.tooDeep) { try CBOR(decoding: overLimit) }
    }

    @Test(arguments: [
        "5b ffffffffffffffff", "7b ffffffffffffffff 61", "9b ffffffffffffffff 00", "bb ffffffffffffffff 00 00",
        "5a ffffffff 00", "9a 7fffffff", "5f 5b 7fffffffffffffff ff", "7f 7a ffffffff ff",
        "9f 9b 0100000000000000 ff", "a1 00 bb 0000000100000000", "c1 9b ffffffffffffffff",
    ])
    func hugeDeclaredLengthsThrowQuickly(_ hex: String) {
        let start = ContinuousClock.now
        #expect(throws: CBORError.self) { try CBOR(decoding: hexBytes(hex)) }
        #expect(throws: CBORError.self) { try CBORDecoder().decode(State.self, from: hexBytes(hex)) }
        #expect(ContinuousClock.now - start < .seconds(30), "a declared length is checked against the input before anything is read or allocated")
        do {
            _ = try CBOR(decoding: hexBytes(hex))
        } catch let error as CBORError {
            switch error {
            case .lengthTooLarge, .truncated: break
            default: Issue.record("unexpected \(error)")
            }
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func manyEmptyItemsInIndefiniteContainersAreLinear() throws {
        // 200,000 nulls in an indefinite array: decodes in bounded time.
        let bytes = [0x9F] + [UInt8](repeating: 0xF6, count: 200_000) + [0xFF]
        let start = ContinuousClock.now
        let item = try CBOR(decoding: bytes)
        #expect(item.arrayValue?.count == 200_000)
        #expect(ContinuousClock.now - start < .seconds(60), "linear, not quadratic")
    }

    @Test func trailingBytesAreRejected() {
        #expect(throws: CBORError.trailingBytes(2)) { try CBOR(decoding: hexBytes("01 02 03")) }
        #expect(throws: CBORError.trailingBytes(1)) { try CBORDecoder().decode(Int.self, from: hexBytes("01 02")) }
    }
}
