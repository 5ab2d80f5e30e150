import McuMgrCore
import Testing
import TestSupport

@Suite("Bluetooth LE framing")
struct BLEFramingCodecTests {
    /// ATT MTUs the issue names: the LE minimum, common iOS/Android values, and a large Zephyr one.
    static let attMTUs = [23, 185, 247, 498]

    /// A valid SMP packet with `payloadSize` random payload bytes.
    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        let header = SMPHeader(
            operation: .writeResponse, length: UInt16(payloadSize), group: McuMgrGroup(UInt16(random.next(below: 70))),
            sequence: sequence, command: McuMgrCommand(rawValue: UInt8(random.next(below: 8))))
        return header.bytes + random.bytes(payloadSize)
    }

    /// Decodes `payloads` one per call, in order.
    static func decode(_ payloads: [[UInt8]], with codec: inout BLEFramingCodec) -> [SMPFramingEvent] {
        payloads.flatMap { codec.decode($0) }
    }

    @Test(arguments: attMTUs)
    func encodeCutsAtTheATTPayloadSize(mtu: Int) {
        var random = SplitMix64(seed: UInt64(mtu))
        let codec = BLEFramingCodec(maximumWriteLength: mtu - 3)
        for payloadSize in [0, 1, mtu - 3 - 8, mtu - 3 - 7, mtu, 3 * (mtu - 3) - 8, 2000] {
            let packet = Self.packet(payloadSize, sequence: 1, using: &random)
            let writes = codec.encode(packet)
            #expect(writes.flatMap { $0 } == packet, "payloads concatenate to the packet")
            #expect(writes.dropLast().allSatisfy { $0.count == mtu - 3 }, "every payload but the last is full")
            #expect(writes.last.map { (1...(mtu - 3)).contains($0.count) } == true)
            #expect(writes.count == codec.fragmentCount(ofPacket: packet.count))
            #expect(codec.encodedSize(ofPacket: packet.count) == packet.count)
            FramingCodecVerifier.verifyBLEWrites(writes, carrying: [packet], maximumWriteLength: mtu - 3)
        }
    }

    @Test(arguments: attMTUs)
    func severalPacketsInFlightRoundTrip(mtu: Int) {
        var random = SplitMix64(seed: 0xB1E + UInt64(mtu))
        let codec = BLEFramingCodec(maximumWriteLength: mtu - 3)
        // Pipelined responses: each packet fragmented on its own, then all sent back to back.
        let packets = (0..<12).map { Self.packet(Int(random.next(below: 1200)), sequence: UInt8($0), using: &random) }
        var receiver = BLEFramingCodec(maximumWriteLength: mtu - 3)
        let writes = packets.flatMap { codec.encode($0) }
        let events = Self.decode(writes, with: &receiver)
        #expect(events == packets.map { .packet($0) })
        FramingCodecVerifier.verifyBLEWrites(writes, carrying: packets, maximumWriteLength: mtu - 3)
    }

    @Test func notificationsSplitAtEveryBoundary() {
        var random = SplitMix64(seed: 7)
        let first = Self.packet(40, sequence: 1, using: &random)
        let second = Self.packet(3, sequence: 2, using: &random)
        var codec = BLEFramingCodec(maximumWriteLength: 244)
        for cut in 1..<first.count {
            for secondCut in [nil] + (1..<second.count).map(Optional.some) {
                var payloads = [Array(first[..<cut]), Array(first[cut...])]
                if let secondCut {
                    payloads += [Array(second[..<secondCut]), Array(second[secondCut...])]
                } else {
                    payloads.append(second)
                }
                let events = Self.decode(payloads, with: &codec)
                #expect(events == [.packet(first), .packet(second)], "cut at \(cut) and \(String(describing: secondCut))")
            }
        }
    }

    @Test func packetsCutIntoRandomFragmentsAtEachMTU() {
        var random = SplitMix64(seed: 99)
        for mtu in Self.attMTUs {
            var codec = BLEFramingCodec(maximumWriteLength: mtu - 3)
            for round in 0..<30 {
                let packets = (0..<4).map { Self.packet(Int(random.next(below: 900)), sequence: UInt8($0), using: &random) }
                // Each packet in one to five pieces, never sharing a payload with another packet.
                let payloads = packets.flatMap { packet -> [[UInt8]] in
                    let cuts = (0..<Int(random.next(below: 5))).map { _ in Int(random.next(below: UInt64(packet.count))) }
                    let bounds = ([0] + cuts.sorted() + [packet.count])
                    return zip(bounds, bounds.dropFirst()).compactMap { $0 < $1 ? Array(packet[$0..<$1]) : nil }
                }
                let events = Self.decode(payloads, with: &codec)
                #expect(events == packets.map { .packet($0) }, "MTU \(mtu), round \(round)")
            }
        }
    }

    @Test func headerSplitOverTwoPayloadsIsAccepted() {
        var random = SplitMix64(seed: 3)
        let packet = Self.packet(30, sequence: 5, using: &random)
        var codec = BLEFramingCodec(maximumWriteLength: 20)
        #expect(codec.decode(Array(packet[..<3])) == [])
        #expect(codec.decode(Array(packet[3..<10])) == [])
        #expect(codec.decode(Array(packet[10...])) == [.packet(packet)])
        #expect(codec.decode([]) == [], "an empty payload changes nothing")
    }

    @Test func payloadWithoutValidHeaderIsDroppedAlone() {
        var random = SplitMix64(seed: 4)
        let good = Self.packet(10, sequence: 1, using: &random)
        var codec = BLEFramingCodec(maximumWriteLength: 244)
        let reservedBits: [UInt8] = [0xE1, 0, 0, 2, 0, 0, 0, 0, 1, 2]
        let badOperation: [UInt8] = [0x0C, 0, 0, 0, 0, 0, 0, 0]
        #expect(codec.decode(reservedBits) == [.dropped(.invalidHeader(length: 10))])
        #expect(codec.decode(badOperation) == [.dropped(.invalidHeader(length: 8))])
        #expect(codec.decode(good) == [.packet(good)], "the next payload starts a packet afresh")
    }

    @Test func overrunDropsThePacketInProgress() {
        var random = SplitMix64(seed: 5)
        let packet = Self.packet(30, sequence: 1, using: &random)
        let next = Self.packet(2, sequence: 2, using: &random)
        var codec = BLEFramingCodec(maximumWriteLength: 244)
        #expect(codec.decode(Array(packet[..<20])) == [])
        // The tail of the packet and another packet's head in one payload: Zephyr refuses that too.
        #expect(codec.decode(Array(packet[20...]) + next) == [.dropped(.lengthOverrun(announced: 30, received: 30 + next.count))])
        #expect(codec.decode(next) == [.packet(next)])
    }

    @Test func oversizedAnnouncementIsRefused() {
        let header = SMPHeader(
            operation: .readResponse, length: 3000, group: .os, sequence: 0, command: McuMgrCommand(rawValue: 0))
        var codec = BLEFramingCodec(maximumWriteLength: 244, maximumPacketSize: 2048)
        #expect(codec.decode(header.bytes + [1, 2]) == [.dropped(.lengthTooLarge(announced: 3008, limit: 2048))])
        let small = SMPHeader(operation: .readResponse, length: 0, group: .os, sequence: 1, command: McuMgrCommand(rawValue: 0))
        #expect(codec.decode(small.bytes) == [.packet(small.bytes)])
    }

    @Test func resetForgetsAPartialPacket() {
        var random = SplitMix64(seed: 6)
        let packet = Self.packet(100, sequence: 1, using: &random)
        var codec = BLEFramingCodec(maximumWriteLength: 20)
        _ = codec.decode(Array(packet[..<20]))
        codec.reset()
        #expect(Self.decode(codec.encode(packet), with: &codec) == [.packet(packet)])
    }

    /// A device without SMP reassembly (`CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY`) takes each write as a whole
    /// packet, so the packet must fit one write; a device with reassembly takes packets up to its
    /// `buf_size` (the rule is `LinkLimits.packetSize`, as McuMgrBleTransport declares its link).
    @Test func maximumPacketSizeFollowsDeviceReassembly() {
        func link(write: Int, reassembles: Bool) -> LinkLimits {
            LinkLimits(
                maximumPacketSize: write, reassembledPacketLimit: reassembles ? BLEFramingCodec.defaultMaximumPacketSize : nil,
                framesInFlight: 255)
        }
        #expect(link(write: 244, reassembles: true).refined(deviceBufferSize: 2475).packetSize == 2475)
        #expect(link(write: 244, reassembles: false).refined(deviceBufferSize: 2475).packetSize == 244)
        #expect(link(write: 495, reassembles: false).refined(deviceBufferSize: 384).packetSize == 384)
        #expect(link(write: 20, reassembles: false).packetSize == 20)
        // Before the device's buffer is known, one write, even towards a device that reassembles.
        #expect(link(write: 20, reassembles: true).packetSize == 20)
        #expect(link(write: 244, reassembles: true).refined(deviceBufferSize: 70_000).packetSize == BLEFramingCodec.defaultMaximumPacketSize)
    }

    @Test func garbageNeverCrashesAndGoodPacketsStillArrive() {
        var random = SplitMix64(seed: 8)
        var codec = BLEFramingCodec(maximumWriteLength: 64, maximumPacketSize: 512)
        for _ in 0..<2000 {
            _ = codec.decode(random.bytes(Int(random.next(below: 80))))
        }
        codec.reset()
        let packet = Self.packet(300, sequence: 3, using: &random)
        #expect(Self.decode(codec.encode(packet), with: &codec) == [.packet(packet)])
    }
}
