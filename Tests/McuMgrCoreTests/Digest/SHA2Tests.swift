import McuMgrCore
import TestSupport
import Testing

/// The SHA-2 digests against FIPS 180-4's examples and, for every length around the block boundaries
/// and in random splits, against Python's hashlib (OpenSSL's implementation).
@Suite("SHA-256, SHA-384, SHA-512")
struct SHA2Tests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static let alphabet56 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
    static let alphabet112 =
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"

    /// FIPS 180-4's example messages (NIST's "Examples with intermediate values") and the empty message.
    static let vectors: [(message: String, sha256: String, sha384: String, sha512: String)] = [
        (
            "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b",
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
        ),
        (
            "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        ),
        (
            alphabet56, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            "3391fdddfc8dc7393707a65b1b4709397cf8b1d162af05abfe8f450de5f36bc6b0455a8520bc4e6f5fe95b1fe3c8452b",
            "204a8fc6dda82f0a0ced7beb8e08a41657c16ef468b228a8279be331a703c33596fd15c13b1b07f9aa1d3bea57789ca031ad85c7a71dd70354ec631238ca3445"
        ),
        (
            alphabet112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
            "09330c33f71147e83d192fc782cd1b4753111b173b3b05d22fa08086e3b0f712fcc7c71a557e2db966c3e9fa91746039",
            "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"
        ),
    ]

    @Test func fipsExamples() {
        for vector in Self.vectors {
            let message = Array(vector.message.utf8)
            #expect(Self.hex(SHA256.hash(data: message)) == vector.sha256, "\(vector.message)")
            #expect(Self.hex(SHA384.hash(data: message)) == vector.sha384, "\(vector.message)")
            #expect(Self.hex(SHA512.hash(data: message)) == vector.sha512, "\(vector.message)")
        }
    }

    /// A million "a"s fed in pieces of 999 bytes, and as a sequence without contiguous storage.
    @Test func aMillionAsInPiecesAndFromASequence() {
        var sha256 = SHA256(), sha384 = SHA384(), sha512 = SHA512()
        let piece = [UInt8](repeating: 0x61, count: 999)
        var left = 1_000_000
        while left > 0 {
            let part = piece.prefix(left)
            sha256.update(data: part)
            sha384.update(data: part)
            sha512.update(data: part)
            left -= part.count
        }
        #expect(Self.hex(sha256.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        #expect(
            Self.hex(sha384.finalize())
                == "9d0e1809716474cb086e834e310a4a1ced149e9c00f248527972cec5704c2a5b07b8b3dc38ecc4ebae97ddd87f3d8985")
        #expect(
            Self.hex(sha512.finalize())
                == "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973ebde0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b"
        )
        let lazy = (0..<1_000_000).lazy.map { _ in UInt8(0x61) }
        #expect(Self.hex(SHA256.hash(data: lazy)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func finalizeLeavesTheHasherGoingOn() {
        var hasher = SHA256()
        hasher.update(data: Array("ab".utf8))
        _ = hasher.finalize()
        hasher.update(data: Array("c".utf8))
        #expect(Self.hex(hasher.finalize()) == Self.vectors[1].sha256)
    }

    /// Every length from 0 to 300 bytes (the 55/56/64 and 111/112/128 padding edges), then longer
    /// ones, each fed in random pieces, against hashlib.
    @Test(.enabled(if: TestPython.path != nil, TestPython.skipReason("hashlib")))
    func matchesHashlibAtEveryLengthInRandomSplits() throws {
        var generator = SplitMix64(seed: 0x5A5A)
        let lengths = Array(0...300) + [511, 512, 513, 1023, 1024, 1025, 4095, 4096, 65_537, 200_003]
        let messages = lengths.map { length in (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
        let script = """
            import hashlib, sys
            for line in sys.stdin:
                data = bytes.fromhex(line.strip())
                print(" ".join(hashlib.new(name, data).hexdigest() for name in ("sha256", "sha384", "sha512")))
            """
        let output = try TestPython.run(script: script, input: messages.map(Self.hex).joined(separator: "\n") + "\n")
        let expected = output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        try #require(expected.count == messages.count)
        for (message, reference) in zip(messages, expected) {
            var sha256 = SHA256(), sha384 = SHA384(), sha512 = SHA512()
            var offset = 0
            while offset < message.count {
                let end = min(message.count, offset + Int(generator.next() % 300))
                let piece = message[offset..<end]
                sha256.update(data: piece)
                sha384.update(data: piece)
                sha512.update(data: piece)
                offset = end
            }
            #expect(Self.hex(sha256.finalize()) == reference[0], "\(message.count) bytes")
            #expect(Self.hex(sha384.finalize()) == reference[1], "\(message.count) bytes")
            #expect(Self.hex(sha512.finalize()) == reference[2], "\(message.count) bytes")
        }
    }
}
