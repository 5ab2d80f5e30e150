/// A command id within a group. Open numeric space.
public struct McuMgrCommand: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }
    public var description: String { "\(rawValue)" }
}
