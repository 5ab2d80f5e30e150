import Foundation
import Testing

@testable import McuMgrCore

// SMP-shaped types used across the tests.
private struct ImageSlot: Codable, Equatable {
    var image: Int?
    var slot: Int
    var version: String
    var hash: Data
    var bootable: Bool?
    var pending: Bool?
    var confirmed: Bool?
    var active: Bool
    var permanent: Bool?
}

private struct ImageStateResponse: Codable, Equatable {
    var images: [ImageSlot]
    var splitStatus: Int?
}

private struct UploadRequest: Codable, Equatable {
    var image: UInt32?
    var len: UInt64?
    var off: UInt64
    var sha: Data?
    var data: Data
    var upgrade: Bool?
}

private struct GroupError: Codable, Equatable {
    var group: UInt16
    var rc: Int32
}

private struct ErrorResponse: Codable, Equatable {
    var rc: Int32?
    var rsn: String?
    var err: GroupError?
}

private let encoder = CBOREncoder()
private let decoder = CBORDecoder()

private func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
    let bytes = try encoder.encode(value)
    let back = try decoder.decode(T.self, from: bytes)
    #expect(back == value)
    // Through the item API as well.
    let item = try encoder.encodeItem(value)
    #expect(item.encoded == bytes)
    #expect(try decoder.decode(T.self, from: item) == value)
    return back
}

@Suite struct CBORCodableTests {
    // MARK: Exact bytes

    @Test func echoRequestMatchesProtocolVector() throws {
        struct Echo: Codable { var d: String }
        #expect(hexString(try encoder.encode(Echo(d: "hello"))) == "a161646568656c6c6f")
    }

    @Test func errorResponseMatchesProtocolVectors() throws {
        let v2 = ErrorResponse(err: GroupError(group: 1, rc: 9))
        #expect(hexString(try encoder.encode(v2)) == "a163657272a26567726f7570016272630" + "9")
        #expect(try decoder.decode(ErrorResponse.self, from: hexBytes("a1627263 08")) == ErrorResponse(rc: 8))
        // Zephyr without ZCBOR_CANONICAL: indefinite-length maps.
        let indefinite = hexBytes("bf 63657272 bf 6567726f7570 01 627263 09 ff ff")
        #expect(try decoder.decode(ErrorResponse.self, from: indefinite) == v2)
        // Negative rc (MCUboot slot info).
        #expect(try decoder.decode(ErrorResponse.self, from: hexBytes("a1627263 20")).rc == -1)
    }

    @Test func structFieldsKeepDeclarationOrderAndOmitNil() throws {
        let request = UploadRequest(image: 0, len: 70000, off: 0, sha: nil, data: Data([1, 2, 3]), upgrade: false)
        let item = try encoder.encodeItem(request)
        let keys = item.mapEntries?.map { $0.key.string ?? "?" }
        #expect(keys == ["image", "len", "off", "data", "upgrade"])
        #expect(item["data"] == .bytes([1, 2, 3]))
        #expect(item["len"] == .unsigned(70000))
        #expect(item["upgrade"] == .bool(false))
    }

