#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One TLV entry of an MCUboot image's protected or unprotected area.
public struct McuMgrImageTLV: Sendable, Hashable {
    /// `it_type`.
    public var type: McuMgrImageTLVType
    /// `it_len`: the value's length in bytes.
    public var length: Int { value.count }
    /// The value (at most 65,535 bytes).
    public var value: Data
    /// Offset of the entry (its 4-byte type/length header) in the file; 0 for entries not read from a file.
    public var offset: Int

    public init(type: McuMgrImageTLVType, value: Data, offset: Int = 0) {
        self.type = type
        self.value = value
        self.offset = offset
    }
}

extension McuMgrImageTLV {
    /// A security counter TLV (`SEC_CNT`, u32 little-endian), as `imgtool sign -s VALUE` writes it.
    public static func securityCounter(_ value: UInt32) -> McuMgrImageTLV {
        McuMgrImageTLV(type: .securityCounter, value: Data(withUnsafeBytes(of: value.littleEndian) { Array($0) }))
    }

    /// A dependency TLV (image id, 3 pad bytes, minimum version), as `imgtool sign -d "(ID,VERSION)"` writes it.
    public static func dependency(imageID: UInt8, minimumVersion: McuMgrImageVersion) -> McuMgrImageTLV {
        var bytes: [UInt8] = [imageID, 0, 0, 0, minimumVersion.major, minimumVersion.minor]
        bytes.appendImageLittleEndian(minimumVersion.revision)
        bytes.appendImageLittleEndian(minimumVersion.build)
        return McuMgrImageTLV(type: .dependency, value: Data(bytes))
    }
}
