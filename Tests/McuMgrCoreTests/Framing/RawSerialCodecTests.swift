@testable import McuMgrCore
import Testing
import TestSupport

@Suite("Raw serial framing")
struct RawSerialCodecTests {
    /// A valid SMP packet with `payloadSize` random payload bytes.
    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        let header = SMPHeader(
            operation: .readResponse, length: UInt16(payloadSize), group: McuMgrGroup(UInt16(random.next(below: 70))),
            sequence: sequence, command: McuMgrCommand(rawValue: 0))
        return header.bytes + random.bytes(payloadSize)
    }

    @Test func encodeAddsNothing() {
        let codec = RawSerialCodec()
        #expect(codec.encode([1, 2, 3]) == [[1, 2, 3]])
        #expect(codec.encodedSize(ofPacket: 1000) == 1000)
    }

    @Test func packetsBackToBackSurviveAnySplit() {
        var random = SplitMix64(seed: 20)
        let packets = [0, 1, 9, 100, 0, 2000, 3].enumerated().map { Self.packet($1, sequence: UInt8($0), using: &random) }
        FramingCodecVerifier.verifyStream(
            { RawSerialCodec() }, input: packets.flatMap { $0 }, expected: packets.map { .packet($0) })
    }

    @Test func garbageIsSkippedAndReportedOnce() {
        var random = SplitMix64(seed: 21)
        let first = Self.packet(20, sequence: 1, using: &random)
        let second = Self.packet(5, sequence: 2, using: &random)
        // Each garbage byte has reserved bits set, so no header can start inside it.
        let garbage: [UInt8] = [0xFF, 0xE0, 0x20, 0x40, 0x80, 0xF7, 0x1A]
        FramingCodecVerifier.verifyStream(
            { RawSerialCodec() }, input: garbage + first + garbage + garbage + second,
            expected: [
                .dropped(.skippedBytes(count: 7)), .packet(first), .dropped(.skippedBytes(count: 14)), .packet(second),
            ])
    }

    @Test func invalidVersionOperationAndLengthAreNotHeaders() {
        var random = SplitMix64(seed: 22)
        let good = Self.packet(4, sequence: 9, using: &random)
        let reservedVersion: [UInt8] = [0x10]  // version bits 0b10
        let badOperation: [UInt8] = [0x0C]  // v2, OP 4
        // A header announcing 4000 bytes against a 1000-byte limit; its later bytes cannot start one.
        let tooLong: [UInt8] = [0x09, 0xFF, 0x0F, 0xA0, 0xFF]
        FramingCodecVerifier.verifyStream(
            { RawSerialCodec(maximumPacketSize: 1000) }, input: reservedVersion + badOperation + tooLong + good,
            expected: [.dropped(.skippedBytes(count: 7)), .packet(good)])
    }

    @Test func garbageBetweenManyPacketsAnySplit() {
        var random = SplitMix64(seed: 23)
        var input: [UInt8] = []
        var expected: [SMPFramingEvent] = []
        for sequence in 0..<20 {
            // Line noise: bytes with a reserved bit set never start a header.
            let noise = (0..<Int(random.next(below: 4))).map { _ in UInt8(0x20 | random.next(below: 0xE0)) }
            if !noise.isEmpty { expected.append(.dropped(.skippedBytes(count: noise.count))) }
            let packet = Self.packet(Int(random.next(below: 300)), sequence: UInt8(sequence), using: &random)
            expected.append(.packet(packet))
            input += noise + packet
        }
        FramingCodecVerifier.verifyStream({ RawSerialCodec() }, input: input, expected: expected, randomSplits: 20)
    }

    @Test func resetDiscardsAPartialPacket() {
        var random = SplitMix64(seed: 24)
        let packet = Self.packet(50, sequence: 3, using: &random)
        var codec = RawSerialCodec()
        #expect(codec.decode(Array(packet.prefix(30))).isEmpty)
        #expect(codec.bufferedByteCount == 30)
        codec.reset()  // the input timeout
        #expect(codec.bufferedByteCount == 0)
        #expect(codec.decode(packet) == [.packet(packet)])
    }

    @Test func largeStreamStaysCompact() {
        var random = SplitMix64(seed: 25)
        var codec = RawSerialCodec()
        for sequence in 0..<300 {
            let packet = Self.packet(Int(random.next(below: 2000)), sequence: UInt8(truncatingIfNeeded: sequence), using: &random)
            let cut = Int(random.next(below: UInt64(packet.count)))
            #expect(codec.decode(Array(packet[..<cut])).isEmpty)
            #expect(codec.decode(Array(packet[cut...])) == [.packet(packet)])
            #expect(codec.bufferedByteCount == 0)
        }
    }
}
