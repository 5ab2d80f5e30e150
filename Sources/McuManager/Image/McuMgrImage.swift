import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A parsed MCUboot image (PROTOCOL.md 6): header, body, protected and unprotected TLV areas, and the
/// hashes the image group uses.
///
/// Parsing checks the structure only; call ``verify()`` to check the hash TLV against the contents.
public struct McuMgrImage: Sendable {
    /// `IMAGE_TLV_PROT_INFO_MAGIC`: starts the protected TLV area.
    public static let protectedTLVInfoMagic: UInt16 = 0x6908
    /// `IMAGE_TLV_INFO_MAGIC`: starts the unprotected TLV area.
    public static let tlvInfoMagic: UInt16 = 0x6907
    /// Size of a TLV area's info header (`it_magic`, `it_tlv_tot`) and of a TLV entry's header.
    public static let tlvHeaderSize = 4

    /// The whole file as given (including any slot padding after the TLV areas).
    public let data: Data
    /// The header.
    public let header: McuMgrImageHeader
    /// TLVs of the protected area (covered by the image hash); empty when there is none.
    public let protectedTLVs: [McuMgrImageTLV]
    /// TLVs of the unprotected area (the hash and signatures). For legacy images: every TLV after the body.
    public let unprotectedTLVs: [McuMgrImageTLV]
    /// The image hash TLV's value: what `image list` reports as `hash` and what test/confirm take.
    public let hash: Data
    /// Which digest ``hash`` is.
    public let hashAlgorithm: McuMgrImageHashAlgorithm
    /// SHA-256 of the whole file: the upload `sha` (PROTOCOL.md 6.5). Not the image hash.
    public let fileSHA256: Data
    /// Byte range of the protected TLV area (info header included); empty when there is none.
    public let protectedTLVRange: Range<Int>
    /// Byte range of the unprotected TLV area (info header included).
    public let unprotectedTLVRange: Range<Int>

    /// The image version from the header.
    public var version: McuMgrImageVersion { header.version }
    /// The header flags.
    public var flags: McuMgrImageFlags { header.flags }
    /// Both TLV areas, protected first.
    public var tlvs: [McuMgrImageTLV] { protectedTLVs + unprotectedTLVs }
    /// The body (after the header, `ih_img_size` bytes).
    public var body: Data {
        data.subdata(in: Int(header.headerSize)..<(Int(header.headerSize) + Int(header.imageSize)))
    }
    /// The bytes the image hash covers: header, body and protected TLV area.
    public var hashedRange: Range<Int> { 0..<unprotectedTLVRange.lowerBound }

