/// What the three SHA-2 hashers offer: data in pieces, a digest at any point, or a digest at once.
package protocol SHA2Hasher: Sendable {
    init()
    mutating func update(data: some Sequence<UInt8>)
    /// The digest of everything passed to `update(data:)` (the hasher may go on taking data).
    func finalize() -> [UInt8]
}

extension SHA2Hasher {
    /// The digest of `data`.
    package static func hash(data: some Sequence<UInt8>) -> [UInt8] {
        var hasher = Self()
        hasher.update(data: data)
        return hasher.finalize()
    }
}

/// SHA-2 digests (FIPS 180-4): SHA-256 for image, file and SUIT hashes, SHA-384 and SHA-512 for
/// MCUboot images that carry those TLVs. Pure Swift, so that the tools need no cryptography library for
/// the only cryptography they do. The round constants and initial values were derived from the primes
/// (cube and square roots, FIPS 180-4 sections 4.2 and 5.3); the tests check every length around the
/// block boundaries, in random splits, against an independent implementation.
package struct SHA256: SHA2Hasher {
    private static let blockSize = 64

    private var message = SHA2Message<UInt32>(
        state: [
            0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A,
            0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19,
        ], blockSize: SHA256.blockSize)

    package init() {}

    package mutating func update(data: some Sequence<UInt8>) {
        message.append(data, compress: Self.compress)
    }

    /// The digest of everything passed to `update(data:)` (the hasher may go on taking data).
    package func finalize() -> [UInt8] {
        var last = message
        last.append(message.padding(lengthFieldSize: 8), compress: Self.compress)
        return last.state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
    }

    private static let roundConstants: [UInt32] = [
        0x428A_2F98, 0x7137_4491, 0xB5C0_FBCF, 0xE9B5_DBA5,
        0x3956_C25B, 0x59F1_11F1, 0x923F_82A4, 0xAB1C_5ED5,
        0xD807_AA98, 0x1283_5B01, 0x2431_85BE, 0x550C_7DC3,
        0x72BE_5D74, 0x80DE_B1FE, 0x9BDC_06A7, 0xC19B_F174,
        0xE49B_69C1, 0xEFBE_4786, 0x0FC1_9DC6, 0x240C_A1CC,
        0x2DE9_2C6F, 0x4A74_84AA, 0x5CB0_A9DC, 0x76F9_88DA,
        0x983E_5152, 0xA831_C66D, 0xB003_27C8, 0xBF59_7FC7,
        0xC6E0_0BF3, 0xD5A7_9147, 0x06CA_6351, 0x1429_2967,
        0x27B7_0A85, 0x2E1B_2138, 0x4D2C_6DFC, 0x5338_0D13,
        0x650A_7354, 0x766A_0ABB, 0x81C2_C92E, 0x9272_2C85,
        0xA2BF_E8A1, 0xA81A_664B, 0xC24B_8B70, 0xC76C_51A3,
        0xD192_E819, 0xD699_0624, 0xF40E_3585, 0x106A_A070,
        0x19A4_C116, 0x1E37_6C08, 0x2748_774C, 0x34B0_BCB5,
        0x391C_0CB3, 0x4ED8_AA4A, 0x5B9C_CA4F, 0x682E_6FF3,
        0x748F_82EE, 0x78A5_636F, 0x84C8_7814, 0x8CC7_0208,
        0x90BE_FFFA, 0xA450_6CEB, 0xBEF9_A3F7, 0xC671_78F2,
    ]

    @inline(__always) private static func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    /// Hashes whole 64-byte blocks into the state.
    private static func compress(_ state: inout [UInt32], _ blocks: UnsafeRawBufferPointer) {
        Self.roundConstants.withUnsafeBufferPointer { k in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                var h0 = state[0], h1 = state[1], h2 = state[2], h3 = state[3]
                var h4 = state[4], h5 = state[5], h6 = state[6], h7 = state[7]
                for start in stride(from: 0, to: blocks.count, by: Self.blockSize) {
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: start + 4 * t, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let s0 = Self.rotate(w[t - 15], 7) ^ Self.rotate(w[t - 15], 18) ^ (w[t - 15] >> 3)
                        let s1 = Self.rotate(w[t - 2], 17) ^ Self.rotate(w[t - 2], 19) ^ (w[t - 2] >> 10)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    for t in 0..<64 {
                        let sum1 = Self.rotate(e, 6) ^ Self.rotate(e, 11) ^ Self.rotate(e, 25)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ sum1 &+ choice &+ k[t] &+ w[t]
                        let sum0 = Self.rotate(a, 2) ^ Self.rotate(a, 13) ^ Self.rotate(a, 22)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = sum0 &+ majority
                        h = g
                        g = f
                        f = e
                        e = d &+ t1
                        d = c
                        c = b
                        b = a
                        a = t1 &+ t2
                    }
                    h0 &+= a
                    h1 &+= b
                    h2 &+= c
                    h3 &+= d
                    h4 &+= e
                    h5 &+= f
                    h6 &+= g
                    h7 &+= h
                }
                state = [h0, h1, h2, h3, h4, h5, h6, h7]
            }
        }
    }
}

