import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// The file-system group answers as Zephyr's fs_mgmt on the shared native_sim builds' LittleFS (four
/// 4 KiB blocks at /lfs1). Every expectation here was measured on native_sim_udp 4.4.0.
@Suite("Simulated device: LittleFS as on native_sim")
struct SimulatedLittleFSTests {
    /// A device with an empty file system, like a freshly started native_sim.
    static func device() -> SimulatedDevice {
        var configuration = SimulatorConfiguration()
        configuration.initialFiles = [:]
        return SimulatedDevice(configuration: configuration)
    }

    static func write(
        _ device: SimulatedDevice, _ name: String, _ offset: Int, _ data: [UInt8], length: Int? = nil,
        now: SMPInstant = .zero
    ) throws -> SimResponse {
        var body: [CBORMapEntry] = .entries([
            "name": .text(name), "off": .unsigned(UInt64(offset)), "data": .bytes(data),
        ])
        if let length { body.append("len", .unsigned(UInt64(length))) }
        return try exchange(device, .write, group: .fileSystem, command: 0, body: .map(body), now: now)
    }

    /// Where an upload failed: the chunk's offset and the fs error.
    struct Failure: Equatable {
        var offset: Int
        var rc: Int?
    }

    /// Uploads `size` bytes in 512-byte chunks; returns where it failed, or nil.
    static func upload(_ device: SimulatedDevice, _ name: String, size: Int) throws -> Failure? {
        var offset = 0
        while offset < size {
            let chunk = [UInt8](repeating: 0x5A, count: min(512, size - offset))
            let response = try write(device, name, offset, chunk, length: offset == 0 ? size : nil)
            guard response.isSuccess, let next = response["off"]?.int else { return Failure(offset: offset, rc: response.errRC) }
            offset = next
        }
        return nil
    }

    static func stat(_ device: SimulatedDevice, _ name: String, now: SMPInstant = .zero) throws -> SimResponse {
        try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": .text(name)], now: now)
    }

    @Test func oneFileOfTwoBlocksFitsAndOneByteMoreDoesNot() throws {
        let device = Self.device()
        #expect(try Self.upload(device, "/lfs1/a", size: 8188) == nil)
        #expect(try Self.stat(device, "/lfs1/a")["len"]?.int == 8188)

        let other = Self.device()
        let failure = try #require(try Self.upload(other, "/lfs1/a", size: 8189))
        #expect(failure.offset == 7680 && failure.rc == 10)  // FILE_WRITE_FAILED at the chunk past the space
        // Nothing of the failed upload was committed: the new file stays empty.
        #expect(try Self.stat(other, "/lfs1/a")["len"]?.int == 0)
    }

