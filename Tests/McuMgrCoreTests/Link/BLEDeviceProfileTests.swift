import McuMgrCore
import Testing

@Suite("Bluetooth LE write limits and the device profile")
struct BLEDeviceProfileTests {
    @Test func writesAreTheATTPayloadAtMost512And509TowardBlueZ() {
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 23) == 20)
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 247) == 244)
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 498) == 495)
        // BlueZ's AcquireWrite socket reads 512 bytes; a BlueZ peripheral drops values over 510, and
        // over EATT bearers between two bluetoothd over 509.
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 517) == 512)
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 517, peripheralRunsBlueZ: true) == 509)
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 513, peripheralRunsBlueZ: true) == 509)
        #expect(BLEFramingCodec.maximumWriteLength(attMTU: 247, peripheralRunsBlueZ: true) == 244)
    }

    @Test func refusalsNameBothSizes() {
        let reassembling = BLEDeviceProfile(bufferSize: 384, bufferCount: 4, reassembles: true)
        #expect(reassembling.refusal(packetSize: 384, maximumWriteLength: 244, assumeReassembly: true) == nil)
        let big = reassembling.refusal(packetSize: 614, maximumWriteLength: 244, assumeReassembly: true)
        #expect(big?.contains("614-byte request") == true && big?.contains("384-byte SMP buffer") == true, "\(big ?? "")")
        let single = BLEDeviceProfile(bufferSize: 1024, bufferCount: 4, reassembles: false)
        #expect(single.refusal(packetSize: 244, maximumWriteLength: 244, assumeReassembly: true) == nil)
        let split = single.refusal(packetSize: 245, maximumWriteLength: 244, assumeReassembly: true)
        #expect(split?.contains("245-byte request") == true && split?.contains("244-byte Bluetooth write") == true, "\(split ?? "")")
        // Nothing known: the configured assumption decides, and there is no buffer limit.
        let unknown = BLEDeviceProfile()
        #expect(unknown.refusal(packetSize: 5000, maximumWriteLength: 244, assumeReassembly: true) == nil)
        #expect(unknown.refusal(packetSize: 245, maximumWriteLength: 244, assumeReassembly: false)?.contains("reassembly=off") == true)
        // Pieces that went unanswered: the link is to blame, and the message says how to fix it.
        let reordered = BLEDeviceProfile(bufferSize: 2475, bufferCount: 4, reassembles: false, piecesArriveOutOfOrder: true)
        #expect(reordered.refusal(packetSize: 509, maximumWriteLength: 509, assumeReassembly: true) == nil)
        let eatt = reordered.refusal(packetSize: 510, maximumWriteLength: 509, assumeReassembly: true) ?? ""
        #expect(eatt.contains("510-byte request") && eatt.contains("509-byte Bluetooth write") && eatt.contains("do not reach this device whole"), "\(eatt)")
        #expect(eatt.contains("EATT") && eatt.contains("Channels = 1") && !eatt.contains("REASSEMBLY"), "\(eatt)")
    }

    @Test func theProbeRunsOnlyWhenTheBufferHoldsMoreThanOneWrite() {
        #expect(BLEDeviceProfile(bufferSize: 384).needsReassemblyProbe(maximumWriteLength: 495) == false)
        #expect(BLEDeviceProfile(bufferSize: 2475).needsReassemblyProbe(maximumWriteLength: 495) == true)
        #expect(BLEDeviceProfile(bufferSize: 2475, reassembles: true).needsReassemblyProbe(maximumWriteLength: 495) == false)
        #expect(BLEDeviceProfile().needsReassemblyProbe(maximumWriteLength: 20) == false)
    }

    @Test(arguments: [20, 23, 24, 244, 255, 256, 257, 495, 510, 512])
    func theReassemblyProbeIsOneByteLongerThanAWrite(_ writeLength: Int) throws {
        let request = BLEDeviceProbe.reassemblyRequest(maximumWriteLength: writeLength)
        #expect(request.count == writeLength + 1)
        let packet = try SMPPacket(decoding: request)
        #expect(packet.header.group == .os && packet.header.command.rawValue == 0 && packet.header.operation == .write)
        #expect(try CBOR(decoding: packet.payload).mapEntries?.first?.key.string == "d")
        // The second write carries one byte: a device without reassembly drops it (shorter than a header).
        #expect(BLEFramingCodec(maximumWriteLength: writeLength).encode(request).map(\.count) == [writeLength, 1])
    }

    @Test func answersAreRead() {
        func answer(_ sequence: UInt8, command: UInt8, _ payload: CBOR, operation: SMPOperation = .writeResponse) -> [UInt8] {
            SMPPacket(
                header: SMPHeader(version: .v1, operation: operation, length: 0, group: .os, sequence: sequence, command: McuMgrCommand(command)),
                payload: payload.encoded
            ).bytes
        }
        let echoed = answer(BLEDeviceProbe.reassemblySequence, command: 0, .textMap(["r": "rrr"]))
        #expect(BLEDeviceProbe.reassembly(in: echoed) == true)
        let corrupt = answer(BLEDeviceProbe.reassemblySequence, command: 0, .textMap(["rc": 9]))
        #expect(BLEDeviceProbe.reassembly(in: corrupt) == false)
        // A build without echo (the fw_loader sample) answers rc 8: it dispatched the whole request.
        let noEcho = answer(BLEDeviceProbe.reassemblySequence, command: 0, .textMap(["rc": 8]))
        #expect(BLEDeviceProbe.reassembly(in: noEcho) == true)
        #expect(BLEDeviceProbe.reassembly(in: answer(3, command: 0, .textMap(["r": "x"]))) == nil)
        let parameters = answer(BLEDeviceProbe.parametersSequence, command: 6, .textMap(["buf_size": 2475, "buf_count": 4]), operation: .readResponse)
        let read = BLEDeviceProbe.parameters(in: parameters)
        #expect(read??.bufferSize == 2475 && read??.bufferCount == 4)
        let unsupported = answer(BLEDeviceProbe.parametersSequence, command: 6, .textMap(["rc": 8]), operation: .readResponse)
        #expect(BLEDeviceProbe.parameters(in: unsupported) != nil)
        #expect(BLEDeviceProbe.parameters(in: unsupported)! == nil)
        #expect(BLEDeviceProbe.parameters(in: answer(9, command: 6, .textMap([:]), operation: .readResponse)) == nil)
    }
}
