/// An SMP management group id. Open numeric space: vendor groups (64 and up) are plain values.
public struct McuMgrGroup: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let os = McuMgrGroup(0)
    public static let image = McuMgrGroup(1)
    public static let stats = McuMgrGroup(2)
    public static let settings = McuMgrGroup(3)
    public static let log = McuMgrGroup(4)
    public static let crash = McuMgrGroup(5)
    public static let split = McuMgrGroup(6)
    public static let run = McuMgrGroup(7)
    public static let fileSystem = McuMgrGroup(8)
    public static let shell = McuMgrGroup(9)
    public static let enumeration = McuMgrGroup(10)
    public static let transport = McuMgrGroup(11)
    public static let zephyrBasic = McuMgrGroup(63)
    /// First application-defined group (`MGMT_GROUP_ID_PERUSER`).
    public static let perUser = McuMgrGroup(64)
    public static let suit = McuMgrGroup(66)
    public static let memfault = McuMgrGroup(128)

    /// The protocol's name for a known group, nil for others.
    public var name: String? {
        switch rawValue {
        case 0: return "os"
        case 1: return "image"
        case 2: return "stat"
        case 3: return "settings"
        case 4: return "log"
        case 5: return "crash"
        case 6: return "split"
        case 7: return "run"
        case 8: return "fs"
        case 9: return "shell"
        case 10: return "enum"
        case 11: return "transport"
        case 63: return "zephyr-basic"
        case 66: return "suit"
        case 128: return "memfault"
        default: return nil
        }
    }

    public var description: String { name.map { "\($0)(\(rawValue))" } ?? "group \(rawValue)" }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