/// SHA-512 (FIPS 180-4 section 6.4), and SHA-384 through it (`SHA384`).
package struct SHA512: SHA2Hasher {
    private static let blockSize = 128
    private static let initialState: [UInt64] = [
        0x6A09_E667_F3BC_C908, 0xBB67_AE85_84CA_A73B,
        0x3C6E_F372_FE94_F82B, 0xA54F_F53A_5F1D_36F1,
        0x510E_527F_ADE6_82D1, 0x9B05_688C_2B3E_6C1F,
        0x1F83_D9AB_FB41_BD6B, 0x5BE0_CD19_137E_2179,
    ]

    private var message: SHA2Message<UInt64>
    private let digestLength: Int

    package init() { self.init(initialState: Self.initialState, digestLength: 64) }

    init(initialState: [UInt64], digestLength: Int) {
        self.message = SHA2Message(state: initialState, blockSize: Self.blockSize)
        self.digestLength = digestLength
    }

    package mutating func update(data: some Sequence<UInt8>) {
        message.append(data, compress: Self.compress)
    }

    /// The digest of everything passed to `update(data:)` (the hasher may go on taking data).
    package func finalize() -> [UInt8] {
        var last = message
        last.append(message.padding(lengthFieldSize: 16), compress: Self.compress)
        let bytes = last.state.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (56 - 8 * UInt64($0))) } }
        return Array(bytes.prefix(digestLength))
    }

    private static let roundConstants: [UInt64] = [
        0x428A_2F98_D728_AE22, 0x7137_4491_23EF_65CD,
        0xB5C0_FBCF_EC4D_3B2F, 0xE9B5_DBA5_8189_DBBC,
        0x3956_C25B_F348_B538, 0x59F1_11F1_B605_D019,
        0x923F_82A4_AF19_4F9B, 0xAB1C_5ED5_DA6D_8118,
        0xD807_AA98_A303_0242, 0x1283_5B01_4570_6FBE,
        0x2431_85BE_4EE4_B28C, 0x550C_7DC3_D5FF_B4E2,
        0x72BE_5D74_F27B_896F, 0x80DE_B1FE_3B16_96B1,
        0x9BDC_06A7_25C7_1235, 0xC19B_F174_CF69_2694,
        0xE49B_69C1_9EF1_4AD2, 0xEFBE_4786_384F_25E3,
        0x0FC1_9DC6_8B8C_D5B5, 0x240C_A1CC_77AC_9C65,
        0x2DE9_2C6F_592B_0275, 0x4A74_84AA_6EA6_E483,
        0x5CB0_A9DC_BD41_FBD4, 0x76F9_88DA_8311_53B5,
        0x983E_5152_EE66_DFAB, 0xA831_C66D_2DB4_3210,
        0xB003_27C8_98FB_213F, 0xBF59_7FC7_BEEF_0EE4,
        0xC6E0_0BF3_3DA8_8FC2, 0xD5A7_9147_930A_A725,
        0x06CA_6351_E003_826F, 0x1429_2967_0A0E_6E70,
        0x27B7_0A85_46D2_2FFC, 0x2E1B_2138_5C26_C926,
        0x4D2C_6DFC_5AC4_2AED, 0x5338_0D13_9D95_B3DF,
        0x650A_7354_8BAF_63DE, 0x766A_0ABB_3C77_B2A8,
        0x81C2_C92E_47ED_AEE6, 0x9272_2C85_1482_353B,
        0xA2BF_E8A1_4CF1_0364, 0xA81A_664B_BC42_3001,
        0xC24B_8B70_D0F8_9791, 0xC76C_51A3_0654_BE30,
        0xD192_E819_D6EF_5218, 0xD699_0624_5565_A910,
        0xF40E_3585_5771_202A, 0x106A_A070_32BB_D1B8,
        0x19A4_C116_B8D2_D0C8, 0x1E37_6C08_5141_AB53,
        0x2748_774C_DF8E_EB99, 0x34B0_BCB5_E19B_48A8,
        0x391C_0CB3_C5C9_5A63, 0x4ED8_AA4A_E341_8ACB,
        0x5B9C_CA4F_7763_E373, 0x682E_6FF3_D6B2_B8A3,
        0x748F_82EE_5DEF_B2FC, 0x78A5_636F_4317_2F60,
        0x84C8_7814_A1F0_AB72, 0x8CC7_0208_1A64_39EC,
        0x90BE_FFFA_2363_1E28, 0xA450_6CEB_DE82_BDE9,
        0xBEF9_A3F7_B2C6_7915, 0xC671_78F2_E372_532B,
        0xCA27_3ECE_EA26_619C, 0xD186_B8C7_21C0_C207,
        0xEADA_7DD6_CDE0_EB1E, 0xF57D_4F7F_EE6E_D178,
        0x06F0_67AA_7217_6FBA, 0x0A63_7DC5_A2C8_98A6,
        0x113F_9804_BEF9_0DAE, 0x1B71_0B35_131C_471B,
        0x28DB_77F5_2304_7D84, 0x32CA_AB7B_40C7_2493,
        0x3C9E_BE0A_15C9_BEBC, 0x431D_67C4_9C10_0D4C,
        0x4CC5_D4BE_CB3E_42B6, 0x597F_299C_FC65_7E2A,
        0x5FCB_6FAB_3AD6_FAEC, 0x6C44_198C_4A47_5817,
    ]

    @inline(__always) private static func rotate(_ x: UInt64, _ n: UInt64) -> UInt64 { (x >> n) | (x << (64 - n)) }

    /// Hashes whole 128-byte blocks into the state.
    private static func compress(_ state: inout [UInt64], _ blocks: UnsafeRawBufferPointer) {
        Self.roundConstants.withUnsafeBufferPointer { k in
            withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 80) { w in
                var h0 = state[0], h1 = state[1], h2 = state[2], h3 = state[3]
                var h4 = state[4], h5 = state[5], h6 = state[6], h7 = state[7]
                for start in stride(from: 0, to: blocks.count, by: Self.blockSize) {
                    for t in 0..<16 {
                        w[t] = UInt64(bigEndian: blocks.loadUnaligned(fromByteOffset: start + 8 * t, as: UInt64.self))
                    }
                    for t in 16..<80 {
                        let s0 = Self.rotate(w[t - 15], 1) ^ Self.rotate(w[t - 15], 8) ^ (w[t - 15] >> 7)
                        let s1 = Self.rotate(w[t - 2], 19) ^ Self.rotate(w[t - 2], 61) ^ (w[t - 2] >> 6)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    for t in 0..<80 {
                        let sum1 = Self.rotate(e, 14) ^ Self.rotate(e, 18) ^ Self.rotate(e, 41)
                        let choice = (e & f) ^ (~e & g)
                        let t1 = h &+ sum1 &+ choice &+ k[t] &+ w[t]
                        let sum0 = Self.rotate(a, 28) ^ Self.rotate(a, 34) ^ Self.rotate(a, 39)
                        let majority = (a & b) ^ (a & c) ^ (b & c)
                        let t2 = sum0 &+ majority
                        h = g
                        g = f
                        f = e
                        e = d &+ t1
                        d = c
                        c = b
                        b = a
                        a = t1 &+ t2
                    }
                    h0 &+= a
                    h1 &+= b
                    h2 &+= c
                    h3 &+= d
                    h4 &+= e
                    h5 &+= f
                    h6 &+= g
                    h7 &+= h
                }
                state = [h0, h1, h2, h3, h4, h5, h6, h7]
            }
        }
    }
}

