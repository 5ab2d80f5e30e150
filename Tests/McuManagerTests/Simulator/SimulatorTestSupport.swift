import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// Builds one SMP request packet.
func smpRequest(
    _ operation: SMPOperation, group: McuMgrGroup, command: UInt8, body: CBOR? = [:], version: SMPVersion = .v2,
    sequence: UInt8 = 7
) -> [UInt8] {
    let payload = body?.encoded ?? []
    return SMPPacket(
        header: SMPHeader(
            version: version, operation: operation, length: 0, group: group, sequence: sequence,
            command: McuMgrCommand(command)),
        payload: payload
    ).bytes
}

/// A decoded response.
struct SimResponse {
    var header: SMPHeader
    var raw: [UInt8]
    var body: CBOR

    subscript(key: String) -> CBOR? { body[key] }

    var rc: Int? { body["rc"]?.int }
    var errGroup: Int? { body["err"]?["group"]?.int }
    var errRC: Int? { body["err"]?["rc"]?.int }
    var isSuccess: Bool { body["rc"] == nil && body["err"] == nil }
}

/// Sends a request and decodes the answer; records an issue if there is none or it does not decode.
func exchange(
    _ device: SimulatedDevice, _ operation: SMPOperation, group: McuMgrGroup, command: UInt8, body: CBOR? = [:],
    version: SMPVersion = .v2, sequence: UInt8 = 7, now: SMPInstant = .zero,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> SimResponse {
    let packet = smpRequest(operation, group: group, command: command, body: body, version: version, sequence: sequence)
    let raw = try #require(device.handle(packet, now: now), sourceLocation: sourceLocation)
    return try decodeResponse(raw, bufferSize: device.configuration.bufferSize, sourceLocation: sourceLocation)
}

func decodeResponse(_ raw: [UInt8], bufferSize: Int, sourceLocation: SourceLocation = #_sourceLocation) throws
    -> SimResponse
{
    #expect(raw.count <= bufferSize, "response of \(raw.count) bytes exceeds buf_size \(bufferSize)", sourceLocation: sourceLocation)
    let packet = try SMPPacket(decoding: raw)
    let body = try CBOR(decoding: packet.payload)
    return SimResponse(header: packet.header, raw: raw, body: body)
}

/// Bitwise CRC-32/IEEE, independent of the simulator's table-driven one.
func referenceCRC32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}

/// Deterministic pseudo-random bytes.
func pseudoRandomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed | 1
    var out = [UInt8]()
    out.reserveCapacity(count)
    for _ in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        out.append(UInt8(truncatingIfNeeded: state))
    }
    return out
}

/// A seeded generator for fuzzing.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed | 1 }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}
