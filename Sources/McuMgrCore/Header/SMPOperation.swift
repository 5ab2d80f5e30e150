/// SMP operation, bits 2-0 of the first header byte.
public enum SMPOperation: UInt8, Sendable, Hashable, CustomStringConvertible {
    case read = 0
    case readResponse = 1
    case write = 2
    case writeResponse = 3

    /// The operation a server answers this request operation with.
    public var response: SMPOperation {
        switch self {
        case .read, .readResponse: return .readResponse
        case .write, .writeResponse: return .writeResponse
        }
    }

    /// Whether this is a response operation (READ_RSP or WRITE_RSP).
    public var isResponse: Bool { self == .readResponse || self == .writeResponse }

    public var description: String {
        switch self {
        case .read: return "read"
        case .readResponse: return "read-response"
        case .write: return "write"
        case .writeResponse: return "write-response"
        }
    }
}
