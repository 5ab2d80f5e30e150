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
