/// Why an SMP header could not be parsed.
public enum SMPHeaderError: Error, Sendable, Hashable, CustomStringConvertible {
    case truncated(count: Int)
    case unsupportedVersion(UInt8)
    case invalidOperation(UInt8)
    case lengthMismatch(declared: Int, actual: Int)

    public var description: String {
        switch self {
        case .truncated(let count):
            return "SMP packet too short: \(count) bytes, a header needs 8"
        case .unsupportedVersion(let bits):
            return "SMP header has reserved version bits \(bits)"
        case .invalidOperation(let op):
            return "SMP header has invalid operation \(op)"
        case .lengthMismatch(let declared, let actual):
            return "SMP header declares \(declared) payload bytes but \(actual) arrived"
        }
    }
}
