/// The type of an MCUboot TLV (`IMAGE_TLV_*`, PROTOCOL.md 6.3). Open numeric space: vendor types
/// (`0xXXA0`–`0xXXFF`) and types newer than this list keep their raw value.
public struct McuMgrImageTLVType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    /// 0x01: hash of the public key that signed the image (legacy v1 images: their SHA-256).
    public static let keyHash = Self(0x01)
    /// 0x02: the public key itself.
    public static let publicKey = Self(0x02)
    /// 0x10: SHA-256 image hash (32 bytes).
    public static let sha256 = Self(0x10)
    /// 0x11: SHA-384 image hash (48 bytes).
    public static let sha384 = Self(0x11)
    /// 0x12: SHA-512 image hash (64 bytes).
    public static let sha512 = Self(0x12)
    /// 0x20: RSA-2048 PSS signature.
    public static let rsa2048PSS = Self(0x20)
    /// 0x21: ECDSA P-224 signature (no longer supported by MCUboot).
    public static let ecdsa224 = Self(0x21)
    /// 0x22: ECDSA signature (P-256 or P-384).
    public static let ecdsaSignature = Self(0x22)
    /// 0x23: RSA-3072 PSS signature.
    public static let rsa3072PSS = Self(0x23)
    /// 0x24: Ed25519 signature.
    public static let ed25519 = Self(0x24)
    /// 0x25: the signature covers the image itself, not its digest.
    public static let sigPure = Self(0x25)
    /// 0x30: key encrypted with RSA-OAEP-2048.
    public static let encRSA2048 = Self(0x30)
    /// 0x31: key encrypted with AES-KW (128 or 256).
    public static let encKW = Self(0x31)
    /// 0x32: key encrypted with ECIES-P256.
    public static let encEC256 = Self(0x32)
    /// 0x33: key encrypted with ECIES-X25519.
    public static let encX25519 = Self(0x33)
    /// 0x34: key encrypted with ECIES-X25519 and SHA-512.
    public static let encX25519SHA512 = Self(0x34)
    /// 0x40: dependency on another image (image id, minimum version).
    public static let dependency = Self(0x40)
    /// 0x50: security counter.
    public static let securityCounter = Self(0x50)
    /// 0x60: measured-boot record (CBOR).
    public static let bootRecord = Self(0x60)
    /// 0x70: size of the decompressed image.
    public static let decompressedSize = Self(0x70)
    /// 0x71: hash of the decompressed image.
    public static let decompressedSHA = Self(0x71)
    /// 0x72: signature of the decompressed image.
    public static let decompressedSignature = Self(0x72)
    /// 0x73: size of the compressed, decrypted image.
    public static let compressedDecryptedSize = Self(0x73)
    /// 0x74: vendor UUID (design.md says 0x80; image.h, which the code uses, says 0x74).
    public static let uuidVID = Self(0x74)
    /// 0x75: image class UUID (design.md says 0x81; image.h says 0x75).
    public static let uuidCID = Self(0x75)

    private static let names: [UInt16: String] = [
        0x01: "KEYHASH", 0x02: "PUBKEY", 0x10: "SHA256", 0x11: "SHA384", 0x12: "SHA512",
        0x20: "RSA2048_PSS", 0x21: "ECDSA224", 0x22: "ECDSA_SIG", 0x23: "RSA3072_PSS", 0x24: "ED25519",
        0x25: "SIG_PURE", 0x30: "ENC_RSA2048", 0x31: "ENC_KW", 0x32: "ENC_EC256", 0x33: "ENC_X25519",
        0x34: "ENC_X25519_SHA512", 0x40: "DEPENDENCY", 0x50: "SEC_CNT", 0x60: "BOOT_RECORD",
        0x70: "DECOMP_SIZE", 0x71: "DECOMP_SHA", 0x72: "DECOMP_SIGNATURE", 0x73: "COMP_DEC_SIZE",
        0x74: "UUID_VID", 0x75: "UUID_CID",
    ]

    /// The image.h name without `IMAGE_TLV_` (e.g. "SHA256"), or nil for unknown types.
    public var name: String? { Self.names[rawValue] }

    /// True for the vendor range `0xXXA0`–`0xXXFF`.
    public var isVendor: Bool { rawValue & 0xFF >= 0xA0 }

    /// "SHA256 (0x10)", or "0x1234" for an unknown type.
    public var description: String {
        let hex = "0x" + String(rawValue, radix: 16)
        return name.map { "\($0) (\(hex))" } ?? hex
    }
}
