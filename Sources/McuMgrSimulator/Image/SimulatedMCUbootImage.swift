import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager

/// Builds and parses MCUboot images (PROTOCOL.md 6): a 32-byte header (padded to `hdr_size`), the body,
/// and an unprotected TLV area (0x6907) with a SHA-256 TLV (0x10) over header and body.
public enum SimulatedMCUbootImage {
    /// `IMAGE_MAGIC`.
    public static let magic: UInt32 = 0x96F3_B83D
    /// `IMAGE_MAGIC_V1` (legacy).
    public static let legacyMagic: UInt32 = 0x96F3_B83C
    static let tlvInfoMagic: UInt16 = 0x6907
    static let protectedTLVInfoMagic: UInt16 = 0x6908
    static let sha256TLV: UInt16 = 0x10
    /// `IMAGE_F_NON_BOOTABLE`.
    public static let nonBootableFlag: UInt32 = 0x10
    /// `IMAGE_F_ROM_FIXED`: `ih_load_addr` is the flash address the image is linked for (Direct-XIP).
    public static let romFixedFlag: UInt32 = 0x100

    /// A complete image file with a correct SHA-256 TLV, made by the library's `McuMgrImageBuilder`.
    /// - Parameters:
    ///   - headerSize: `ih_hdr_size`, at least 32; the header is padded with zeros up to it.
    public static func build(
        version: McuMgrImageVersion, body: [UInt8], headerSize: Int = 32, flags: UInt32 = 0,
        loadAddress: UInt32 = 0
    ) -> [UInt8] {
        precondition(headerSize >= 32 && headerSize <= 0xFFFF, "header size must be 32...65535")
        let builder = McuMgrImageBuilder(
            version: version,
            headerSize: headerSize, headerPadding: 0, loadAddress: loadAddress, flags: McuMgrImageFlags(rawValue: flags))
        // The builder only throws for sizes out of range, which the precondition above rules out.
        return [UInt8](try! builder.build(body: Data(body)))
    }

    /// The SHA-256 TLV value of an image (the hash the image list shows), nil if it cannot be parsed.
    public static func imageHash(of image: [UInt8]) -> [UInt8]? {
        try? parse(image, verifyHash: false).hash
    }

    /// What the device knows about a valid image.
    struct Info: Sendable, Hashable {
        var version: McuMgrImageVersion
        var hash: [UInt8]
        var flags: UInt32
        /// `ih_load_addr`.
        var loadAddress: UInt32 = 0
        var bootable: Bool { flags & SimulatedMCUbootImage.nonBootableFlag == 0 }
        /// `IMAGE_F_ROM_FIXED`: linked for the flash address in `loadAddress`.
        var romFixed: Bool { flags & SimulatedMCUbootImage.romFixedFlag != 0 }
    }

    /// Parses an image; a failure carries the image-group error code (PROTOCOL.md 2.3).
    static func parse(_ bytes: [UInt8], verifyHash: Bool) throws(ImageParseFailure) -> Info {
        func le(_ offset: Int, _ count: Int) -> UInt32 {
            var v: UInt32 = 0
            for i in (0..<count).reversed() { v = v << 8 | UInt32(bytes[offset + i]) }
            return v
        }
        guard bytes.count >= 32 else { throw ImageParseFailure(rc: 22) }  // INVALID_IMAGE_HEADER
        let headerMagic = le(0, 4)
        guard headerMagic == magic || headerMagic == legacyMagic else { throw ImageParseFailure(rc: 23) }
        let headerSize = Int(le(8, 2))
        let protectedSize = Int(le(10, 2))
        let bodySize = Int(le(12, 4))
        let flags = le(16, 4)
        let version = McuMgrImageVersion(major: bytes[20], minor: bytes[21], revision: UInt16(le(22, 2)), build: le(24, 4))
        guard headerSize >= 32 else { throw ImageParseFailure(rc: 22) }
        var position = headerSize + bodySize
        let hashedEnd = position + protectedSize
        if protectedSize > 0 {
            guard position + 4 <= bytes.count, le(position, 2) == UInt32(protectedTLVInfoMagic) else {
                throw ImageParseFailure(rc: 5)  // INVALID_TLV
            }
            position += Int(le(position + 2, 2))
        }
        guard position + 4 <= bytes.count, le(position, 2) == UInt32(tlvInfoMagic) else {
            throw ImageParseFailure(rc: 4)  // NO_TLVS
        }
        let end = position + Int(le(position + 2, 2))
        guard end <= bytes.count, end >= position + 4 else { throw ImageParseFailure(rc: 5) }
        position += 4
        var hash: [UInt8]?
        while position < end {
            guard position + 4 <= end else { throw ImageParseFailure(rc: 5) }
            let type = le(position, 2)
            let length = Int(le(position + 2, 2))
            guard position + 4 + length <= end else { throw ImageParseFailure(rc: 5) }
            if type == UInt32(sha256TLV) {
                guard hash == nil else { throw ImageParseFailure(rc: 6) }  // TLV_MULTIPLE_HASHES_FOUND
                guard length == 32 else { throw ImageParseFailure(rc: 7) }  // TLV_INVALID_SIZE
                hash = Array(bytes[(position + 4)..<(position + 4 + length)])
            }
            position += 4 + length
        }
        guard let hash else { throw ImageParseFailure(rc: 8) }  // HASH_NOT_FOUND
        if verifyHash {
            guard hashedEnd <= bytes.count, Array(SHA256.hash(data: bytes[0..<hashedEnd])) == hash else {
                throw ImageParseFailure(rc: 24)  // INVALID_HASH
            }
        }
        return Info(version: version, hash: hash, flags: flags, loadAddress: le(4, 4))
    }
}

/// Why an image did not parse: the image-group error code to answer with.
struct ImageParseFailure: Error, Sendable {
    var rc: Int
}
