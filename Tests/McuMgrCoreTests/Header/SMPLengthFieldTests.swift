@testable import McuMgrCore
import Testing

/// A device that lies in the SMP header's 16-bit length: no parser takes the claim as a reason to
/// hold or allocate more than the bytes that arrived or its fixed packet limit.
@Suite("SMP length fields from a lying device")
struct SMPLengthFieldTests {
    static let claimsLargest = SMPHeader(
        operation: .readResponse, length: 0xFFFF, group: .os, sequence: 1, command: McuMgrCommand(rawValue: 0))

    @Test func packetClaimingMoreThanArrivedIsRefused() {
        #expect(throws: SMPHeaderError.lengthMismatch(declared: 65535, actual: 3)) {
            try SMPPacket(decoding: Self.claimsLargest.bytes + [0xA0, 0x01, 0x02])
        }
    }

    @Test func rawSerialHoldsOnlyWhatArrived() {
        var codec = RawSerialCodec()
        #expect(codec.decode(Self.claimsLargest.bytes + [0xA0]) == [])
        #expect(codec.bufferedByteCount == SMPHeader.size + 1)
        // Below the codec's limit the claim is not a header at all: nothing is held for it.
        var limited = RawSerialCodec(maximumPacketSize: 1024)
        let events = limited.decode(Self.claimsLargest.bytes)
        #expect(!events.contains { if case .packet = $0 { true } else { false } })
        #expect(limited.bufferedByteCount < SMPHeader.size)
    }

    @Test func datagramShorterThanItsClaimIsDropped() {
        var codec = DatagramCodec()
        #expect(codec.decode(Self.claimsLargest.bytes + [0xA0]) == [.dropped(.truncatedPacket(announced: 65535, received: 1))])
    }

    @Test func bleReassemblyStopsAtItsLimit() {
        var codec = BLEFramingCodec(maximumWriteLength: 244, maximumPacketSize: 2048)
        #expect(codec.decode(Self.claimsLargest.bytes + [0xA0]) == [.dropped(.lengthTooLarge(announced: 65543, limit: 2048))])
    }

    @Test func consoleLengthFieldAboveTheLimitIsDroppedAtOnce() {
        // len_be16 = 0xFFFF: the serial packet would be 65533 bytes; the decoder's limit is 1024.
        var codec = ConsoleSerialCodec(maximumPacketSize: 1024)
        var line: [UInt8] = ConsoleSerialCodec.startMarker
        let body: [UInt8] = [0xFF, 0xFF, 0x09, 0x00, 0x00, 0x05]
        body.withUnsafeBufferPointer { Base64.encode($0, into: &line) }
        line.append(0x0A)
        #expect(codec.decode(line) == [.dropped(.lengthTooLarge(announced: 65533, limit: 1024))])
        #expect(codec.bufferedByteCount == 0)
    }
}