    @Test func explicitEncodeNilWritesNull() throws {
        struct WithNull: Encodable {
            var name: String?
            enum CodingKeys: String, CodingKey { case name }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(name, forKey: .name)  // non-IfPresent: nil → null
            }
        }
        #expect(hexString(try encoder.encode(WithNull(name: nil))) == "a1646e616d65f6")
        #expect(hexString(try encoder.encode(Optional<Int>.none)) == "f6")
        #expect(hexString(try encoder.encode([1, nil, 3] as [Int?])) == "8301f603")
    }

    // MARK: Round trips

    @Test func imageStateRoundTrip() throws {
        let state = ImageStateResponse(
            images: [
                ImageSlot(slot: 0, version: "1.2.3", hash: Data((0..<32).map { UInt8($0) }), bootable: true,
                          pending: false, confirmed: true, active: true, permanent: false),
                ImageSlot(image: 1, slot: 1, version: "1.3.0+4", hash: Data(repeating: 0xAB, count: 32),
                          active: false),
            ],
            splitStatus: 0)
        _ = try roundTrip(state)
        let item = try encoder.encodeItem(state)
        #expect(item["images"]?.arrayValue?[0]["hash"]?.byteString?.count == 32)
        #expect(item["images"]?.arrayValue?[1]["bootable"] == nil)
    }

    @Test func nestedOptionalsRoundTrip() throws {
        struct Inner: Codable, Equatable {
            var a: Int?
            var b: [String]?
        }
        struct Outer: Codable, Equatable {
            var inner: Inner?
            var list: [Inner?]
            var deep: [[Int?]]?
        }
        _ = try roundTrip(Outer(inner: nil, list: [], deep: nil))
        _ = try roundTrip(Outer(inner: Inner(a: nil, b: nil), list: [nil, Inner(a: 1, b: [])], deep: [[1, nil], []]))
        // null and undefined both read as nil.
        let withNull = try decoder.decode(Outer.self, from: hexBytes("a2 65696e6e6572 f6 646c697374 82 f7 a0"))
        #expect(withNull == Outer(inner: nil, list: [nil, Inner()], deep: nil))
    }

    @Test func dictionariesOfStructsRoundTrip() throws {
        let slot = ImageSlot(slot: 0, version: "0.1", hash: Data([9]), active: true)
        let byName: [String: ImageSlot] = ["primary": slot, "secondary": slot, "5": slot]
        _ = try roundTrip(byName)
        // Text keys stay text even when they look like numbers; order is deterministic.
        let item = try encoder.encodeItem(byName)
        #expect(item.mapEntries?.map(\.key) == [.text("5"), .text("primary"), .text("secondary")])
    }

    @Test func intKeyedDictionaryUsesIntegerKeys() throws {
        let dict: [Int: String] = [1000: "k", -1: "m", 0: "z", 24: "x", -25: "y"]
        let item = try encoder.encodeItem(dict)
        #expect(item.mapEntries?.map(\.key) == [0, 24, 1000, -1, -25])
        _ = try roundTrip(dict)
        // Text keys holding digits also decode into an Int-keyed dictionary.
        #expect(try decoder.decode([Int: Int].self, from: hexBytes("a2 613701 0802")) == [7: 1, 8: 2])
        // Int-keyed dictionary of structs, nested.
        struct Holder: Codable, Equatable { var byID: [Int: GroupError] }
        _ = try roundTrip(Holder(byID: [3: GroupError(group: 1, rc: 2), -4: GroupError(group: 64, rc: -1)]))
    }

    @Test func codingKeysWithIntRawValuesUseNames() throws {
        struct Keyed: Codable, Equatable {
            var alpha: Int
            enum CodingKeys: Int, CodingKey { case alpha = 7 }
        }
        #expect(try encoder.encodeItem(Keyed(alpha: 1)) == ["alpha": 1])
        _ = try roundTrip(Keyed(alpha: 1))
    }

    @Test func largeMapsDecodeByIndex() throws {
        var dict: [String: Int] = [:]
        for i in 0..<2000 { dict["key\(i)"] = i }
        _ = try roundTrip(dict)
        // A struct read from a map with many unknown keys ahead of the known ones.
        var entries: [CBORMapEntry] = (0..<50).map { CBORMapEntry(key: .text("x\($0)"), value: .null) }
        entries.append(CBORMapEntry(key: "group", value: 3))
        entries.append(CBORMapEntry(key: "rc", value: -2))
        #expect(try decoder.decode(GroupError.self, from: .map(entries)) == GroupError(group: 3, rc: -2))
        // Duplicate keys: the first one wins, small or large.
        let dup: CBOR = .map([CBORMapEntry(key: "group", value: 1), CBORMapEntry(key: "rc", value: 2),
                              CBORMapEntry(key: "group", value: 9)])
        #expect(try decoder.decode(GroupError.self, from: dup).group == 1)
        #expect(try decoder.decode(GroupError.self, from: .map(entries + [CBORMapEntry(key: "rc", value: 5)])).rc == -2)
    }

    @Test func integerBoundariesRoundTrip() throws {
        struct Ints: Codable, Equatable {
            var i8: [Int8], i16: [Int16], i32: [Int32], i64: [Int64], i: [Int]
            var u8: [UInt8], u16: [UInt16], u32: [UInt32], u64: [UInt64], u: [UInt]
        }
        let value = Ints(
            i8: [.min, -25, -24, -1, 0, 23, 24, .max], i16: [.min, -257, -256, 255, 256, .max],
            i32: [.min, -65537, 65536, .max], i64: [.min, -4_294_967_297, 4_294_967_296, .max], i: [.min, .max],
            u8: [0, 23, 24, .max], u16: [0, 255, 256, .max], u32: [65535, 65536, .max],
            u64: [0, 0xFFFF_FFFF, 0x1_0000_0000, .max], u: [0, .max])
        _ = try roundTrip(value)
        let item = try encoder.encodeItem(value)
        #expect(item["i64"]?.arrayValue?.first == .negative(UInt64(Int64.max)))
        #expect(item["u64"]?.arrayValue?.last == .unsigned(.max))
        #expect(hexString(try encoder.encode(Int64.min)) == "3b7fffffffffffffff")
        #expect(hexString(try encoder.encode(UInt64.max)) == "1bffffffffffffffff")
        #expect(hexString(try encoder.encode(-24 as Int8)) == "37")
        #expect(hexString(try encoder.encode(-25 as Int16)) == "3818")
    }

    @Test func floatsKeepTheirWidthAndAcceptAnyNumber() throws {
        #expect(hexString(try encoder.encode(1.5 as Double)) == "fb3ff8000000000000")
        #expect(hexString(try encoder.encode(1.5 as Float)) == "fa3fc00000")
        #expect(try decoder.decode(Double.self, from: hexBytes("f93e00")) == 1.5)
        #expect(try decoder.decode(Double.self, from: hexBytes("fa3fc00000")) == 1.5)
        #expect(try decoder.decode(Double.self, from: hexBytes("1903e8")) == 1000)
        #expect(try decoder.decode(Double.self, from: hexBytes("3903e7")) == -1000)
        #expect(try decoder.decode(Float.self, from: hexBytes("fb3ff8000000000000")) == 1.5)
        #expect(try decoder.decode(Float.self, from: hexBytes("f97c00")) == .infinity)
        #expect(try decoder.decode(Double.self, from: hexBytes("f97e00")).isNaN)
        #expect(throws: CBORError.valueOutOfRange("Float value 1e+300", path: "")) {
            _ = try decoder.decode(Float.self, from: hexBytes("fb7e37e43c8800759c"))
        }
        struct Measure: Codable, Equatable { var d: Double; var f: Float; var list: [Double] }
        _ = try roundTrip(Measure(d: .pi, f: -0.1, list: [0, -0.0, .infinity, 1e-300]))
    }

    @Test func dataIsAByteStringButByteArraysAreArrays() throws {
        let payload = Data([0x00, 0xFF, 0x10])
        #expect(hexString(try encoder.encode(payload)) == "4300ff10")
        #expect(hexString(try encoder.encode([UInt8]([0x00, 0xFF, 0x10]))) == "830018ff10")
        #expect(try decoder.decode(Data.self, from: hexBytes("4300ff10")) == payload)
        #expect(try decoder.decode([UInt8].self, from: hexBytes("830018ff10")) == [0, 255, 16])
        // Indefinite-length byte strings decode too; arrays are not byte strings.
        #expect(try decoder.decode(Data.self, from: hexBytes("5f 4100 42ff10 ff")) == payload)
        #expect(throws: CBORError.typeMismatch(expected: "byte string", found: "array", path: "")) {
            _ = try decoder.decode(Data.self, from: hexBytes("830018ff10"))
        }
        // Data inside optionals, arrays and dictionaries.
        struct Blobs: Codable, Equatable { var one: Data?; var many: [Data]; var named: [String: Data] }
        _ = try roundTrip(Blobs(one: Data(), many: [Data([1]), Data(count: 1024)], named: ["a": Data([2])]))
    }

    @Test func cborFieldsPassThroughUnchanged() throws {
        struct Response: Codable, Equatable {
            var rc: Int?
            var output: CBOR
            var extra: CBOR?
        }
        let weird: CBOR = .tagged(40000, [.undefined, .simple(99), .half(1.5), .bytes([1]), ["k": .negative(5)]])
        let response = Response(rc: 0, output: weird, extra: .text("x"))
        let back = try roundTrip(response)
        #expect(back.output == weird)
        // A top-level CBOR value, and one inside collections.
        #expect(try encoder.encode(weird) == weird.encoded)
        #expect(try decoder.decode(CBOR.self, from: weird.encoded) == weird)
        _ = try roundTrip([weird, .null])
        _ = try roundTrip(["a": weird])
    }

    @Test func tagsAreLookedThroughUnlessDecodingCBOR() throws {
        struct Tagged: Codable, Equatable { var n: Int; var s: String; var d: Data }
        // {"n": 1(5), "s": 32("x"), "d": 24(h'01')} with the whole map under tag 55799.
        let bytes = hexBytes("d9d9f7 a3 616e c105 6173 d820 6178 6164 d818 4101")
        #expect(try decoder.decode(Tagged.self, from: bytes) == Tagged(n: 5, s: "x", d: Data([1])))
        #expect(try decoder.decode(CBOR.self, from: bytes).encoded == bytes)
        struct Raw: Codable { var n: CBOR }
        #expect(try decoder.decode(Raw.self, from: bytes).n == .tagged(1, 5))
    }

    @Test func enumsRoundTrip() throws {
        enum State: String, Codable { case idle, busy }
        enum Event: Codable, Equatable {
            case started(id: Int)
            case stopped(reason: String?, code: Int)
            case reset
        }
        struct Holder: Codable, Equatable { var state: State; var events: [Event] }
        _ = try roundTrip(Holder(state: .busy, events: [.started(id: 1), .stopped(reason: nil, code: -3), .reset]))
        #expect(throws: DecodingError.self) { try decoder.decode(State.self, from: hexBytes("6474697265")) }
    }

    @Test func superEncoderRoundTrip() throws {
        class Base: Codable, Equatable {
            var a: Int
            init(a: Int) { self.a = a }
            static func == (l: Base, r: Base) -> Bool { type(of: l) == type(of: r) && l.isEqual(r) }
            func isEqual(_ other: Base) -> Bool { a == other.a }
        }
        final class Derived: Base {
            var b: String
            init(a: Int, b: String) {
                self.b = b
                super.init(a: a)
            }
            enum CodingKeys: String, CodingKey { case b, base }
            required init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                b = try c.decode(String.self, forKey: .b)
                try super.init(from: c.superDecoder(forKey: .base))
            }
            override func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(b, forKey: .b)
                try super.encode(to: c.superEncoder(forKey: .base))
            }
            override func isEqual(_ other: Base) -> Bool {
                guard let o = other as? Derived else { return false }
                return a == o.a && b == o.b
            }
        }
        let value = Derived(a: 4, b: "x")
        #expect(try encoder.encodeItem(value) == ["b": "x", "base": ["a": 4]])
        let back = try decoder.decode(Derived.self, from: try encoder.encode(value))
        #expect(back.a == 4 && back.b == "x")
    }

    @Test func handWrittenContainersRoundTrip() throws {
        // Nested keyed/unkeyed containers, unkeyed superEncoder and plain superEncoder.
        struct Custom: Codable, Equatable {
            var x: Int
            var pairs: [[String]]
            enum K: String, CodingKey { case meta, list }
            enum M: String, CodingKey { case x }
            init(x: Int, pairs: [[String]]) {
                self.x = x
                self.pairs = pairs
            }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: K.self)
                var meta = c.nestedContainer(keyedBy: M.self, forKey: .meta)
                try meta.encode(x, forKey: .x)
                var list = c.nestedUnkeyedContainer(forKey: .list)
                for p in pairs {
                    var inner = list.nestedUnkeyedContainer()
                    for s in p { try inner.encode(s) }
                }
                var tail = list.superEncoder().singleValueContainer()
                try tail.encode("end")
                var sup = c.superEncoder().unkeyedContainer()
                try sup.encode(true)
            }
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: K.self)
                x = try c.nestedContainer(keyedBy: M.self, forKey: .meta).decode(Int.self, forKey: .x)
                var list = try c.nestedUnkeyedContainer(forKey: .list)
                var pairs: [[String]] = []
                while list.count! - list.currentIndex > 1 {
                    var inner = try list.nestedUnkeyedContainer()
                    var p: [String] = []
                    while !inner.isAtEnd { p.append(try inner.decode(String.self)) }
                    pairs.append(p)
                }
                let tail = try list.superDecoder().singleValueContainer().decode(String.self)
                guard tail == "end", list.isAtEnd else { throw CBORError.malformed("tail") }
                var sup = try c.superDecoder().unkeyedContainer()
                guard try sup.decode(Bool.self) else { throw CBORError.malformed("super") }
                self.pairs = pairs
            }
        }
        let value = Custom(x: -7, pairs: [["a", "b"], []])
        #expect(try encoder.encodeItem(value) == ["meta": ["x": -7], "list": [["a", "b"], [], "end"], "super": [true]])
        _ = try roundTrip(value)
    }

    @Test func topLevelValues() throws {
        #expect(hexString(try encoder.encode("IETF")) == "6449455446")
        #expect(hexString(try encoder.encode(true)) == "f5")
        #expect(hexString(try encoder.encode([String]())) == "80")
        #expect(hexString(try encoder.encode([String: Int]())) == "a0")
        struct Empty: Codable {}
        #expect(hexString(try encoder.encode(Empty())) == "a0")
        var out: [UInt8] = [0xAA]
        try encoder.encode([1, 2], into: &out)
        #expect(out == [0xAA, 0x82, 0x01, 0x02])
        #expect(try decoder.decode(Int?.self, from: hexBytes("f6")) == nil)
        #expect(try decoder.decode(Int?.self, from: hexBytes("f7")) == nil)
        #expect(try decoder.decode(Int?.self, from: hexBytes("05")) == 5)
    }

    @Test func unknownKeysAreIgnored() throws {
        let bytes = try encoder.encode(CBOR.textMap(["future": [1, 2, ["x": "y"]], "group": 2, "rc": 3, "more": .null]))
        #expect(try decoder.decode(GroupError.self, from: bytes) == GroupError(group: 2, rc: 3))
    }

    // MARK: Errors

    @Test func missingKeyNamesTheKeyAndPath() throws {
        let bytes = try encoder.encode(
            CBOR.textMap(["images": [["slot": 0, "version": "1", "active": true]]]))
        let expected = CBORError.missingKey("hash", path: "images[0]")
        #expect(throws: expected) { try decoder.decode(ImageStateResponse.self, from: bytes) }
        #expect(expected.description == "missing key \"hash\" at images[0]")
        #expect(throws: CBORError.missingKey("images", path: "")) {
            _ = try decoder.decode(ImageStateResponse.self, from: hexBytes("a0"))
        }
    }

    @Test func typeMismatchNamesExpectedFoundAndPath() throws {
        let bytes = try encoder.encode(
            CBOR.textMap(["images": [["slot": 0, "version": 5, "hash": .bytes([]), "active": true]]]))
        let expected = CBORError.typeMismatch(expected: "text string", found: "unsigned integer", path: "images[0].version")
        #expect(throws: expected) { try decoder.decode(ImageStateResponse.self, from: bytes) }
        #expect(expected.description == "expected text string but found unsigned integer at images[0].version")

        #expect(throws: CBORError.typeMismatch(expected: "map", found: "array", path: "")) {
            _ = try decoder.decode(GroupError.self, from: hexBytes("80"))
        }
        #expect(throws: CBORError.typeMismatch(expected: "array", found: "map", path: "images")) {
            _ = try decoder.decode(ImageStateResponse.self, from: try encoder.encode(CBOR.textMap(["images": [:]])))
        }
        #expect(throws: CBORError.typeMismatch(expected: "byte string", found: "text string", path: "images[1].hash")) {
            let slot: CBOR = ["slot": 0, "version": "1", "hash": .bytes([]), "active": true]
            var bad = slot
            if case .map(var entries) = bad {
                entries[2].value = "not bytes"
                bad = .map(entries)
            }
            _ = try decoder.decode(ImageStateResponse.self, from: CBOR.textMap(["images": [slot, bad]]))
        }
        // Dictionary paths use the key; integer keys print in brackets.
        #expect(throws: CBORError.typeMismatch(expected: "boolean", found: "null", path: "flags.b")) {
            struct Flags: Codable { var flags: [String: Bool] }
            _ = try decoder.decode(Flags.self, from: CBOR.textMap(["flags": ["a": true, "b": .null]]))
        }
        #expect(throws: CBORError.typeMismatch(expected: "integer", found: "text string", path: "[7]")) {
            _ = try decoder.decode([Int: Int].self, from: [7: "x"])
        }
        // Reading past the end of an array.
        #expect(throws: CBORError.typeMismatch(expected: "integer", found: "end of array", path: "[1]")) {
            struct Pair: Decodable {
                init(from decoder: any Decoder) throws {
                    var c = try decoder.unkeyedContainer()
                    _ = try c.decode(Int.self)
                    _ = try c.decode(Int.self)
                }
            }
            _ = try decoder.decode(Pair.self, from: [1] as CBOR)
        }
    }

    @Test func outOfRangeIntegersThrowWithPath() throws {
        struct Small: Codable { var v: UInt8 }
        #expect(throws: CBORError.valueOutOfRange("UInt8 value 256", path: "v")) {
            _ = try decoder.decode(Small.self, from: ["v": 256])
        }
        #expect(throws: CBORError.valueOutOfRange("UInt8 value -1", path: "v")) {
            _ = try decoder.decode(Small.self, from: ["v": -1])
        }
        #expect(throws: CBORError.valueOutOfRange("Int8 value -129", path: "[2]")) {
            _ = try decoder.decode([Int8].self, from: [0, -128, -129] as CBOR)
        }
        #expect(throws: CBORError.valueOutOfRange("Int64 value 9223372036854775808", path: "")) {
            _ = try decoder.decode(Int64.self, from: .unsigned(1 << 63))
        }
        #expect(throws: CBORError.valueOutOfRange("Int value -18446744073709551616", path: "")) {
            _ = try decoder.decode(Int.self, from: .negative(.max))
        }
        #expect(throws: CBORError.valueOutOfRange("UInt32 value 4294967296", path: "x.y")) {
            struct Y: Codable { var y: UInt32 }
            struct X: Codable { var x: Y }
            _ = try decoder.decode(X.self, from: ["x": ["y": .unsigned(1 << 32)]])
        }
        #expect(try decoder.decode(Int64.self, from: .negative(UInt64(Int64.max))) == .min)
        #expect(throws: CBORError.typeMismatch(expected: "integer", found: "double-precision float", path: "")) {
            _ = try decoder.decode(Int.self, from: .double(1))
        }
    }

    // MARK: Other coders

    @Test func cborMapsToNaturalJSON() throws {
        let item: CBOR = ["n": -5, "u": .unsigned(.max), "b": .bytes([0xDE, 0xAD]), "t": "x", "a": [true, .null],
                          7: .half(1.5), "tag": .tagged(1, 3), "big": .negative(.max)]
        let json = JSONEncoder()
        json.outputFormatting = [.sortedKeys]
        let text = String(decoding: try json.encode(item), as: UTF8.self)
        #expect(text.contains("\"b\":\"dead\""))
        #expect(text.contains("\"n\":-5"))
        #expect(text.contains("\"u\":18446744073709551615"))
        #expect(text.contains("\"7\":1.5"))
        #expect(text.contains("\"tag\":3"))
        #expect(text.contains("\"a\":[true,null]"))
        let back = try JSONDecoder().decode(CBOR.self, from: Data(#"{"x":[1,-2,2.5,"s",null,false,{"y":{}}]}"#.utf8))
        #expect(back == ["x": [1, -2, .double(2.5), "s", .null, false, ["y": [:]]]])
    }

    // MARK: Performance

    @Test func uploadSizedRequestsAreFast() throws {
        // ~1 MiB upload: 1024 requests of 1 KiB each, encoded and decoded.
        let chunk = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        let start = ContinuousClock.now
        var total = 0
        for i in 0..<1024 {
            let request = UploadRequest(image: 0, len: i == 0 ? 1 << 20 : nil, off: UInt64(i * 1024),
                                        sha: i == 0 ? Data(count: 32) : nil, data: chunk, upgrade: nil)
            let bytes = try encoder.encode(request)
            total += bytes.count
            let back = try decoder.decode(UploadRequest.self, from: bytes)
            #expect(back.data.count == 1024)
        }
        let elapsed = ContinuousClock.now - start
        #expect(total > 1 << 20)
        #expect(elapsed < .seconds(60), "took \(elapsed)")
        // One 4 MiB byte string encodes without quadratic copying.
        let big = Data(count: 4 << 20)
        let bigStart = ContinuousClock.now
        let bytes = try encoder.encode(UploadRequest(off: 0, data: big))
        #expect(bytes.count > 4 << 20)
        #expect(try decoder.decode(UploadRequest.self, from: bytes).data.count == 4 << 20)
        #expect(ContinuousClock.now - bigStart < .seconds(60), "no quadratic copying")
    }
}
