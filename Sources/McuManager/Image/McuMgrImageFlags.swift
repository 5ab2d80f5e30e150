/// The header's `ih_flags` (`IMAGE_F_*`, PROTOCOL.md 6.1). Unknown bits are kept.
public struct McuMgrImageFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `IMAGE_F_PIC` (0x01): position-independent code; unsupported by MCUboot.
    public static let pic = Self(rawValue: 0x01)
    /// `IMAGE_F_ENCRYPTED_AES128` (0x04): the body is encrypted with AES-128.
    public static let encryptedAES128 = Self(rawValue: 0x04)
    /// `IMAGE_F_ENCRYPTED_AES256` (0x08): the body is encrypted with AES-256.
    public static let encryptedAES256 = Self(rawValue: 0x08)
    /// `IMAGE_F_NON_BOOTABLE` (0x10): a data image the bootloader does not boot.
    public static let nonBootable = Self(rawValue: 0x10)
    /// `IMAGE_F_RAM_LOAD` (0x20): copied to RAM at `ih_load_addr` before it runs.
    public static let ramLoad = Self(rawValue: 0x20)
    /// `IMAGE_F_ROM_FIXED` (0x100): linked for the flash address in `ih_load_addr`.
    public static let romFixed = Self(rawValue: 0x100)
    /// `IMAGE_F_COMPRESSED_LZMA1` (0x200).
    public static let compressedLZMA1 = Self(rawValue: 0x200)
    /// `IMAGE_F_COMPRESSED_LZMA2` (0x400).
    public static let compressedLZMA2 = Self(rawValue: 0x400)
    /// `IMAGE_F_COMPRESSED_ARM_THUMB_FLT` (0x800): LZMA2 with the ARM Thumb filter.
    public static let compressedARMThumbFilter = Self(rawValue: 0x800)

    private static let names: [(Self, String)] = [
        (.pic, "PIC"), (.encryptedAES128, "ENCRYPTED_AES128"), (.encryptedAES256, "ENCRYPTED_AES256"),
        (.nonBootable, "NON_BOOTABLE"), (.ramLoad, "RAM_LOAD"), (.romFixed, "ROM_FIXED"),
        (.compressedLZMA1, "COMPRESSED_LZMA1"), (.compressedLZMA2, "COMPRESSED_LZMA2"),
        (.compressedARMThumbFilter, "COMPRESSED_ARM_THUMB_FLT"),
    ]

    /// The set flags' image.h names joined by "|", unknown bits in hex; "none" when empty.
    public var description: String {
        var rest = rawValue
        var parts: [String] = []
        for (flag, name) in Self.names where contains(flag) {
            parts.append(name)
            rest &= ~flag.rawValue
        }
        if rest != 0 { parts.append("0x" + String(rest, radix: 16)) }
        return parts.isEmpty ? "none" : parts.joined(separator: "|")
    }
}
