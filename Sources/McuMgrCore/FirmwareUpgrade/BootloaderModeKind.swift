/// An MCUboot mode (the core's twin of McuManager's `BootloaderMode`; convert by `rawValue`) as reported by OS bootloader info (`query: "mode"`, PROTOCOL.md 3.1).
/// An open numeric space: values this package does not know keep their raw value.
public struct BootloaderModeKind: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The `mode` value of the bootloader-info answer.
    public var rawValue: Int
    /// A mode by its number.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// −1: the device did not say.
    public static let unknown = BootloaderModeKind(rawValue: -1)
    /// 0: one application slot; updates go through the bootloader (serial recovery).
    public static let singleApplicationSlot = BootloaderModeKind(rawValue: 0)
    /// 1: swap using a scratch area.
    public static let swapUsingScratch = BootloaderModeKind(rawValue: 1)
    /// 2: overwrite (upgrade) only; no revert.
    public static let overwriteOnly = BootloaderModeKind(rawValue: 2)
    /// 3: swap without scratch (swap using move).
    public static let swapUsingMove = BootloaderModeKind(rawValue: 3)
    /// 4: Direct-XIP without revert: the higher version boots; no state write.
    public static let directXIPWithoutRevert = BootloaderModeKind(rawValue: 4)
    /// 5: Direct-XIP with revert: test/confirm as usual on the inactive slot.
    public static let directXIPWithRevert = BootloaderModeKind(rawValue: 5)
    /// 6: RAM load.
    public static let ramLoad = BootloaderModeKind(rawValue: 6)
    /// 7: firmware loader (NCS): reset into the loader, then upload.
    public static let firmwareLoader = BootloaderModeKind(rawValue: 7)
    /// 8: single-slot RAM load.
    public static let singleSlotRAMLoad = BootloaderModeKind(rawValue: 8)
    /// 9: swap using offset.
    public static let swapUsingOffset = BootloaderModeKind(rawValue: 9)

    /// Direct-XIP, with or without revert: the device runs from either slot, no swap after reset.
    public var isDirectXIP: Bool { self == .directXIPWithoutRevert || self == .directXIPWithRevert }

    /// Whether MCUboot can revert a test boot (false for overwrite-only, RAM load, single slot, ...).
    public var supportsRevert: Bool {
        switch self {
        case .swapUsingScratch, .swapUsingMove, .swapUsingOffset, .directXIPWithRevert, .unknown: true
        default: false
        }
    }

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .singleApplicationSlot: "single application slot"
        case .swapUsingScratch: "swap using scratch"
        case .overwriteOnly: "overwrite only"
        case .swapUsingMove: "swap using move"
        case .directXIPWithoutRevert: "Direct-XIP without revert"
        case .directXIPWithRevert: "Direct-XIP with revert"
        case .ramLoad: "RAM load"
        case .firmwareLoader: "firmware loader"
        case .singleSlotRAMLoad: "single-slot RAM load"
        case .swapUsingOffset: "swap using offset"
        default: "mode \(rawValue)"
        }
    }
}