    @Test func everyFileBeyondSixtyFourBytesTakesABlock() throws {
        let device = Self.device()
        // Inline files take no block.
        for name in ["/lfs1/i1", "/lfs1/i2", "/lfs1/i3"] { #expect(try Self.upload(device, name, size: 64) == nil) }
        #expect(try Self.upload(device, "/lfs1/a", size: 4096) == nil)
        #expect(try Self.upload(device, "/lfs1/b", size: 65) == nil)
        let third = try #require(try Self.upload(device, "/lfs1/c", size: 65))
        #expect(third.offset == 0 && third.rc == 10)
        #expect(try Self.stat(device, "/lfs1/c")["len"]?.int == 0)
    }

    @Test func rewritingNeedsFreeBlocksAndKeepsTheOldFileOnFailure() throws {
        let device = Self.device()
        #expect(try Self.upload(device, "/lfs1/a", size: 4096) == nil)
        // One free block: the new copy goes there before the old block is released.
        #expect(try Self.upload(device, "/lfs1/a", size: 4096) == nil)
        #expect(try Self.upload(device, "/lfs1/b", size: 4096) == nil)
        let failure = try #require(try Self.upload(device, "/lfs1/a", size: 4096))
        #expect(failure.offset == 0 && failure.rc == 10)
        #expect(try Self.stat(device, "/lfs1/a")["len"]?.int == 4096)
    }

    @Test func duplicateAndMisplacedWrites() throws {
        let device = Self.device()
        #expect(try Self.write(device, "/lfs1/c", 0, Array("ab".utf8), length: 6)["off"]?.int == 2)
        #expect(try Self.write(device, "/lfs1/c", 2, Array("cd".utf8))["off"]?.int == 4)
        // The same chunk again: offset error with the expected offset; the file is closed.
        let duplicate = try Self.write(device, "/lfs1/c", 2, Array("cd".utf8))
        #expect(duplicate.errGroup == 8 && duplicate.errRC == 11 && duplicate["len"]?.int == 4)
        // The next chunk at that offset reopens the file and continues.
        #expect(try Self.write(device, "/lfs1/c", 4, Array("ef".utf8))["off"]?.int == 6)
        #expect(device.file("/lfs1/c") == Array("abcdef".utf8))
        // A write at offset > 0 to a missing file creates it empty and reports len 0.
        let missing = try Self.write(device, "/lfs1/k", 5, [1])
        #expect(missing.errRC == 11 && missing["len"]?.int == 0)
        #expect(try Self.stat(device, "/lfs1/k")["len"]?.int == 0)
    }

    @Test func offsetZeroAgainWhileOpenAppendsToANewFile() throws {
        let device = Self.device()
        #expect(try Self.write(device, "/lfs1/s", 0, Array("abc".utf8), length: 10)["off"]?.int == 3)
        #expect(try Self.write(device, "/lfs1/s", 3, Array("def".utf8))["off"]?.int == 6)
        // LittleFS still reports size 0 for the new file: nothing is truncated, the data goes to the end.
        #expect(try Self.write(device, "/lfs1/s", 0, Array("XY".utf8), length: 10)["off"]?.int == 8)
        #expect(try exchange(device, .write, group: .fileSystem, command: 4).isSuccess)
        #expect(device.file("/lfs1/s") == Array("abcdefXY".utf8))
        // The file now has committed data: offset 0 truncates, and the expected offset keeps counting.
        #expect(try Self.write(device, "/lfs1/s", 0, Array("abc".utf8), length: 10)["off"]?.int == 3)
        #expect(try Self.write(device, "/lfs1/s", 0, Array("XY".utf8), length: 10)["off"]?.int == 5)
        #expect(try Self.write(device, "/lfs1/s", 5, Array("Q".utf8))["off"]?.int == 6)
        #expect(try exchange(device, .write, group: .fileSystem, command: 4).isSuccess)
        #expect(device.file("/lfs1/s") == Array("XYQ".utf8))
    }

    @Test func emptyUploadsAndLengths() throws {
        let device = Self.device()
        #expect(try Self.upload(device, "/lfs1/f", size: 2) == nil)
        // Empty data at offset 0 leaves an existing file as it is.
        #expect(try Self.write(device, "/lfs1/f", 0, [], length: 0)["off"]?.int == 0)
        #expect(device.file("/lfs1/f")?.count == 2)
        #expect(try Self.write(device, "/lfs1/e", 0, [], length: 0)["off"]?.int == 0)
        let hash = try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/e"])
        #expect(hash.errGroup == 8 && hash.errRC == 16)  // FILE_EMPTY
        let download = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/e", "off": 0])
        #expect(download["data"]?.byteString == [] && download["len"]?.int == 0)
        // More data than `len` is accepted.
        #expect(try Self.write(device, "/lfs1/l", 0, Array("abc".utf8), length: 1)["off"]?.int == 3)
        #expect(try Self.stat(device, "/lfs1/l")["len"]?.int == 3)
    }

    @Test func anOpenUploadShowsItsCommittedSizeUntilClosed() throws {
        let device = Self.device()
        #expect(try Self.write(device, "/lfs1/t", 0, Array("abc".utf8), length: 10)["off"]?.int == 3)
        #expect(try Self.stat(device, "/lfs1/t")["len"]?.int == 0)
        // Idle for less than the close time: still open.
        #expect(try Self.stat(device, "/lfs1/t", now: .zero + .seconds(3))["len"]?.int == 0)
        // After 4 s without requests the file is closed and committed.
        #expect(try Self.stat(device, "/lfs1/t", now: .zero + .seconds(7))["len"]?.int == 3)

        #expect(try Self.write(device, "/lfs1/u", 0, Array("abc".utf8), length: 10, now: .zero + .seconds(8))["off"]?.int == 3)
        // A download (of any file) closes the upload.
        _ = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/t", "off": 0], now: .zero + .seconds(8))
        #expect(try Self.stat(device, "/lfs1/u", now: .zero + .seconds(8))["len"]?.int == 3)
    }

    @Test func pathsAndArguments() throws {
        let device = Self.device()
        func status(_ name: String) throws -> SimResponse { try Self.stat(device, name) }
        #expect(try status("/lfs1").errRC == 4)
        #expect(try status("/lfs1/").errRC == 4)
        #expect(try status("/").errRC == 4)
        #expect(try status("abc").errRC == 2)
        #expect(try status("/foo/x").errRC == 3)
        #expect(try Self.write(device, "/", 0, [1], length: 1).errRC == 2)
        let dl = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/foo/x", "off": 0])
        #expect(dl.errRC == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/x"]).rc == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: [:]).rc == 3)
        _ = try Self.upload(device, "/lfs1/A", size: 4)
        func hash(_ body: CBOR) throws -> SimResponse {
            try exchange(device, .read, group: .fileSystem, command: 2, body: body)
        }
        #expect(try hash(["name": "/lfs1/A", "off": 4]).errRC == 12)
        #expect(try hash(["name": "/lfs1/A", "len": 0]).rc == 3)
        #expect(try hash(["name": "/lfs1/A", "type": "verylongtype"]).rc == 3)
        #expect(try hash(["name": "/lfs1/A", "type": "md5"]).errRC == 13)
        let part = try hash(["name": "/lfs1/A", "off": 1, "len": 100])
        #expect(part["off"]?.int == 1 && part["len"]?.int == 3)
        // Without a payload the request is not a map: rc 3.
        let empty = smpRequest(.read, group: .fileSystem, command: 1, body: nil)
        let raw = try #require(device.handle(empty, now: .zero))
        #expect(try decodeResponse(raw, bufferSize: 2048).rc == 3)
    }
}
