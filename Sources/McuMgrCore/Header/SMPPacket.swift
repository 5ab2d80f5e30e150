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
