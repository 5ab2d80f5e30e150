/// A Bluetooth device address (`AA:BB:CC:DD:EE:FF`), kept in BlueZ's upper-case colon form.
public struct BluetoothAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `AA:BB:CC:DD:EE:FF`.
    public let rawValue: String

    /// Parses six hex octets separated by `:`, `-` or `_` (any case); nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(omittingEmptySubsequences: false) { $0 == ":" || $0 == "-" || $0 == "_" }
        guard parts.count == 6, parts.allSatisfy({ $0.count == 2 && UInt8($0, radix: 16) != nil }) else { return nil }
        rawValue = parts.map { $0.uppercased() }.joined(separator: ":")
    }

    /// The element BlueZ uses in device object paths: `dev_AA_BB_CC_DD_EE_FF`.
    public var pathElement: String { "dev_" + rawValue.replacing(":", with: "_") }

    public var description: String { rawValue }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
