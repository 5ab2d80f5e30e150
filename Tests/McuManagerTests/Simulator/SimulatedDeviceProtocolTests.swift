import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: SMP layer")
struct SimulatedDeviceProtocolTests {
    @Test func echoTestVectorFromProtocolDocument() throws {
        let device = SimulatedDevice()
        let request: [UInt8] = [0x0A, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00, 0xA1, 0x61, 0x64, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F]
        let raw = try #require(device.handle(request, now: .zero))
        #expect(Array(raw[0..<8]) == [0x0B, 0x00, 0x00, 0x09, 0x00, 0x00, 0x42, 0x00])
        #expect(Array(raw[8...]) == [0xA1, 0x61, 0x72, 0x65, 0x68, 0x65, 0x6C, 0x6C, 0x6F])
    }

    @Test func responseHeaderMirrorsRequest() throws {
        let device = SimulatedDevice()
        let read = try exchange(device, .read, group: .os, command: 6, sequence: 200)
        #expect(read.header.operation == .readResponse)
        #expect(read.header.sequence == 200)
        #expect(read.header.group == .os)
        #expect(read.header.command.rawValue == 6)
        #expect(read.header.version == .v2)
        #expect(read.header.flags == 0)
        let write = try exchange(device, .write, group: .os, command: 0, body: ["d": "x"], version: .v1)
        #expect(write.header.operation == .writeResponse)
        #expect(write.header.version == .v1)
    }

    @Test func shortPacketsAreDroppedSilently() {
        let device = SimulatedDevice()
        for n in 0..<8 { #expect(device.handle(Array(repeating: 0, count: n), now: .zero) == nil) }
    }

    @Test func oversizedRequestIsDropped() {
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 128
        let device = SimulatedDevice(configuration: configuration)
        let packet = smpRequest(.write, group: .os, command: 0, body: ["d": .text(String(repeating: "a", count: 200))])
        #expect(device.handle(packet, now: .zero) == nil)
    }

    @Test func lengthLargerThanBytesIsCorrupt() throws {
        let device = SimulatedDevice()
        var packet = smpRequest(.read, group: .os, command: 6, body: [:])
        packet[3] = 20
        let response = try decodeResponse(try #require(device.handle(packet, now: .zero)), bufferSize: 2048)
        #expect(response.rc == 9)
        #expect(response.header.group == .os)
    }

    @Test func unknownGroupCommandAndOperationAreNotSupported() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .read, group: McuMgrGroup(77), command: 0).rc == 8)
        #expect(try exchange(device, .read, group: .os, command: 99).rc == 8)
        // Console echo control is not implemented by Zephyr.
        #expect(try exchange(device, .write, group: .os, command: 1, body: ["echo": 1]).rc == 8)
        // Params has no write handler; response operations are not accepted.
        #expect(try exchange(device, .write, group: .os, command: 6).rc == 8)
        #expect(try exchange(device, .readResponse, group: .os, command: 6).rc == 8)
        // Unknown group stays `rc` in v2.
        #expect(try exchange(device, .read, group: McuMgrGroup(77), command: 0, version: .v2).body["err"] == nil)
        // OP 4-7 → rc 8 with a WRITE_RSP header.
        var packet = smpRequest(.read, group: .os, command: 6)
        packet[0] = 0x08 | 0x05
        let response = try decodeResponse(try #require(device.handle(packet, now: .zero)), bufferSize: 2048)
        #expect(response.rc == 8)
        #expect(response.header.operation == .writeResponse)
    }

    @Test func reservedVersionBitsAreTooNew() throws {
        let device = SimulatedDevice()
        for bits: UInt8 in [2, 3] {
            var packet = smpRequest(.read, group: .os, command: 6)
            packet[0] = bits << 3
            let raw = try #require(device.handle(packet, now: .zero))
            #expect(raw[0] == 0x09)  // version 1, READ_RSP
            let body = try CBOR(decoding: raw[8...])
            #expect(body["rc"]?.int == 13)
        }
    }

    @Test func preV2ServerAnswersEverythingInV1() throws {
        var configuration = SimulatorConfiguration()
        configuration.v1Only = true
        let device = SimulatedDevice(configuration: configuration)
        let ok = try exchange(device, .read, group: .os, command: 6, version: .v2)
        #expect(ok.header.version == .v1)
        #expect(ok["buf_size"]?.int == 2048)
        let error = try exchange(device, .read, group: .os, command: 7, body: ["format": "z"], version: .v2)
        #expect(error.header.version == .v1)
        #expect(error.rc == 3)
        #expect(error.body["err"] == nil)
        var packet = smpRequest(.read, group: .os, command: 6)
        packet[0] = 3 << 3
        let raw = try #require(device.handle(packet, now: .zero))
        #expect(raw[0] == 0x01)
        #expect(try CBOR(decoding: raw[8...])["buf_count"]?.int == 4)
    }

