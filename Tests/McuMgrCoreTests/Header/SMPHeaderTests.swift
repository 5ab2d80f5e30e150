import McuMgrCore
import Testing

@Suite("SMP header")
struct SMPHeaderTests {
    /// PROTOCOL.md §1.6: echo "hello", v2 write, sequence 0x42.
    static let echoPacket: [UInt8] = [0x0A, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00,
                                      0xA1, 0x61, 0x64, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F]

    static let groups: [UInt16] = [0, 1, 2, 3, 8, 9, 10, 11, 63, 64, 66, 255, 256, 0x1234, 0x7FFF, 0x8000, 65535]
    static let sequences: [UInt8] = [0, 1, 0x42, 0x7F, 0x80, 254, 255]

    /// Commands the PyPI smp package accepts for a group (it validates commands of the groups it knows).
    static func commands(forGroup group: UInt16) -> [UInt8] {
        switch group {
        case 0: return Array(0...8)
        case 1: return Array(0...5)
        case 8: return Array(0...4)
        case 9: return [0]
        case 11: return [0, 1, 2, 6, 7, 8]
        default: return [0, 1, 7, 0x80, 255]
        }
    }

    /// Every combination of operation, version, group, sequence and command in the lists above.
    static var allHeaders: [SMPHeader] {
        var headers: [SMPHeader] = []
        for group in groups {
            for (index, command) in commands(forGroup: group).enumerated() {
                for operation in [SMPOperation.read, .readResponse, .write, .writeResponse] {
                    for version in [SMPVersion.v1, .v2] {
                        let sequence = sequences[(index + Int(operation.rawValue) * 2 + Int(version.rawValue)) % sequences.count]
                        let length = UInt16(truncatingIfNeeded: Int(group) &* 31 &+ Int(command) &* 257 &+ Int(sequence))
                        headers.append(SMPHeader(
                            version: version, operation: operation, length: length, group: McuMgrGroup(group),
                            sequence: sequence, command: McuMgrCommand(command)))
                    }
                }
            }
        }
        return headers
    }

    @Test func echoVector() throws {
        let header = SMPHeader(operation: .write, length: 9, group: .os, sequence: 0x42, command: McuMgrCommand(0))
        #expect(header.bytes == Array(Self.echoPacket.prefix(8)))
        let packet = try SMPPacket(decoding: Self.echoPacket)
        #expect(packet.header == header)
        #expect(packet.payload == Array(Self.echoPacket.dropFirst(8)))
        #expect(packet.bytes == Self.echoPacket)
        let cbor = try CBOR(decoding: packet.payload)
        #expect(cbor["d"]?.string == "hello")
    }

    @Test func firstByteValues() {
        // PROTOCOL.md §1.2.
        let expected: [(SMPVersion, SMPOperation, UInt8)] = [
            (.v1, .read, 0x00), (.v1, .readResponse, 0x01), (.v1, .write, 0x02), (.v1, .writeResponse, 0x03),
            (.v2, .read, 0x08), (.v2, .readResponse, 0x09), (.v2, .write, 0x0A), (.v2, .writeResponse, 0x0B),
        ]
        for (version, operation, byte) in expected {
            let header = SMPHeader(version: version, operation: operation, length: 0, group: .os, sequence: 0, command: McuMgrCommand(0))
            #expect(header.bytes[0] == byte)
        }
    }

    @Test func roundTripsEveryField() throws {
        for header in Self.allHeaders {
            let bytes = header.bytes
            #expect(bytes.count == SMPHeader.size)
            #expect(try SMPHeader(decoding: bytes) == header)
            #expect(try SMPHeader(decoding: bytes[...]) == header, "decodes from a slice")
        }
        var flagged = SMPHeader(operation: .read, length: 0, group: .image, sequence: 1, command: McuMgrCommand(0))
        flagged.flags = 0xA5
        #expect(try SMPHeader(decoding: flagged.bytes).flags == 0xA5)
    }

    @Test func rejectsInvalidHeaders() {
        #expect(throws: SMPHeaderError.truncated(count: 7)) { try SMPHeader(decoding: [UInt8](repeating: 0, count: 7)) }
        #expect(throws: SMPHeaderError.unsupportedVersion(2)) { try SMPHeader(decoding: [0x10, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: SMPHeaderError.unsupportedVersion(3)) { try SMPHeader(decoding: [0x1A, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: SMPHeaderError.invalidOperation(4)) { try SMPHeader(decoding: [0x0C, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: SMPHeaderError.invalidOperation(7)) { try SMPHeader(decoding: [0x07, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: SMPHeaderError.lengthMismatch(declared: 9, actual: 8)) {
            try SMPPacket(decoding: Array(Self.echoPacket.dropLast()))
        }
    }

    @Test func responseOperations() {
        #expect(SMPOperation.read.response == .readResponse)
        #expect(SMPOperation.write.response == .writeResponse)
        #expect(SMPOperation.readResponse.isResponse && SMPOperation.writeResponse.isResponse)
        #expect(!SMPOperation.read.isResponse && !SMPOperation.write.isResponse)
    }

    // MARK: Interoperability with the PyPI smp package

    @Test(.enabled(if: PySMP.isAvailable, PySMP.unavailableComment))
    func ourHeadersParsedBySMP() throws {
        let headers = Self.allHeaders
        let replies = try PySMP.run(headers.map { PySMP.Request(operation: "header_loads", hex: $0.bytes.pySMPHex) })
        for (header, reply) in zip(headers, replies) {
            #expect(reply.error == nil, "\(header): \(reply.error ?? "")")
            #expect(reply.op == Int(header.operation.rawValue), "\(header)")
            #expect(reply.version == Int(header.version.rawValue), "\(header)")
            #expect(reply.flags == 0, "\(header)")
            #expect(reply.length == Int(header.length), "\(header)")
            #expect(reply.group == Int(header.group.rawValue), "\(header)")
            #expect(reply.sequence == Int(header.sequence), "\(header)")
            #expect(reply.command == Int(header.command.rawValue), "\(header)")
        }
    }

    @Test(.enabled(if: PySMP.isAvailable, PySMP.unavailableComment))
    func headersBuiltBySMPParsedByOurs() throws {
        let headers = Self.allHeaders
        let requests = headers.map {
            PySMP.Request(
                operation: "header_build", op: Int($0.operation.rawValue), version: Int($0.version.rawValue), flags: 0,
                length: Int($0.length), group: Int($0.group.rawValue), sequence: Int($0.sequence),
                command: Int($0.command.rawValue))
        }
        let replies = try PySMP.run(requests)
        for (header, reply) in zip(headers, replies) {
            guard let bytes = reply.hex.flatMap([UInt8].init(pySMPHex:)) else {
                Issue.record("\(header): \(reply.error ?? "no bytes")")
                continue
            }
            #expect(bytes == header.bytes, "\(header)")
            #expect(try SMPHeader(decoding: bytes) == header)
        }
    }
}
