import Foundation
import McuManager
import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// MCUboot serial recovery's progressive erase and duplicate answers (boot_serial.c `bs_upload`), and how it
/// takes raw packets from its UART (`RecoveryRawInput`), as smp-sim models them (issue 22).
@Suite("Simulated device: serial recovery erases and copies")
struct SerialRecoveryEraseTests {
    typealias T = SimulatedImageGroupTests

    static func recoveryDevice() throws -> SimulatedDevice {
        let device = SimulatedBootloaderModeTests.device(.singleApplication)
        try SimulatedBootloaderModeTests.reset(device, bootMode: 1)
        #expect(device.runMode == .serialRecovery)
        return device
    }

    static func chunk(_ image: [UInt8], _ offset: Int, _ count: Int, sequence: UInt8 = 7) -> [UInt8] {
        var body: [CBORMapEntry] = .entries([
            "data": .bytes(Array(image[offset..<min(offset + count, image.count)])), "off": .unsigned(UInt64(offset)),
        ])
        if offset == 0 { body.append("len", .unsigned(UInt64(image.count))) }
        return smpRequest(.write, group: .image, command: 1, body: .map(body), sequence: sequence)
    }

    static func answer(_ packet: [UInt8]) throws -> CBOR {
        try CBOR(decoding: Array(try SMPPacket(decoding: packet).payload))
    }

    @Test func aChunkThatReachesANewSectorErasesItBeforeItIsAnswered() throws {
        let device = try Self.recoveryDevice()
        let image = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 9000)
        // 900-byte chunks: 3600..<4500 reaches the second 4 KiB sector.
        var (answers, busy) = device.responsesAndBusyTime(to: Self.chunk(image, 0, 900))
        #expect(try Self.answer(answers[0])["off"]?.int == 900)
        #expect(busy == .milliseconds(376), "sector 0")
        for offset in stride(from: 900, to: 3600, by: 900) {
            (_, busy) = device.responsesAndBusyTime(to: Self.chunk(image, offset, 900))
            #expect(busy == .zero)
        }
        (answers, busy) = device.responsesAndBusyTime(to: Self.chunk(image, 3600, 900))
        #expect(busy == .milliseconds(376), "3600..<4500 reaches sector 1")
        // A copy (a chunk at an offset recovery does not expect): rc 0, the offset it expects, no erase.
        (answers, busy) = device.responsesAndBusyTime(to: Self.chunk(image, 3600, 900))
        let copy = try Self.answer(answers[0])
        #expect(copy["rc"]?.int == 0 && copy["off"]?.int == 4500)
        #expect(busy == .zero)
        // After the last chunk too, curr_off stays: a copy of the last chunk gets the image's length.
        var offset = 4500
        while offset < image.count {
            offset = try #require(try Self.answer(device.responsesAndBusyTime(to: Self.chunk(image, offset, 900)).responses[0])["off"]?.int)
        }
        let late = try Self.answer(device.responsesAndBusyTime(to: Self.chunk(image, 3600, 900)).responses[0])
        #expect(late["rc"]?.int == 0 && late["off"]?.int == image.count)
        #expect(try T.list(device).first?["version"]?.string == "2.0.0")
    }

    @Test func rawInputTakesWholePacketsByTheirHeaderLength() {
        var input = RecoveryRawInput(bufferSize: 1024, busyCapacity: 896)
        let echo = smpRequest(.write, group: .os, command: 0, body: ["d": "hi"])
        #expect(input.receive(echo + echo, now: .zero, busyUntil: nil) == [echo, echo])
        #expect(input.receive(Array(echo.prefix(5)), now: .zero, busyUntil: nil) == [])
        #expect(input.receive(Array(echo.dropFirst(5)), now: .zero, busyUntil: nil) == [echo])
        // Not a read or write, or longer than the receive buffer: everything buffered is discarded.
        var notARequest = echo
        notARequest[0] = (notARequest[0] & ~0b111) | 1
        #expect(input.receive(notARequest + echo, now: .zero, busyUntil: nil) == [])
        let tooLong = smpRequest(.write, group: .image, command: 1, body: ["data": .bytes([UInt8](repeating: 1, count: 1100))])
        #expect(input.receive(tooLong, now: .zero, busyUntil: nil) == [])
        #expect(input.receive(echo, now: .zero, busyUntil: nil) == [echo])
        // A partial packet with nothing new for 3 s is dropped.
        #expect(input.receive(Array(echo.prefix(5)), now: .zero, busyUntil: nil) == [])
        #expect(input.receive(echo, now: SMPInstant.zero + .seconds(3), busyUntil: nil) == [echo])
    }

    /// What issue 22 measured, from the bootloader's side: a copy sent while recovery erases is cut to what
    /// its line buffers hold, the next request's bytes complete it, and the packet that results does not
    /// decode: rc 3, with the copy's sequence number. The rest of the next request is discarded.
    @Test func aCopySentDuringAnEraseIsCutShortAndAnsweredRC3() throws {
        let device = try Self.recoveryDevice()
        let image = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 9000)
        var input = RecoveryRawInput(bufferSize: 1024, busyCapacity: 896)
        let first = Self.chunk(image, 0, 900, sequence: 1)
        let packets = input.receive(first, now: .zero, busyUntil: nil)
        #expect(packets == [first])
        let (_, busy) = device.responsesAndBusyTime(to: first)
        let erasing = SMPInstant.zero + busy
        // The session resends the first chunk 300 ms in, while the sector erase goes on: cut to 896 bytes.
        #expect(first.count > 896)
        #expect(input.receive(first, now: SMPInstant.zero + .milliseconds(300), busyUntil: erasing) == [])
        #expect(input.droppedWhileBusy == first.count - 896)
        // After the erase the client sends the next chunk; its first bytes complete the copy.
        let next = Self.chunk(image, 900, 900, sequence: 2)
        let mangled = input.receive(next, now: erasing + .milliseconds(5), busyUntil: erasing)
        #expect(mangled.count == 1 && mangled.first?.count == first.count)
        let answer = try #require(device.responsesAndBusyTime(to: mangled[0]).responses.first)
        #expect(try SMPPacket(decoding: answer).header.sequence == 1)
        #expect(try Self.answer(answer)["rc"]?.int == 3)
        #expect(try Self.answer(answer)["off"] == nil)
        // The next chunk sent again arrives whole and is written.
        let again = input.receive(next, now: erasing + .milliseconds(400), busyUntil: erasing)
        #expect(again == [next])
        #expect(try Self.answer(device.responsesAndBusyTime(to: next).responses[0])["off"]?.int == 1800)
    }
}
