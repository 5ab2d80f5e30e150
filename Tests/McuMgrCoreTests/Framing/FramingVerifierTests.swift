import McuMgrCore
import Testing
import TestSupport

/// The shared verifier's BLE and Telnet checks: they pass what a correct sender writes and name what a
/// wrong one gets wrong (a verifier that passes everything would make the tests that use it say nothing).
@Suite("Framing verifier")
struct FramingVerifierTests {
    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        SMPHeader(
            operation: .write, length: UInt16(payloadSize), group: .os, sequence: sequence,
            command: McuMgrCommand(rawValue: 0)
        ).bytes + random.bytes(payloadSize)
    }

    // MARK: Bluetooth LE

    @Test func bleWritesOfTheCodecPassForEveryWriteLength() {
        var random = SplitMix64(seed: 0xB1E)
        for writeLength in [1, 7, 8, 20, 182, 244, 495, 509] {
            let codec = BLEFramingCodec(maximumWriteLength: writeLength)
            let packets = [0, 1, writeLength - 8, writeLength, 3 * writeLength + 1, 1000].filter { $0 >= 0 }.enumerated().map {
                Self.packet($0.element, sequence: UInt8($0.offset), using: &random)
            }
            let writes = packets.flatMap { codec.encode($0) }
            #expect(FramingCodecVerifier.bleWriteProblems(writes, carrying: packets, maximumWriteLength: writeLength) == [])
        }
    }

    @Test func bleWritesThatBreakTheFramingAreNamed() {
        var random = SplitMix64(seed: 2)
        let a = Self.packet(50, sequence: 1, using: &random), b = Self.packet(10, sequence: 2, using: &random)
        func problems(_ writes: [[UInt8]]) -> [String] {
            FramingCodecVerifier.bleWriteProblems(writes, carrying: [a, b], maximumWriteLength: 20)
        }
        let good = [Array(a[0..<20]), Array(a[20..<40]), Array(a[40...]), b]
        #expect(problems(good) == [])
        // One write longer than the link takes.
        let long = problems([Array(a[0..<40]), Array(a[40...]), b])
        #expect(long.contains("write 0 holds 40 bytes (1 to 20 allowed)"))
        // A short write in the middle of a packet.
        let short = problems([Array(a[0..<10]), Array(a[10..<30]), Array(a[30..<50]), b])
        #expect(short.contains("packet 0: write 0 holds 10 bytes but is not the packet's last"))
        // The tail of one packet and the head of the next in one write.
        let shared = problems([Array(a[0..<20]), Array(a[20..<40]), Array(a[40...]) + b[0..<2], Array(b[2...])])
        #expect(shared.first == "packet 0 (58 bytes) shares write 2 with what follows it (writes 0..<3 hold 60 bytes)", "\(shared)")
        // A lost write, an empty one, a changed byte.
        #expect(problems([Array(a[0..<20]), Array(a[40...]), b]).isEmpty == false)
        #expect(problems(good + [[]]).contains("write 4 holds 0 bytes (1 to 20 allowed)"))
        var flipped = good
        flipped[1][3] ^= 1
        #expect(problems(flipped).contains("packet 0: writes 0..<3 differ from the packet at byte 23"))
        #expect(problems(Array(good.dropLast())).contains("packet 1 (18 bytes): the writes end after 0 of its bytes"))
    }

    // MARK: Telnet

    @Test func telnetReadsDataAndCommands() {
        let wire: [UInt8] = [
            0x41, 255, 255, 0x42, 255, 251, 44, 0x0D, 0x00, 0x0D, 0x0A, 255, 250, 44, 1, 0, 1, 255, 255, 255, 240, 255, 241,
            0x43,
        ]
        let nvt = FramingCodecVerifier.telnet(wire, binary: false)
        #expect(nvt.data == [0x41, 255, 0x42, 0x0D, 0x0D, 0x0A, 0x43])
        #expect(nvt.commands == [[255, 251, 44], [255, 250, 44, 1, 0, 1, 255, 255, 255, 240], [255, 241]])
        #expect(nvt.problems == [])
        // In binary mode a NUL after CR is data.
        #expect(FramingCodecVerifier.telnet(wire, binary: true).data == [0x41, 255, 0x42, 0x0D, 0x00, 0x0D, 0x0A, 0x43])
    }

    @Test func telnetNamesWhatBreaksIt() {
        #expect(
            FramingCodecVerifier.telnet([0x41, 255, 0x42], binary: true).problems == [
                "IAC at 1 is followed by 66, which is no Telnet command (a data 0xFF must be doubled)"
            ])
        #expect(
            FramingCodecVerifier.telnet([0x0D, 0x41], binary: false).problems == [
                "a CR at 0 is followed by 65, not NUL or LF (NVT mode)"
            ])
        #expect(FramingCodecVerifier.telnet([0x0D, 0x41], binary: true).problems == [])
        #expect(FramingCodecVerifier.telnet([0x41, 255], binary: true).problems == ["the stream ends after an IAC at 1"])
        #expect(FramingCodecVerifier.telnet([255, 253], binary: true).problems == ["the stream ends inside IAC 253 at 0"])
        #expect(
            FramingCodecVerifier.telnet([255, 250, 44, 1, 255, 251, 1], binary: true).problems == [
                "the subnegotiation at 0 is not ended by IAC SE"
            ])
    }
}