    /// Reads and parses the image file at `url`.
    public init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path): \(describeFileError(error)); check the path and permissions")
        }
        do {
            try self.init(data: data)
        } catch let error as McuMgrError {
            throw McuMgrError(error.kind, "\(url.path): \(error.message)")
        }
    }

    /// Parses an MCUboot image. Throws `McuMgrError(.file, …)` when the bytes are not a well-formed image.
    public init(data: Data) throws {
        let bytes = [UInt8](data)
        self.data = Data(bytes)
        self.fileSHA256 = Data(SHA256.hash(data: bytes))

        // Header.
        if bytes.count >= 4 {
            let magic: UInt32 = bytes.imageLittleEndian(at: 0)
            guard magic == McuMgrImageHeader.magic || magic == McuMgrImageHeader.legacyMagic else {
                let first = bytes.prefix(8).map { [$0].lowercaseHex }.joined(separator: " ")
                throw McuMgrError(
                    .file,
                    "not an MCUboot image: it starts with \(first), not the header magic 3d b8 f3 96 (0x96f3b83d); use the signed image from the build (e.g. zephyr.signed.bin) or sign it with `imgtool sign`"
                )
            }
        }
        guard bytes.count >= McuMgrImageHeader.structSize else {
            throw McuMgrError(
                .file,
                "truncated MCUboot image: the header needs \(McuMgrImageHeader.structSize) bytes, the file has \(bytes.count); the file is cut short, copy or download it again"
            )
        }
        let header = McuMgrImageHeader(
            magic: bytes.imageLittleEndian(at: 0),
            loadAddress: bytes.imageLittleEndian(at: 4),
            headerSize: bytes.imageLittleEndian(at: 8),
            protectedTLVSize: bytes.imageLittleEndian(at: 10),
            imageSize: bytes.imageLittleEndian(at: 12),
            flags: McuMgrImageFlags(rawValue: bytes.imageLittleEndian(at: 16)),
            version: McuMgrImageVersion(
                major: bytes[20], minor: bytes[21], revision: bytes.imageLittleEndian(at: 22),
                build: bytes.imageLittleEndian(at: 24))
        )
        self.header = header
        let headerSize = Int(header.headerSize)
        guard headerSize >= McuMgrImageHeader.structSize else {
            throw McuMgrError(
                .file,
                "malformed MCUboot image: the header size field says \(headerSize) bytes, less than the \(McuMgrImageHeader.structSize)-byte header; the file is corrupt, rebuild it"
            )
        }
        guard bytes.count >= headerSize else {
            throw McuMgrError(
                .file,
                "truncated MCUboot image: the header needs \(headerSize) bytes, the file has \(bytes.count); the file is cut short, copy or download it again"
            )
        }
        let bodyEnd = headerSize + Int(header.imageSize)
        guard bytes.count >= bodyEnd else {
            throw McuMgrError(
                .file,
                "truncated MCUboot image: header and body need \(bodyEnd) bytes (body \(header.imageSize)), the file has \(bytes.count); the file is cut short, copy or download it again"
            )
        }

        if header.isLegacy {
            // Legacy v1: no info headers; u8 type, pad, u16 length, from the body's end to the file's end.
            let tlvs = try Self.parseEntries(bytes, in: bodyEnd..<bytes.count, legacy: true, area: "TLV area")
            self.protectedTLVs = []
            self.unprotectedTLVs = tlvs
            self.protectedTLVRange = bodyEnd..<bodyEnd
            self.unprotectedTLVRange = bodyEnd..<bytes.count
            guard let hashTLV = tlvs.first(where: { $0.type == .keyHash }) else {
                throw Self.noHash
            }
            guard hashTLV.length == 32 else { throw Self.badHashLength(hashTLV, expected: 32) }
            self.hash = hashTLV.value
            self.hashAlgorithm = .sha256
            return
        }

        // Protected area.
        var offset = bodyEnd
        if header.protectedTLVSize > 0 || Self.magic(bytes, at: offset) == Self.protectedTLVInfoMagic {
            let range = try Self.areaRange(
                bytes, at: offset, magic: Self.protectedTLVInfoMagic, name: "protected TLV area")
            guard range.count == Int(header.protectedTLVSize) else {
                throw McuMgrError(
                    .file,
                    "malformed MCUboot image: the header says the protected TLV area is \(header.protectedTLVSize) bytes, the area at offset \(offset) says \(range.count); the file is corrupt, rebuild it"
                )
            }
            self.protectedTLVs = try Self.parseEntries(
                bytes, in: (range.lowerBound + Self.tlvHeaderSize)..<range.upperBound, legacy: false,
                area: "protected TLV area")
            self.protectedTLVRange = range
            offset = range.upperBound
        } else {
            self.protectedTLVs = []
            self.protectedTLVRange = offset..<offset
        }

        // Unprotected area.
        let range = try Self.areaRange(bytes, at: offset, magic: Self.tlvInfoMagic, name: "TLV area")
        let tlvs = try Self.parseEntries(
            bytes, in: (range.lowerBound + Self.tlvHeaderSize)..<range.upperBound, legacy: false, area: "TLV area")
        self.unprotectedTLVs = tlvs
        self.unprotectedTLVRange = range

        // The first hash TLV, as MCUboot and imgtool take it.
        guard let hashTLV = tlvs.first(where: { McuMgrImageHashAlgorithm(tlvType: $0.type) != nil }),
            let algorithm = McuMgrImageHashAlgorithm(tlvType: hashTLV.type)
        else { throw Self.noHash }
        guard hashTLV.length == algorithm.digestLength else {
            throw Self.badHashLength(hashTLV, expected: algorithm.digestLength)
        }
        self.hash = hashTLV.value
        self.hashAlgorithm = algorithm
    }

    /// The image hash computed from the contents: ``hashAlgorithm`` over header, body and protected TLV area.
    public func computedHash() -> Data {
        hashAlgorithm.digest(data[hashedRange])
    }

    /// Checks that the hash TLV matches the contents; throws `McuMgrError(.file, …)` if it does not.
    public func verify() throws {
        let computed = computedHash()
        guard computed == hash else {
            throw McuMgrError(
                .file,
                "MCUboot image hash mismatch: the \(hashAlgorithm.rawValue) TLV says \(Self.hex(hash)), the contents hash to \(Self.hex(computed)); the image is corrupt or was modified after signing; rebuild it"
            )
        }
    }

    // MARK: - Parsing helpers

    private static func magic(_ bytes: [UInt8], at offset: Int) -> UInt16? {
        guard offset >= 0, offset + 2 <= bytes.count else { return nil }
        return bytes.imageLittleEndian(at: offset)
    }

    /// The range of the TLV area (info header included) that starts at `offset`.
    private static func areaRange(_ bytes: [UInt8], at offset: Int, magic expected: UInt16, name: String) throws
        -> Range<Int>
    {
        guard offset < bytes.count else {
            throw McuMgrError(
                .file,
                "MCUboot image without a \(name): the file ends right after the image body (offset \(offset)); the image is unsigned or cut short, sign it with `imgtool sign` or copy it again"
            )
        }
        guard offset + tlvHeaderSize <= bytes.count else {
            throw McuMgrError(
                .file,
                "truncated MCUboot image: the \(name) info header needs \(tlvHeaderSize) bytes at offset \(offset), the file has \(bytes.count - offset); copy or download it again"
            )
        }
        let found: UInt16 = bytes.imageLittleEndian(at: offset)
        guard found == expected else {
            throw McuMgrError(
                .file,
                "malformed MCUboot image: the \(name) at offset \(offset) starts with magic 0x\(String(found, radix: 16)), expected 0x\(String(expected, radix: 16)); the file is corrupt or not a signed image, rebuild it"
            )
        }
        let total = Int(bytes.imageLittleEndian(at: offset + 2, as: UInt16.self))
        guard total >= tlvHeaderSize else {
            throw McuMgrError(
                .file,
                "malformed MCUboot image: the \(name) at offset \(offset) claims \(total) bytes, less than its own \(tlvHeaderSize)-byte info header; the file is corrupt, rebuild it"
            )
        }
        guard offset + total <= bytes.count else {
            throw McuMgrError(
                .file,
                "truncated MCUboot image: the \(name) at offset \(offset) needs \(total) bytes, the file has \(bytes.count - offset) from there; copy or download it again"
            )
        }
        return offset..<(offset + total)
    }

    /// The TLV entries filling `range` exactly.
    private static func parseEntries(_ bytes: [UInt8], in range: Range<Int>, legacy: Bool, area: String) throws
        -> [McuMgrImageTLV]
    {
        var entries: [McuMgrImageTLV] = []
        var offset = range.lowerBound
        while offset < range.upperBound {
            guard offset + tlvHeaderSize <= range.upperBound else {
                throw McuMgrError(
                    .file,
                    "malformed MCUboot image: a TLV header at offset \(offset) runs past the end of the \(area) (\(range.upperBound - offset) bytes left, 4 needed); the file is corrupt, rebuild it"
                )
            }
            let type = legacy ? UInt16(bytes[offset]) : bytes.imageLittleEndian(at: offset, as: UInt16.self)
            let length = Int(bytes.imageLittleEndian(at: offset + 2, as: UInt16.self))
            let valueStart = offset + tlvHeaderSize
            guard valueStart + length <= range.upperBound else {
                throw McuMgrError(
                    .file,
                    "malformed MCUboot image: TLV \(McuMgrImageTLVType(type)) at offset \(offset) runs past the end of the \(area): it claims \(length) bytes, only \(range.upperBound - valueStart) are left; the file is corrupt or cut short, rebuild it"
                )
            }
            entries.append(
                McuMgrImageTLV(
                    type: McuMgrImageTLVType(type), value: Data(bytes[valueStart..<(valueStart + length)]),
                    offset: offset))
            offset = valueStart + length
        }
        return entries
    }

    private static let noHash = McuMgrError(
        .file,
        "MCUboot image without a hash TLV (SHA-256, SHA-384 or SHA-512) in its TLV area; sign it with `imgtool sign` (pure-signature images carry no hash and cannot be used with the image group)"
    )

    private static func badHashLength(_ tlv: McuMgrImageTLV, expected: Int) -> McuMgrError {
        McuMgrError(
            .file,
            "malformed MCUboot image: the \(tlv.type) hash TLV is \(tlv.length) bytes, expected \(expected); the file is corrupt, rebuild it"
        )
    }

    static func hex(_ data: Data) -> String {
        data.lowercaseHex
    }
}
