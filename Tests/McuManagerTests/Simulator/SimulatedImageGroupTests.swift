import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: image group")
struct SimulatedImageGroupTests {
    static func makeImage(_ version: McuMgrImageVersion, bodySize: Int = 5000, seed: UInt64 = 1) -> [UInt8] {
        SimulatedMCUbootImage.build(version: version, body: pseudoRandomBytes(bodySize, seed: seed))
    }

    /// Uploads a whole image; returns the last response.
    @discardableResult
    static func upload(
        _ image: [UInt8], to device: SimulatedDevice, imageNumber: Int? = nil, chunk: Int = 1000, sha: [UInt8]? = nil
    ) throws -> SimResponse {
        var offset = 0
        var last: SimResponse?
        while offset < image.count {
            let end = min(offset + chunk, image.count)
            var body: [CBORMapEntry] = .entries(["off": .unsigned(UInt64(offset)), "data": .bytes(Array(image[offset..<end]))])
            if offset == 0 {
                body.append("len", .unsigned(UInt64(image.count)))
                body.append("sha", .bytes(sha ?? Array(SHA256.hash(data: image))))
                if let imageNumber { body.append("image", .unsigned(UInt64(imageNumber))) }
            }
            let response = try exchange(device, .write, group: .image, command: 1, body: .map(body))
            try #require(response.isSuccess, "upload failed at \(offset): \(response.body)")
            offset = try #require(response["off"]?.int)
            last = response
        }
        return try #require(last)
    }

    static func list(_ device: SimulatedDevice) throws -> [CBOR] {
        try #require(try exchange(device, .read, group: .image, command: 0)["images"]?.arrayValue)
    }

    static func flags(_ entry: CBOR) -> String {
        ["bootable", "pending", "confirmed", "active", "permanent"].filter { entry[$0] == true }.joined(separator: ",")
    }

    @Test func initialImageList() throws {
        let device = SimulatedDevice()
        let response = try exchange(device, .read, group: .image, command: 0)
        #expect(response["splitStatus"]?.int == 0)
        let images = try #require(response["images"]?.arrayValue)
        #expect(images.count == 1)
        let slot0 = images[0]
        #expect(slot0["image"] == nil)
        #expect(slot0["slot"]?.int == 0)
        #expect(slot0["version"]?.string == "1.0.0")
        #expect(Self.flags(slot0) == "bootable,confirmed,active")
        #expect(slot0["permanent"] == false)
        let hash = try #require(slot0["hash"]?.byteString)
        #expect(hash.count == 32)
        // The hash is the SHA-256 TLV: SHA-256 over header + body.
        let bytes = try #require(device.imageSlots.first?.bytes)
        let hashedLength = 32 + Int(bytes[12]) + Int(bytes[13]) << 8 + Int(bytes[14]) << 16
        #expect(Array(SHA256.hash(data: bytes[0..<hashedLength])) == hash)
        let magic: [UInt8] = [0x3D, 0xB8, 0xF3, 0x96]
        #expect(Array(bytes[0..<4]) == magic)
    }

