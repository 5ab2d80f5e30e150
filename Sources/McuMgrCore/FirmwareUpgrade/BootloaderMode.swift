/// MCUboot's operating mode, as OS bootloader info reports it (`query: "mode"`, PROTOCOL.md 3.1), and as
/// the firmware-upgrade state machine plans with it. An open numeric space: values this package does
/// not know keep their raw value. The case names follow the iOS library's `BootloaderInfoResponse.Mode`.
public struct BootloaderMode: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
    /// The `mode` value of the bootloader-info answer.
    public var rawValue: Int
    /// A mode by its number.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Creates a mode from its number.
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    /// Unknown (-1): the device did not say.
    public static let unknown = Self(-1)
    /// Single application slot (0); updates go through the bootloader (serial recovery).
    public static let singleApplication = Self(0)
    /// Swap using scratch (1).
    public static let swapUsingScratch = Self(1)
    /// Overwrite / upgrade-only (2); no revert.
    public static let overwrite = Self(2)
    /// Swap without scratch, swap-using-move (3).
    public static let swapWithoutScratch = Self(3)
    /// Direct-XIP without revert (4): the higher version boots; no state write.
    public static let directXIPWithoutRevert = Self(4)
    /// Direct-XIP with revert (5): test/confirm as usual on the inactive slot.
    public static let directXIPWithRevert = Self(5)
    /// RAM load (6).
    public static let ramLoad = Self(6)
    /// Firmware loader (7, NCS): reset into the loader, then upload.
    public static let firmwareLoader = Self(7)
    /// Single-slot RAM load (8).
    public static let singleSlotRAMLoad = Self(8)
    /// Swap using offset (9).
    public static let swapUsingOffset = Self(9)

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(Int.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// Direct-XIP, with or without revert: the device runs from either slot, no swap after reset.
    public var isDirectXIP: Bool { self == .directXIPWithoutRevert || self == .directXIPWithRevert }

    /// Whether MCUboot can revert a test boot (false for overwrite-only, RAM load, single slot, ...).
    public var supportsRevert: Bool {
        switch self {
        case .swapUsingScratch, .swapWithoutScratch, .swapUsingOffset, .directXIPWithRevert, .unknown: true
        default: false
        }
    }

    /// A readable name, as `smp os bootloader` prints it ("swap without scratch").
    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .singleApplication: "single application"
        case .swapUsingScratch: "swap using scratch"
        case .overwrite: "overwrite"
        case .swapWithoutScratch: "swap without scratch"
        case .directXIPWithoutRevert: "Direct-XIP without revert"
        case .directXIPWithRevert: "Direct-XIP with revert"
        case .ramLoad: "RAM load"
        case .firmwareLoader: "firmware loader"
        case .singleSlotRAMLoad: "single-slot RAM load"
        case .swapUsingOffset: "swap using offset"
        default: "mode \(rawValue)"
        }
    }

    /// The name the firmware upgrade's messages and `smp dfu` use, MCUboot's configuration names
    /// ("swap using move", "overwrite only", "single application slot").
    public var detailedName: String {
        switch self {
        case .singleApplication: "single application slot"
        case .overwrite: "overwrite only"
        case .swapWithoutScratch: "swap using move"
        default: name
        }
    }

    /// The name and the number: "swap without scratch (3)".
    public var description: String { "\(name) (\(rawValue))" }
}
