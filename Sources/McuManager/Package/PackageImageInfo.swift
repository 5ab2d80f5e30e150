import Crypto
import Foundation

/// The little a package needs from an MCUboot image (PROTOCOL.md 6): its version and its image hash
/// (the value of the SHA-256 TLV, 0x10). To be replaced by `McuMgrImage` when both branches meet.
struct PackageImageInfo: Sendable, Hashable {
    /// `ih_magic` of current MCUboot images.
    static let magic: UInt32 = 0x96F3_B83D
    /// `ih_magic` of legacy (v1) images.
    static let legacyMagic: UInt32 = 0x96F3_B83C
    static let protectedTLVMagic: UInt16 = 0x6908
    static let tlvMagic: UInt16 = 0x6907
    static let sha256TLV: UInt16 = 0x10
    static let sha384TLV: UInt16 = 0x11
    static let sha512TLV: UInt16 = 0x12
    static let headerSize = 32

    /// `major.minor.revision+build`, as imgtool and `manifest.json` write it.
    var version: String
    /// The image hash: value of the SHA-256 TLV (or SHA-384/512 TLV for images built that way).
    var hash: Data
    /// `ih_hdr_size`.
    var headerLength: Int
    /// `ih_img_size`.
    var bodyLength: Int

    /// Parses `data`; `name` names the file in error messages.
    init(parsing data: Data, name: String) throws {
        let bytes = [UInt8](data)
        func u16(_ at: Int) -> UInt16 { UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) | UInt32(u16(at + 2)) << 16 }
        let notImage = "sign it with imgtool (or use the build's *.signed.bin / zephyr.signed.bin)"

        guard bytes.count >= Self.headerSize else {
            throw McuMgrError(
                .file,
                "\(name) is not an MCUboot image: only \(bytes.count) bytes, shorter than the 32-byte image header; \(notImage)"
            )
        }
        let magic = u32(0)
        guard magic == Self.magic else {
            let found = String(magic, radix: 16, uppercase: true)
            let why = magic == Self.legacyMagic
                ? "it is a legacy (v1) MCUboot image, which this client does not support"
                : "its header magic is 0x\(found), not 0x96F3B83D"
            throw McuMgrError(.file, "\(name) is not an MCUboot image: \(why); \(notImage)")
        }
        let headerLength = Int(u16(8))
        let protectedLength = Int(u16(10))
        let bodyLength = Int(u32(12))
        guard headerLength >= Self.headerSize else {
            throw McuMgrError(
                .file, "\(name) is not a valid MCUboot image: header size \(headerLength) is below 32 bytes; \(notImage)")
        }
        let tlvStart = headerLength + bodyLength
        guard tlvStart + 4 <= bytes.count else {
            throw McuMgrError(
                .file,
                "\(name) is truncated: its header declares \(headerLength) + \(bodyLength) bytes and TLVs, "
                    + "but the file has \(bytes.count) bytes; download or copy it again"
            )
        }

        var cursor = tlvStart
        var hashedLength = tlvStart
        if u16(cursor) == Self.protectedTLVMagic {
            let total = Int(u16(cursor + 2))
            guard total >= 4, cursor + total + 4 <= bytes.count else {
                throw McuMgrError(.file, "\(name) is truncated inside its protected TLV area; download or copy it again")
            }
            if protectedLength != 0 && protectedLength != total {
                throw McuMgrError(
                    .file,
                    "\(name) is not a valid MCUboot image: the header declares a \(protectedLength)-byte protected TLV "
                        + "area but the area says \(total); rebuild the image"
                )
            }
            cursor += total
            hashedLength += total
        } else if protectedLength != 0 {
            throw McuMgrError(
                .file, "\(name) is not a valid MCUboot image: the protected TLV area it declares is missing; rebuild the image")
        }
        guard u16(cursor) == Self.tlvMagic else {
            throw McuMgrError(
                .file,
                "\(name) is not a valid MCUboot image: no TLV area (magic 0x6907) after the image body; "
                    + "use the signed image (imgtool sign), not the raw zephyr.bin"
            )
        }
        let tlvEnd = cursor + Int(u16(cursor + 2))
        guard tlvEnd <= bytes.count else {
            throw McuMgrError(.file, "\(name) is truncated inside its TLV area; download or copy it again")
        }
        cursor += 4
        var hashes: [UInt16: Data] = [:]
        while cursor + 4 <= tlvEnd {
            let type = u16(cursor)
            let length = Int(u16(cursor + 2))
            guard cursor + 4 + length <= tlvEnd else {
                throw McuMgrError(.file, "\(name) is truncated inside TLV 0x\(String(type, radix: 16)); download or copy it again")
            }
            if type == Self.sha256TLV || type == Self.sha384TLV || type == Self.sha512TLV {
                hashes[type] = Data(bytes[(cursor + 4)..<(cursor + 4 + length)])
            }
            cursor += 4 + length
        }
        if let sha256 = hashes[Self.sha256TLV] {
            guard sha256.count == 32 else {
                throw McuMgrError(
                    .file, "\(name) is not a valid MCUboot image: its SHA-256 TLV holds \(sha256.count) bytes, not 32")
            }
            let computed = Data(SHA256.hash(data: data.prefix(hashedLength)))
            guard computed == sha256 else {
                throw McuMgrError(
                    .file,
                    "\(name) is corrupt: its SHA-256 TLV does not match the image; rebuild or download the image again"
                )
            }
            self.hash = sha256
        } else if let other = hashes[Self.sha384TLV] ?? hashes[Self.sha512TLV] {
            self.hash = other
        } else {
            throw McuMgrError(
                .file, "\(name) is not a valid MCUboot image: it has no SHA-256 hash TLV (0x10); sign it with imgtool")
        }
        self.version = "\(bytes[20]).\(bytes[21]).\(u16(22))+\(u32(24))"
        self.headerLength = headerLength
        self.bodyLength = bodyLength
    }
}
