/// SMP protocol version carried in bits 4-3 of the first header byte.
public enum SMPVersion: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// SMP v1 ("original"): every error is reported as `rc`.
    case v1 = 0
    /// SMP v2: group errors are reported as `err {group, rc}`.
    case v2 = 1

    public var description: String { self == .v1 ? "v1" : "v2" }
}

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

/// The 8-byte SMP header (big-endian on the wire).
public struct SMPHeader: Sendable, Hashable, CustomStringConvertible {
    /// Size of the header in bytes.
    public static let size = 8

    public var version: SMPVersion
    public var operation: SMPOperation
    /// Flags byte: no flags are defined; sent as 0, ignored on receive.
    public var flags: UInt8
    /// Number of CBOR payload bytes after the header.
    public var length: UInt16
    public var group: McuMgrGroup
    public var sequence: UInt8
    public var command: McuMgrCommand

    public init(
        version: SMPVersion = .v2, operation: SMPOperation, flags: UInt8 = 0, length: UInt16,
        group: McuMgrGroup, sequence: UInt8, command: McuMgrCommand
    ) {
        self.version = version
        self.operation = operation
        self.flags = flags
        self.length = length
        self.group = group
        self.sequence = sequence
        self.command = command
    }

    /// Parses a header from the first 8 bytes of `bytes`.
    /// - Throws: `SMPHeaderError` when fewer than 8 bytes are given or the version bits are reserved.
    public init<C: Collection>(decoding bytes: C) throws where C.Element == UInt8 {
        guard bytes.count >= SMPHeader.size else {
            throw SMPHeaderError.truncated(count: bytes.count)
        }
        var iterator = bytes.makeIterator()
        func next() -> UInt8 { iterator.next()! }
        let b0 = next()
        let versionBits = (b0 >> 3) & 0b11
        guard let version = SMPVersion(rawValue: versionBits) else {
            throw SMPHeaderError.unsupportedVersion(versionBits)
        }
        // OP is three bits; values 4-7 are invalid.
        guard let operation = SMPOperation(rawValue: b0 & 0b111) else {
            throw SMPHeaderError.invalidOperation(b0 & 0b111)
        }
        self.version = version
        self.operation = operation
        self.flags = next()
        self.length = UInt16(next()) << 8 | UInt16(next())
        self.group = McuMgrGroup(rawValue: UInt16(next()) << 8 | UInt16(next()))
        self.sequence = next()
        self.command = McuMgrCommand(rawValue: next())
    }

    /// The 8 header bytes.
    public var bytes: [UInt8] {
        [
            (version.rawValue & 0b11) << 3 | operation.rawValue,
            flags,
            UInt8(length >> 8), UInt8(length & 0xFF),
            UInt8(group.rawValue >> 8), UInt8(group.rawValue & 0xFF),
            sequence,
            command.rawValue,
        ]
    }

    public var description: String {
        "SMP \(version) \(operation) group=\(group) command=\(command.rawValue) seq=\(sequence) len=\(length)"
    }
}

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

/// A whole SMP message: header and CBOR payload.
public struct SMPPacket: Sendable, Hashable, CustomStringConvertible {
    public var header: SMPHeader
    public var payload: [UInt8]

    /// Builds a packet; the header's length is set from the payload.
    public init(header: SMPHeader, payload: [UInt8]) {
        var header = header
        header.length = UInt16(clamping: payload.count)
        self.header = header
        self.payload = payload
    }

    /// Parses one whole packet; the byte count must match the header's length exactly.
    public init(decoding bytes: [UInt8]) throws {
        let header = try SMPHeader(decoding: bytes)
        let actual = bytes.count - SMPHeader.size
        guard actual == Int(header.length) else {
            throw SMPHeaderError.lengthMismatch(declared: Int(header.length), actual: actual)
        }
        self.header = header
        self.payload = Array(bytes[SMPHeader.size...])
    }

    /// Header followed by payload.
    public var bytes: [UInt8] { header.bytes + payload }

    public var description: String { "\(header) payload=\(payload.count)B" }
}
