import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: file-system group")
struct SimulatedFileSystemTests {
    /// Uploads in chunks as large as fit the buffer; returns the responses' offsets.
    static func upload(_ data: [UInt8], name: String, to device: SimulatedDevice, chunk: Int) throws {
        var offset = 0
        repeat {
            let end = min(offset + chunk, data.count)
            var body: [CBORMapEntry] = .entries([
                "name": .text(name), "off": .unsigned(UInt64(offset)), "data": .bytes(Array(data[offset..<end])),
            ])
            if offset == 0 { body.append("len", .unsigned(UInt64(data.count))) }
            let response = try exchange(device, .write, group: .fileSystem, command: 0, body: .map(body))
            try #require(response.isSuccess, "\(response.body)")
            #expect(response["off"]?.int == end)
            offset = end
        } while offset < data.count
    }

    static func download(_ name: String, from device: SimulatedDevice) throws -> [UInt8] {
        var result: [UInt8] = []
        var total: Int?
        repeat {
            let response = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": .text(name), "off": .unsigned(UInt64(result.count))])
            try #require(response.isSuccess, "\(response.body)")
            #expect(response["off"]?.int == result.count)
            if result.isEmpty {
                total = response["len"]?.int
            } else {
                #expect(response["len"] == nil)
            }
            let data = try #require(response["data"]?.byteString)
            try #require(!data.isEmpty || total == 0)
            result.append(contentsOf: data)
        } while result.count < (total ?? 0)
        return result
    }

    @Test(arguments: [false, true])
    func twoMebibyteFileRoundTripsAndHashes(indefinite: Bool) throws {
        var configuration = SimulatorConfiguration()
        configuration.indefiniteLengthMaps = indefinite
        configuration.fileSystemBlockCount = nil
        let device = SimulatedDevice(configuration: configuration)
        let data = pseudoRandomBytes(2 * 1024 * 1024, seed: 42)
        try Self.upload(data, name: "/lfs1/big.bin", to: device, chunk: 1900)
        #expect(device.file("/lfs1/big.bin") == data)
        #expect(try Self.download("/lfs1/big.bin", from: device) == data)
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1/big.bin"])["len"]?.int == data.count)

        let crc = try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/big.bin"])
        #expect(crc["type"]?.string == "crc32")
        #expect(crc["off"] == nil)
        #expect(crc["len"]?.int == data.count)
        #expect(crc["output"]?.uint64 == UInt64(referenceCRC32(data)))
        let sha = try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/big.bin", "type": "sha256"])
        #expect(sha["output"]?.byteString == Array(SHA256.hash(data: data)))
        let part = try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/big.bin", "type": "sha256", "off": 1000, "len": 5000])
        #expect(part["off"]?.int == 1000)
        #expect(part["len"]?.int == 5000)
        #expect(part["output"]?.byteString == Array(SHA256.hash(data: data[1000..<6000])))
    }

    @Test func crcCheckValue() throws {
        let device = SimulatedDevice()
        device.setFile("/lfs1/check", Array("123456789".utf8))
        #expect(try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/check", "type": "crc32"])["output"]?.uint64 == 0xCBF4_3926)
    }

