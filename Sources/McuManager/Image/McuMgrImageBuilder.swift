#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds unsigned MCUboot images, for tests and the demo: header, body, optional protected TLVs, and an
/// unprotected TLV area holding the image hash.
///
/// The bytes equal `imgtool sign --pad-header -H SIZE -v VERSION` (no key, no `--pad`) for the same body,
/// header size and version; protected TLVs appear in the order given (imgtool writes SEC_CNT, BOOT_RECORD,
/// DEPENDENCY, then custom TLVs).
public struct McuMgrImageBuilder: Sendable {
    /// The image version.
    public var version: McuMgrImageVersion
    /// `ih_hdr_size`: header length including padding, at least 32 (Zephyr builds use 0x200 or 0x800).
    public var headerSize: Int
    /// The byte filling the header after its 32 bytes: 0xFF as `imgtool --pad-header` writes by default
    /// (its erased value), 0x00 as `imgtool -R 0` or a linker-reserved header has.
    public var headerPadding: UInt8
    /// `ih_load_addr`. imgtool sets `.ramLoad` or `.romFixed` with it; set `flags` to match.
    public var loadAddress: UInt32
    /// `ih_flags`.
    public var flags: McuMgrImageFlags
    /// TLVs for the protected area (covered by the hash); none means no protected area.
    public var protectedTLVs: [McuMgrImageTLV]
    /// The hash TLV's algorithm (`imgtool --sha`).
    public var hashAlgorithm: McuMgrImageHashAlgorithm

    public init(
        version: McuMgrImageVersion, headerSize: Int = 0x200, headerPadding: UInt8 = 0xFF,
        loadAddress: UInt32 = 0, flags: McuMgrImageFlags = [], protectedTLVs: [McuMgrImageTLV] = [],
        hashAlgorithm: McuMgrImageHashAlgorithm = .sha256
    ) {
        self.version = version
        self.headerSize = headerSize
        self.headerPadding = headerPadding
        self.loadAddress = loadAddress
        self.flags = flags
        self.protectedTLVs = protectedTLVs
        self.hashAlgorithm = hashAlgorithm
    }

    /// The image bytes for `body`. Throws `McuMgrError(.usage, …)` when a size does not fit its field.
    public func build(body: Data) throws -> Data {
        guard (McuMgrImageHeader.structSize...Int(UInt16.max)).contains(headerSize) else {
            throw McuMgrError(
                .usage, "image builder: header size \(headerSize) is out of range; use 32 to 65535 (e.g. 0x200)")
        }
        guard body.count <= Int(UInt32.max) - headerSize else {
            throw McuMgrError(.usage, "image builder: the body is \(body.count) bytes, too large for an MCUboot image")
        }
        var protectedArea: [UInt8] = []
        if !protectedTLVs.isEmpty {
            protectedArea = try Self.area(magic: McuMgrImage.protectedTLVInfoMagic, tlvs: protectedTLVs)
        }
        let header = McuMgrImageHeader(
            loadAddress: loadAddress, headerSize: UInt16(headerSize), protectedTLVSize: UInt16(protectedArea.count),
            imageSize: UInt32(body.count), flags: flags, version: version)
        var bytes = header.encoded
        bytes.reserveCapacity(headerSize + body.count + protectedArea.count + 4 + 4 + hashAlgorithm.digestLength)
        bytes.append(contentsOf: repeatElement(headerPadding, count: headerSize - bytes.count))
        bytes.append(contentsOf: body)
        bytes.append(contentsOf: protectedArea)
        let hash = hashAlgorithm.digest(bytes)
        bytes += try Self.area(
            magic: McuMgrImage.tlvInfoMagic, tlvs: [McuMgrImageTLV(type: hashAlgorithm.tlvType, value: hash)])
        return Data(bytes)
    }

    /// The built image, parsed.
    public func image(body: Data) throws -> McuMgrImage {
        try McuMgrImage(data: build(body: body))
    }

    private static func area(magic: UInt16, tlvs: [McuMgrImageTLV]) throws -> [UInt8] {
        let total = McuMgrImage.tlvHeaderSize + tlvs.reduce(0) { $0 + McuMgrImage.tlvHeaderSize + $1.length }
        guard total <= Int(UInt16.max), tlvs.allSatisfy({ $0.length <= Int(UInt16.max) }) else {
            throw McuMgrError(.usage, "image builder: the TLVs need \(total) bytes; a TLV area holds at most 65535")
        }
        var bytes: [UInt8] = []
        bytes.appendImageLittleEndian(magic)
        bytes.appendImageLittleEndian(UInt16(total))
        for tlv in tlvs {
            bytes.appendImageLittleEndian(tlv.type.rawValue)
            bytes.appendImageLittleEndian(UInt16(tlv.length))
            bytes.append(contentsOf: tlv.value)
        }
        return bytes
    }
}