/// SHA-384: SHA-512 from other initial values, cut to 48 bytes (FIPS 180-4 sections 5.3.4 and 6.5).
package struct SHA384: SHA2Hasher {
    private static let initialState: [UInt64] = [
        0xCBBB_9D5D_C105_9ED8, 0x629A_292A_367C_D507,
        0x9159_015A_3070_DD17, 0x152F_ECD8_F70E_5939,
        0x6733_2667_FFC0_0B31, 0x8EB4_4A87_6858_1511,
        0xDB0C_2E0D_64F9_8FA7, 0x47B5_481D_BEFA_4FA4,
    ]
    private var inner = SHA512(initialState: SHA384.initialState, digestLength: 48)

    package init() {}

    package mutating func update(data: some Sequence<UInt8>) { inner.update(data: data) }

    /// The digest of everything passed to `update(data:)`.
    package func finalize() -> [UInt8] { inner.finalize() }
}

/// A message being hashed: the chaining state, the input cut into whole blocks for the compression
/// function (what is left waits for more), and the padding that ends it (FIPS 180-4 section 5.1).
/// SHA-256 and SHA-512 differ in word size, block size and rounds; their compression functions stay
/// two: one generic over the word type would rely on the optimiser to specialise it.
struct SHA2Message<Word: FixedWidthInteger & Sendable>: Sendable {
    /// The chaining state (H0...H7).
    var state: [Word]
    let blockSize: Int
    /// Bytes taken so far.
    private var length: UInt64 = 0
    /// Input not yet compressed: less than a block.
    private var pending: [UInt8] = []

