import McuMgrBLE
import McuMgrCore
import Testing

/// The peripheral takes writes as Zephyr's smp_bt.c does, with and without reassembly.
@Suite("SMP write assembler (Zephyr's smp_bt)")
struct SMPWriteAssemblerTests {
    static func request(sequence: UInt8, payload: Int) -> [UInt8] {
        let text = String(repeating: "x", count: payload)
        return SMPPacket(
            header: SMPHeader(operation: .write, length: 0, group: .os, sequence: sequence, command: McuMgrCommand(0)),
            payload: CBOR.textMap(["d": .text(text)]).encoded
        ).bytes
    }

    @Test func withoutReassemblyAWriteCutShortIsAnsweredWithECORRUPT() throws {
        var assembler = SMPWriteAssembler(reassembly: false, bufferSize: 1024)
        let whole = Self.request(sequence: 7, payload: 300)
        let pieces = BLEFramingCodec(maximumWriteLength: 244).encode(whole)
        let first = assembler.take(pieces[0])
        guard case .answer(let answer) = first.first, first.count == 1 else {
            Issue.record("\(first)")
            return
        }
        let packet = try SMPPacket(decoding: answer)
        #expect(packet.header.sequence == 7 && packet.header.operation == .writeResponse && packet.header.group == .os)
        #expect(try CBOR(decoding: packet.payload) == .textMap(["rc": 9]))
        // The rest (64 bytes) reads as a header of garbage or too short: never a request.
        #expect(!assembler.take(pieces[1]).contains { if case .request = $0 { true } else { false } })
        // A one-byte rest is dropped without an answer.
        guard case .dropped = assembler.take([0x41]).first else {
            Issue.record("a one-byte write must be dropped")
            return
        }
    }

    @Test func withoutReassemblyOneWriteMayHoldSeveralRequests() {
        var assembler = SMPWriteAssembler(reassembly: false, bufferSize: 1024)
        let a = Self.request(sequence: 1, payload: 10), b = Self.request(sequence: 2, payload: 20)
        #expect(assembler.take(a + b) == [.request(a), .request(b)])
        // Larger than the buffer: refused at the ATT layer, nothing answers.
        var small = SMPWriteAssembler(reassembly: false, bufferSize: 64)
        guard case .dropped = small.take(Self.request(sequence: 3, payload: 100)).first else {
            Issue.record("a write larger than the buffer must be dropped")
            return
        }
    }

    @Test func withReassemblyPiecesJoinAndOversizedRequestsVanish() {
        var assembler = SMPWriteAssembler(reassembly: true, bufferSize: 1024)
        let whole = Self.request(sequence: 5, payload: 900)
        let pieces = BLEFramingCodec(maximumWriteLength: 244).encode(whole)
        var outcomes: [SMPWriteAssembler.Outcome] = []
        for piece in pieces { outcomes += assembler.take(piece) }
        #expect(outcomes == [.request(whole)])
        var small = SMPWriteAssembler(reassembly: true, bufferSize: 384)
        let tooBig = Self.request(sequence: 6, payload: 600)
        var dropped: [SMPWriteAssembler.Outcome] = []
        for piece in BLEFramingCodec(maximumWriteLength: 244).encode(tooBig) { dropped += small.take(piece) }
        #expect(!dropped.contains { if case .request = $0 { true } else { false } }, "\(dropped)")
        #expect(!dropped.contains { if case .answer = $0 { true } else { false } }, "\(dropped)")
        // After the drop the next request goes through.
        let next = Self.request(sequence: 7, payload: 10)
        #expect(small.take(next) == [.request(next)])
    }

    /// BlueZ with EATT sends the reassembly probe's one-byte tail ahead of its head: the tail is dropped
    /// (no header), the head waits for one more byte and would swallow the next request; the flush write
    /// that follows an unanswered probe ends it, and does no harm when the pieces came in order.
    @Test(arguments: [false, true])
    func theFlushAfterAnUnansweredProbeKeepsTheNextRequest(_ reordered: Bool) {
        let probe = BLEDeviceProbe.reassemblyRequest(maximumWriteLength: 509)
        let pieces = BLEFramingCodec(maximumWriteLength: 509).encode(probe)
        #expect(pieces.map(\.count) == [509, 1])
        let next = Self.request(sequence: 7, payload: 10)

        var without = SMPWriteAssembler(reassembly: true, bufferSize: 2475)
        _ = without.take(pieces[1])
        _ = without.take(pieces[0])
        #expect(without.take(next).allSatisfy { if case .dropped = $0 { true } else { false } }, "the head swallows the next request")

        var assembler = SMPWriteAssembler(reassembly: true, bufferSize: 2475)
        let arrived = reordered ? [pieces[1], pieces[0]] : pieces
        let outcomes = arrived.flatMap { assembler.take($0) }
        #expect(outcomes.contains(.request(probe)) == !reordered)
        #expect(assembler.take(BLEDeviceProbe.flushWrite).allSatisfy { if case .dropped = $0 { true } else { false } })
        #expect(assembler.take(next) == [.request(next)])
    }
}