    @Test(arguments: [128, 384, 2048])
    func downloadChunksFitTheBuffer(bufferSize: Int) throws {
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = bufferSize
        let device = SimulatedDevice(configuration: configuration)
        let data = pseudoRandomBytes(70_000, seed: 3)
        device.setFile("/lfs1/f", data)
        var offset = 0
        while offset < data.count {
            let request = smpRequest(.read, group: .fileSystem, command: 0, body: ["name": "/lfs1/f", "off": .unsigned(UInt64(offset))])
            let raw = try #require(device.handle(request, now: .zero))
            #expect(raw.count <= bufferSize)
            let chunk = try #require(try decodeResponse(raw, bufferSize: bufferSize)["data"]?.byteString)
            #expect(chunk == Array(data[offset..<(offset + chunk.count)]))
            // Zephyr's chunk size: buf_size - 44 (2004 at 2048, measured on native_sim_udp 4.4.0).
            if offset + chunk.count < data.count { #expect(chunk.count == bufferSize - 44) }
            offset += chunk.count
        }
    }

    @Test func uploadRules() throws {
        let device = SimulatedDevice()
        func up(_ body: CBOR) throws -> SimResponse { try exchange(device, .write, group: .fileSystem, command: 0, body: body) }
        // Offset 0 truncates an existing file.
        #expect(try up(["name": "/lfs1/hello.txt", "off": 0, "len": 3, "data": .bytes([1, 2])])["off"]?.int == 2)
        #expect(device.file("/lfs1/hello.txt") == [1, 2])
        // Offset mismatch → FS err 11 with the current length.
        let mismatch = try up(["name": "/lfs1/hello.txt", "off": 1, "data": .bytes([9])])
        #expect(mismatch.errGroup == 8 && mismatch.errRC == 11)
        #expect(mismatch["len"]?.int == 2)
        // Continuing at the right offset works.
        #expect(try up(["name": "/lfs1/hello.txt", "off": 2, "data": .bytes([3])])["off"]?.int == 3)
        #expect(device.file("/lfs1/hello.txt") == [1, 2, 3])
        // len is required at off 0.
        #expect(try up(["name": "/lfs1/x", "off": 0, "data": .bytes([1])]).rc == 3)
        // Paths (as native_sim_udp 4.4.0 answers): outside the mount point or in a missing directory
        // MOUNT_POINT_NOT_FOUND, a directory UNKNOWN (EISDIR), no leading slash FILE_INVALID_NAME, an
        // empty or too long name rc 3.
        #expect(try up(["name": "/other/x", "off": 0, "len": 1, "data": .bytes([1])]).errRC == 14)
        #expect(try up(["name": "/lfs1/no/x", "off": 0, "len": 1, "data": .bytes([1])]).errRC == 14)
        #expect(try up(["name": "/lfs1", "off": 0, "len": 1, "data": .bytes([1])]).errRC == 1)
        #expect(try up(["name": "x", "off": 0, "len": 1, "data": .bytes([1])]).errRC == 2)
        #expect(try up(["name": "", "off": 0, "len": 1, "data": .bytes([1])]).rc == 3)
        #expect(try up(["name": .text("/lfs1/" + String(repeating: "x", count: 59)), "off": 0, "len": 1, "data": .bytes([1])]).rc == 3)
        // Empty file upload.
        #expect(try up(["name": "/lfs1/empty", "off": 0, "len": 0, "data": .bytes([])])["off"]?.int == 0)
        #expect(device.file("/lfs1/empty") == [])
    }

    @Test func downloadAndStatusErrors() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/nope", "off": 0]).errRC == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1", "off": 0]).errRC == 4)
        // Past the end: no error, no data (LittleFS seeks there).
        let past = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/hello.txt", "off": 1000])
        #expect(past["off"]?.int == 1000 && past["data"]?.byteString == [] && past["len"] == nil)
        #expect(try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/hello.txt"]).rc == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1/nope"]).errRC == 3)
        #expect(try exchange(device, .read, group: .fileSystem, command: 2, body: ["name": "/lfs1/hello.txt", "type": "md5"]).errRC == 13)
        let small = try exchange(device, .read, group: .fileSystem, command: 0, body: ["name": "/lfs1/hello.txt", "off": 0])
        #expect(small["data"]?.byteString == Array("Hello from the simulated device!\n".utf8))
        #expect(small["len"]?.int == 33)
    }

    @Test func supportedHashesAndClose() throws {
        let device = SimulatedDevice()
        let types = try #require(try exchange(device, .read, group: .fileSystem, command: 3)["types"])
        #expect(types["crc32"]?["format"]?.int == 0)
        #expect(types["crc32"]?["size"]?.int == 4)
        #expect(types["sha256"]?["format"]?.int == 1)
        #expect(types["sha256"]?["size"]?.int == 32)
        #expect(try exchange(device, .write, group: .fileSystem, command: 4).isSuccess)
    }
}