    init(state: [Word], blockSize: Int) {
        self.state = state
        self.blockSize = blockSize
    }

    /// Takes `data`, hashing every whole block into the state with `compress` (several at once where
    /// they are contiguous); copies `data` only when its bytes are not contiguous.
    mutating func append(
        _ data: some Sequence<UInt8>, compress: (inout [Word], UnsafeRawBufferPointer) -> Void
    ) {
        let contiguous: Void? = data.withContiguousStorageIfAvailable {
            append(bytes: UnsafeRawBufferPointer($0), compress: compress)
        }
        if contiguous == nil {
            Array(data).withUnsafeBytes { append(bytes: $0, compress: compress) }
        }
    }

    private mutating func append(bytes: UnsafeRawBufferPointer, compress: (inout [Word], UnsafeRawBufferPointer) -> Void) {
        length &+= UInt64(bytes.count)
        var index = 0
        if !pending.isEmpty {
            index = min(blockSize - pending.count, bytes.count)
            pending += bytes[0..<index]
            guard pending.count == blockSize else { return }
            let block = pending
            block.withUnsafeBytes { compress(&state, $0) }
            pending.removeAll(keepingCapacity: true)
        }
        let whole = (bytes.count - index) / blockSize * blockSize
        if whole > 0 {
            compress(&state, UnsafeRawBufferPointer(rebasing: bytes[index..<(index + whole)]))
            index += whole
        }
        if index < bytes.count { pending += bytes[index...] }
    }

    /// 0x80, zeros, and the message length in bits as a big-endian field of `lengthFieldSize` (8 or 16)
    /// bytes, ending on a block boundary.
    func padding(lengthFieldSize: Int) -> [UInt8] {
        let used = (pending.count + 1 + lengthFieldSize) % blockSize
        var tail: [UInt8] = [0x80] + repeatElement(0, count: (blockSize - used) % blockSize)
        // The bit count takes 67 bits at most: the top 3 bits of the byte count go to the word above.
        let high = length >> 61, low = length &* 8
        let words = lengthFieldSize == 16 ? [high, low] : [low]
        for word in words {
            tail += (0..<8).map { UInt8(truncatingIfNeeded: word >> (56 - 8 * UInt64($0))) }
        }
        return tail
    }
}
