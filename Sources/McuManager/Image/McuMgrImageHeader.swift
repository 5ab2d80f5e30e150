/// The MCUboot image header (`struct image_header`, 32 bytes at offset 0, PROTOCOL.md 6.1).
public struct McuMgrImageHeader: Sendable, Hashable {
    /// `IMAGE_MAGIC`.
    public static let magic: UInt32 = 0x96F3_B83D
    /// `IMAGE_MAGIC_V1`: legacy images (no TLV info headers, SHA-256 hash TLV type 0x01).
    public static let legacyMagic: UInt32 = 0x96F3_B83C
    /// The header struct's size; `headerSize` is at least this.
    public static let structSize = 32

    /// `ih_magic`.
    public var magic: UInt32
    /// `ih_load_addr`: RAM-load address, or the link address for ROM-fixed images.
    public var loadAddress: UInt32
    /// `ih_hdr_size`: the header's length including padding = offset of the body.
    public var headerSize: UInt16
    /// `ih_protect_tlv_size`: the protected TLV area's size including its info header; 0 if none.
    public var protectedTLVSize: UInt16
    /// `ih_img_size`: the body's size.
    public var imageSize: UInt32
    /// `ih_flags`.
    public var flags: McuMgrImageFlags
    /// `ih_ver`.
    public var version: McuMgrImageVersion

    public init(
        magic: UInt32 = McuMgrImageHeader.magic, loadAddress: UInt32 = 0, headerSize: UInt16 = 32,
        protectedTLVSize: UInt16 = 0, imageSize: UInt32, flags: McuMgrImageFlags = [],
        version: McuMgrImageVersion
    ) {
        self.magic = magic
        self.loadAddress = loadAddress
        self.headerSize = headerSize
        self.protectedTLVSize = protectedTLVSize
        self.imageSize = imageSize
        self.flags = flags
        self.version = version
    }

    /// True for the legacy magic 0x96F3B83C.
    public var isLegacy: Bool { magic == Self.legacyMagic }

    /// The 32 header bytes (little-endian, `_pad1` zero).
    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.structSize)
        bytes.appendImageLittleEndian(magic)
        bytes.appendImageLittleEndian(loadAddress)
        bytes.appendImageLittleEndian(headerSize)
        bytes.appendImageLittleEndian(protectedTLVSize)
        bytes.appendImageLittleEndian(imageSize)
        bytes.appendImageLittleEndian(flags.rawValue)
        bytes.append(version.major)
        bytes.append(version.minor)
        bytes.appendImageLittleEndian(version.revision)
        bytes.appendImageLittleEndian(version.build)
        bytes.appendImageLittleEndian(UInt32(0))
        return bytes
    }
}

extension Array where Element == UInt8 {
    mutating func appendImageLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    /// The little-endian integer at `offset`; the caller has checked the bounds.
    func imageLittleEndian<T: FixedWidthInteger>(at offset: Int, as: T.Type = T.self) -> T {
        var value: T = 0
        for index in 0..<MemoryLayout<T>.size {
            value |= T(self[offset + index]) << (8 * index)
        }
        return value
    }
}