    @Test func uploadStoresImageInSecondarySlotWithMatch() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 1, revision: 3, build: 7))
        let last = try Self.upload(image, to: device)
        #expect(last["off"]?.int == image.count)
        #expect(last["match"] == true)
        let list = try Self.list(device)
        #expect(list.count == 2)
        #expect(list[1]["slot"]?.int == 1)
        #expect(list[1]["version"]?.string == "2.1.3.7")
        #expect(Self.flags(list[1]) == "bootable")
        #expect(list[1]["hash"]?.byteString == SimulatedMCUbootImage.imageHash(of: image))
    }

    @Test func matchIsFalseForWrongShaAndAbsentWithoutSha() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 1000)
        #expect(try Self.upload(image, to: device, sha: Array(repeating: 0xAB, count: 32))["match"] == false)
        let other = SimulatedDevice()
        let response = try exchange(other, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(image.count)), "data": .bytes(image)])
        #expect(response["off"]?.int == image.count)
        #expect(response["match"] == nil)
    }

    @Test func firstChunkRules() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        let first = Array(image[0..<100])
        func send(_ body: CBOR) throws -> SimResponse { try exchange(device, .write, group: .image, command: 1, body: body) }
        #expect(try send(["data": .bytes(first), "len": 5000]).errRC == 20)
        #expect(try send(["off": 0, "data": .bytes(first)]).errRC == 21)
        #expect(try send(["off": 0, "data": .bytes(Array(first[0..<31])), "len": 5000]).errRC == 22)
        var badMagic = first
        badMagic[0] ^= 0xFF
        #expect(try send(["off": 0, "data": .bytes(badMagic), "len": 5000]).errRC == 23)
        #expect(try send(["off": 0, "data": .bytes(first), "len": .unsigned(UInt64(0x76000 + 1))]).errRC == 30)
        #expect(try send(["off": 0, "data": .bytes(first), "len": 5000, "sha": .bytes(Array(repeating: 1, count: 33))]).errRC == 24)
        #expect(try send(["off": 0, "data": .bytes(first), "len": 50]).errRC == 31)
        // v1 translations: 21/22 → EINVAL, 23 → EUNKNOWN.
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "data": .bytes(first)], version: .v1).rc == 3)
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "data": .bytes(badMagic), "len": 5000], version: .v1).rc == 1)
    }

    @Test func resumeWrongOffsetAndOverrun() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 2500)
        let sha = Array(SHA256.hash(data: image))
        func send(_ body: CBOR) throws -> SimResponse { try exchange(device, .write, group: .image, command: 1, body: body) }
        let length = CBOR.unsigned(UInt64(image.count))
        #expect(try send(["off": 0, "data": .bytes(Array(image[0..<1000])), "len": length, "sha": .bytes(sha)])["off"]?.int == 1000)
        #expect(try send(["off": 1000, "data": .bytes(Array(image[1000..<1500]))])["off"]?.int == 1500)
        // Resume: off 0 with the same sha reports the current offset without writing.
        let resumed = try send(["off": 0, "data": .bytes(Array(image[0..<1000])), "len": length, "sha": .bytes(sha)])
        #expect(resumed.isSuccess)
        #expect(resumed["off"]?.int == 1500)
        // Wrong offset: success carrying the expected offset.
        let wrong = try send(["off": 2000, "data": .bytes(Array(image[2000..<2100]))])
        #expect(wrong.isSuccess)
        #expect(wrong["off"]?.int == 1500)
        // Overrun: error, and the session is gone.
        let overrun = try send(["off": 1500, "data": .bytes(Array(repeating: 0, count: image.count - 1500 + 1))])
        #expect(overrun.errGroup == 1 && overrun.errRC == 31)
        #expect(try send(["off": 1500, "data": .bytes(Array(image[1500..<1600]))])["off"]?.int == 0)
        // Off 0 with another sha restarts.
        let restart = try send(["off": 0, "data": .bytes(Array(image[0..<500])), "len": length, "sha": .bytes(Array(repeating: 9, count: 32))])
        #expect(restart["off"]?.int == 500)
    }

    @Test func continuationWithoutSessionReportsZero() throws {
        let device = SimulatedDevice()
        let response = try exchange(device, .write, group: .image, command: 1, body: ["off": 100, "data": .bytes([1, 2, 3])])
        #expect(response.isSuccess)
        #expect(response["off"]?.int == 0)
    }

    @Test func completedUploadMustHaveValidTLVs() throws {
        let device = SimulatedDevice()
        var corrupt = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 1000)
        corrupt[100] ^= 0x01
        let response = try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(corrupt.count)), "data": .bytes(corrupt)])
        #expect(response.errRC == 24)
        #expect(try Self.list(device).count == 1)

        let good = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 1000)
        let noTLV = Array(good[0..<(32 + 1000)])
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(noTLV.count)), "data": .bytes(noTLV)]).errRC == 4)
    }

    @Test func upgradeRefusesSameOrOlderVersion() throws {
        let device = SimulatedDevice()
        let same = Self.makeImage(McuMgrImageVersion(major: 1, minor: 0, revision: 0), bodySize: 1000)
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(same.count)), "data": .bytes(same), "upgrade": true]).errRC == 27)
        let newer = Self.makeImage(McuMgrImageVersion(major: 1, minor: 0, revision: 1), bodySize: 1000)
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(newer.count)), "data": .bytes(newer), "upgrade": true]).isSuccess)
    }

    @Test func testResetRunsUnconfirmedThenRevertsOnNextReset() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try Self.upload(image, to: device)
        let newHash = try #require(SimulatedMCUbootImage.imageHash(of: image))
        let oldHash = try #require(device.imageSlots.first?.hash)

        let tested = try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(newHash), "confirm": false])
        let afterTest = try #require(tested["images"]?.arrayValue)
        #expect(Self.flags(afterTest[0]) == "bootable,confirmed,active")
        #expect(Self.flags(afterTest[1]) == "bootable,pending")
        // Uploading to the pending slot is refused; confirming the running image too. (Erasing it is
        // allowed by Zephyr's default, see eraseRules.)
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["confirm": true]).errRC == 28)
        let other = Self.makeImage(McuMgrImageVersion(major: 3, minor: 0, revision: 0))
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(other.count)), "data": .bytes(Array(other[0..<100]))]).errRC == 9)

        #expect(try exchange(device, .write, group: .os, command: 5).isSuccess)
        var list = try Self.list(device)
        #expect(list[0]["version"]?.string == "2.0.0")
        #expect(list[0]["hash"]?.byteString == newHash)
        #expect(Self.flags(list[0]) == "bootable,active")
        #expect(list[1]["hash"]?.byteString == oldHash)
        #expect(Self.flags(list[1]) == "bootable,confirmed")
        // The old image is in use (confirmed): no erase, no test.
        #expect(try exchange(device, .write, group: .image, command: 5).errRC == 9)
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(oldHash)]).errRC == 28)

        #expect(try exchange(device, .write, group: .os, command: 5).isSuccess)
        list = try Self.list(device)
        #expect(list[0]["version"]?.string == "1.0.0")
        #expect(Self.flags(list[0]) == "bootable,confirmed,active")
        #expect(list[1]["version"]?.string == "2.0.0")
        #expect(Self.flags(list[1]) == "bootable")
        #expect(device.resetCount == 2)
    }

    @Test func testResetConfirmKeepsNewImage() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try Self.upload(image, to: device)
        let newHash = try #require(SimulatedMCUbootImage.imageHash(of: image))
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(newHash)]).isSuccess)
        device.powerCycle(now: .zero)
        let confirmed = try exchange(device, .write, group: .image, command: 0, body: ["confirm": true])
        let list = try #require(confirmed["images"]?.arrayValue)
        #expect(Self.flags(list[0]) == "bootable,confirmed,active")
        #expect(Self.flags(list[1]) == "bootable")
        device.powerCycle(now: .zero)
        #expect(try Self.list(device)[0]["version"]?.string == "2.0.0")
        // The old image can now be erased.
        #expect(try exchange(device, .write, group: .image, command: 5).isSuccess)
        #expect(try Self.list(device).count == 1)
    }

    @Test func confirmWithHashSwapsPermanently() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 3, minor: 0, revision: 0))
        try Self.upload(image, to: device)
        let hash = try #require(SimulatedMCUbootImage.imageHash(of: image))
        let response = try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(hash), "confirm": true])
        let list = try #require(response["images"]?.arrayValue)
        #expect(Self.flags(list[1]) == "bootable,pending,permanent")
        _ = try exchange(device, .write, group: .os, command: 5)
        let after = try Self.list(device)
        #expect(after[0]["version"]?.string == "3.0.0")
        #expect(Self.flags(after[0]) == "bootable,confirmed,active")
        #expect(Self.flags(after[1]) == "bootable")
        _ = try exchange(device, .write, group: .os, command: 5)
        #expect(try Self.list(device)[0]["version"]?.string == "3.0.0")
    }

    @Test func stateWriteErrors() throws {
        let device = SimulatedDevice()
        let active = try #require(device.imageSlots.first?.hash)
        func write(_ body: CBOR) throws -> SimResponse { try exchange(device, .write, group: .image, command: 0, body: body) }
        #expect(try write([:]).errRC == 24)
        #expect(try write(["confirm": false]).errRC == 24)
        #expect(try write(["hash": .bytes(Array(active[0..<31]))]).errRC == 24)
        #expect(try write(["hash": .bytes(Array(repeating: 7, count: 32))]).errRC == 8)
        #expect(try write(["hash": .bytes(active)]).errRC == 33)
        #expect(try write(["hash": .bytes(active), "confirm": true]).isSuccess)
        #expect(try write(["confirm": true])["images"]?.arrayValue?.count == 1)
        #expect(try write(["confirm": "yes"]).rc == 3)
    }

    @Test func eraseRules() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 0]).errRC == 9)
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 0], version: .v1).rc == 6)
        // Empty slot: fine.
        #expect(try exchange(device, .write, group: .image, command: 5).isSuccess)
        try Self.upload(Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0)), to: device)
        #expect(try Self.list(device).count == 2)
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 1]).isSuccess)
        #expect(try Self.list(device).count == 1)
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 7]).errRC == 14)
    }

    /// CONFIG_MCUMGR_GRP_IMG_ALLOW_ERASE_PENDING (default y): a slot marked for test or permanent may be
    /// erased before the reset; a slot a revert would boot may not.
    @Test(arguments: [true, false])
    func erasePendingSlot(allowed: Bool) throws {
        var configuration = SimulatorConfiguration()
        configuration.allowErasePending = allowed
        for confirm in [false, true] {
            let device = SimulatedDevice(configuration: configuration)
            let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
            try Self.upload(image, to: device)
            let hash = try #require(SimulatedMCUbootImage.imageHash(of: image))
            #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(hash), "confirm": .bool(confirm)]).isSuccess)
            let erase = try exchange(device, .write, group: .image, command: 5, body: ["slot": 1])
            if allowed {
                #expect(erase.isSuccess)
                #expect(try Self.list(device).count == 1)
            } else {
                #expect(erase.errRC == 9)
            }
        }
        // After a test boot the old image is the revert slot: never erasable.
        let device = SimulatedDevice(configuration: configuration)
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try Self.upload(image, to: device)
        let hash = try #require(SimulatedMCUbootImage.imageHash(of: image))
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(hash)]).isSuccess)
        device.powerCycle(now: .zero)
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 1]).errRC == 9)
    }

    @Test func eraseAbortsUploadSession() throws {
        let device = SimulatedDevice()
        let image = Self.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        _ = try exchange(device, .write, group: .image, command: 1, body: ["off": 0, "len": .unsigned(UInt64(image.count)), "data": .bytes(Array(image[0..<1000]))])
        #expect(try exchange(device, .write, group: .image, command: 5).isSuccess)
        #expect(try exchange(device, .write, group: .image, command: 1, body: ["off": 1000, "data": .bytes(Array(image[1000..<2000]))])["off"]?.int == 0)
    }

    @Test func multiImageDevice() throws {
        var configuration = SimulatorConfiguration()
        configuration.imageCount = 2
        let device = SimulatedDevice(configuration: configuration)
        var list = try Self.list(device)
        #expect(list.count == 2)
        #expect(list.map { $0["image"]?.int } == [0, 1])
        #expect(Self.flags(list[0]) == "bootable,confirmed,active")
        // Current Zephyr reports every image's running slot as active (img_mgmt_state_read).
        #expect(Self.flags(list[1]) == "bootable,confirmed,active")
        let image = Self.makeImage(McuMgrImageVersion(major: 5, minor: 0, revision: 0))
        try Self.upload(image, to: device, imageNumber: 1)
        list = try Self.list(device)
        #expect(list.count == 3)
        #expect(list[2]["image"]?.int == 1)
        #expect(list[2]["slot"]?.int == 1)
        let hash = try #require(SimulatedMCUbootImage.imageHash(of: image))
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(hash), "confirm": true]).isSuccess)
        device.powerCycle(now: .zero)
        list = try Self.list(device)
        #expect(list[1]["image"]?.int == 1 && list[1]["version"]?.string == "5.0.0")
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 3]).isSuccess)
        // Confirming the primary of the non-active image is denied.
        let image1Primary = try #require(list[1]["hash"]?.byteString)
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["hash": .bytes(image1Primary), "confirm": true]).errRC == 32)
        let info = try #require(try exchange(device, .read, group: .image, command: 6)["images"]?.arrayValue)
        #expect(info.count == 2)
        #expect(info[1]["image"]?.int == 1)
        #expect(info[1]["slots"]?.arrayValue?.count == 2)
        #expect(info[0]["max_image_size"]?.int == 0x76000)
    }

    @Test func imageBuilderRoundTrips() throws {
        let image = SimulatedMCUbootImage.build(version: McuMgrImageVersion(major: 1, minor: 2, revision: 3, build: 4), body: [1, 2, 3], headerSize: 0x200)
        let info = try SimulatedMCUbootImage.parse(image, verifyHash: true)
        #expect(info.version == McuMgrImageVersion(major: 1, minor: 2, revision: 3, build: 4))
        #expect(info.hash == Array(SHA256.hash(data: image[0..<(0x200 + 3)])))
    }
}
