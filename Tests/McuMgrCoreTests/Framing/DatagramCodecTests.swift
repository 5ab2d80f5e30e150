import McuMgrCore
import Testing
import TestSupport

@Suite("Datagram framing")
struct DatagramCodecTests {
    static let echo: [UInt8] = [0x0A, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00,
                                0xA1, 0x61, 0x64, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F]

    @Test func encodeIsOneDatagram() {
        let codec = DatagramCodec()
        #expect(codec.encode(Self.echo) == [Self.echo])
        #expect(codec.encode([UInt8](repeating: 0, count: 5000)).count == 1, "encode refuses nothing")
        #expect(codec.encodedSize(ofPacket: 17) == 17)
        #expect(codec.maximumDatagramSize == DatagramCodec.defaultMaximumDatagramSize)
        #expect(DatagramCodec.defaultMaximumDatagramSize <= DatagramCodec.zephyrReceiveBufferSize)
        #expect(DatagramCodec(maximumDatagramSize: 1232).maximumDatagramSize == 1232)
    }

    @Test func decodesWholeDatagramsAndDropsBadOnes() {
        let empty: [UInt8] = [0x09, 0, 0, 0, 0, 0, 7, 0]
        FramingCodecVerifier.verifyDatagrams(
            { DatagramCodec() },
            datagrams: [
                Self.echo,
                [],
                Array(Self.echo.prefix(7)),
                Array(Self.echo.dropLast(2)),
                Self.echo + [0xFF],
                empty,
                Self.echo,
            ],
            expected: [
                .packet(Self.echo),
                .dropped(.invalidHeader(length: 0)),
                .dropped(.invalidHeader(length: 7)),
                .dropped(.truncatedPacket(announced: 9, received: 7)),
                .dropped(.lengthOverrun(announced: 9, received: 10)),
                .packet(empty),
                .packet(Self.echo),
            ])
    }

    @Test func largeDatagramsAreAccepted() {
        var random = SplitMix64(seed: 30)
        let payload = random.bytes(4000)
        let packet = SMPHeader(operation: .readResponse, length: 4000, group: .image, sequence: 1, command: McuMgrCommand(rawValue: 1)).bytes + payload
        FramingCodecVerifier.verifyDatagrams({ DatagramCodec() }, datagrams: [packet], expected: [.packet(packet)])
    }
}
