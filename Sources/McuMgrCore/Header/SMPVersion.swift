/// SMP protocol version carried in bits 4-3 of the first header byte.
public enum SMPVersion: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// SMP v1 ("original"): every error is reported as `rc`.
    case v1 = 0
    /// SMP v2: group errors are reported as `err {group, rc}`.
    case v2 = 1

    public var description: String { self == .v1 ? "v1" : "v2" }
}