    @Test func originalProtocolDisabledAnswersTooOld() throws {
        var configuration = SimulatorConfiguration()
        configuration.protocolSupport = .v2Only
        let device = SimulatedDevice(configuration: configuration)
        #expect(try exchange(device, .read, group: .os, command: 6, version: .v1).rc == 12)
        #expect(try exchange(device, .read, group: .os, command: 6, version: .v2).isSuccess)
    }

    @Test func groupErrorShapesV2AndV1() throws {
        let device = SimulatedDevice()
        let v2 = try exchange(device, .read, group: .os, command: 7, body: ["format": "q"], version: .v2)
        #expect(v2.errGroup == 0)
        #expect(v2.errRC == 2)
        #expect(v2.rc == nil)
        let v1 = try exchange(device, .read, group: .os, command: 7, body: ["format": "q"], version: .v1)
        #expect(v1.rc == 3)
        #expect(v1.body["err"] == nil)
        // Untranslated codes become 1 (EUNKNOWN): IMG err 33 (test on active).
        let hash = try #require(device.imageSlots.first?.hash)
        let v1Image = try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(hash), "confirm": false], version: .v1)
        #expect(v1Image.rc == 1)
        // Translated: IMG err 24 (INVALID_HASH) → 3.
        let v1Hash = try exchange(device, .write, group: .image, command: 0, body: [:], version: .v1)
        #expect(v1Hash.rc == 3)
        // FS: FILE_NOT_FOUND → 5; in v1 only the rc is sent (the offset error's `len` is not), as
        // native_sim_udp 4.4.0 answers.
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1/none"], version: .v1).rc == 5)
        let mismatch = try exchange(device, .write, group: .fileSystem, command: 0, body: ["name": "/lfs1/hello.txt", "off": 5, "data": .bytes([1])], version: .v1)
        #expect(mismatch.rc == 1)
        #expect(mismatch["len"] == nil)
    }

    @Test func malformedPayloadsAndWrongTypesAreInvalid() throws {
        let device = SimulatedDevice()
        // Truncated CBOR.
        var packet = smpRequest(.write, group: .os, command: 0, body: ["d": "hello"])
        packet.removeLast()
        packet[3] -= 1
        #expect(try decodeResponse(try #require(device.handle(packet, now: .zero)), bufferSize: 2048).rc == 3)
        // Not a map.
        #expect(try exchange(device, .write, group: .os, command: 0, body: ["d"]).rc == 3)
        // Wrong key type.
        #expect(try exchange(device, .write, group: .os, command: 0, body: ["d": 5]).rc == 3)
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": "zero", "data": .bytes([])]).rc == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": .bytes([1]), "off": 0]).rc == 3)
        // No payload at all is not a map: rc 3. An echo without `d` answers an empty string (both as
        // native_sim_udp 4.4.0 answers).
        #expect(try exchange(device, .write, group: .os, command: 0, body: nil).rc == 3)
        #expect(try exchange(device, .write, group: .os, command: 0, body: [:])["r"]?.string == "")
    }

    @Test func indefiniteLengthMapsAreEmittedWhenConfigured() throws {
        var configuration = SimulatorConfiguration()
        configuration.indefiniteLengthMaps = true
        let device = SimulatedDevice(configuration: configuration)
        let echo = try exchange(device, .write, group: .os, command: 0, body: ["d": "hello"])
        #expect(echo.raw[8] == 0xBF)
        #expect(echo.raw.last == 0xFF)
        #expect(echo["r"]?.string == "hello")
        let list = try exchange(device, .read, group: .image, command: 0)
        #expect(list["images"]?.arrayValue?.count == 1)
        let error = try exchange(device, .read, group: .os, command: 7, body: ["format": "q"])
        #expect(error.errRC == 2)
        #expect(error.raw[8] == 0xBF)
    }

    @Test func legacyReturnCodeAddsRcZero() throws {
        var configuration = SimulatorConfiguration()
        configuration.legacyReturnCode = true
        let device = SimulatedDevice(configuration: configuration)
        let response = try exchange(device, .write, group: .os, command: 0, body: ["d": "a"])
        #expect(response.rc == 0)
        #expect(response["r"]?.string == "a")
    }

    @Test func concatenatedRequestsAreAnsweredInOrder() throws {
        let device = SimulatedDevice()
        let packet =
            smpRequest(.write, group: .os, command: 0, body: ["d": "one"], sequence: 1)
            + smpRequest(.write, group: .os, command: 0, body: ["d": "two"], sequence: 2)
        let responses = device.responses(to: packet, now: .zero)
        #expect(responses.count == 2)
        #expect(try decodeResponse(responses[0], bufferSize: 2048)["r"]?.string == "one")
        #expect(try decodeResponse(responses[1], bufferSize: 2048).header.sequence == 2)
        let joined = try #require(device.handle(packet, now: .zero))
        #expect(joined == responses[0] + responses[1])
    }

    @Test func emptyPayloadCountsAsEmptyMap() throws {
        let device = SimulatedDevice()
        let response = try exchange(device, .read, group: .os, command: 6, body: nil)
        #expect(response["buf_size"]?.int == 2048)
        #expect(response["buf_count"]?.int == 4)
    }
}
