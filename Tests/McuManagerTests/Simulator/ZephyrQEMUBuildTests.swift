import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// The `--like` personalities of the shared QEMU builds, as measured on them (Scripts/conformance_qemu.py
/// compares them with the real guests; these pin what it found without QEMU).
@Suite("Simulated device: the shared QEMU builds")
struct ZephyrQEMUBuildTests {
    private static func reset(_ device: SimulatedDevice) throws {
        _ = try exchange(device, .write, group: .os, command: 5, body: [:])
    }

    @Test func mps2RecoveryStaysInSerialRecoveryWithoutAnApplication() throws {
        let device = SimulatedDevice(configuration: ZephyrBuild.mps2Recovery.configuration)
        // No application: MCUboot's serial recovery, whose image list is empty and has no rc.
        let list = try exchange(device, .read, group: .image, command: 0)
        #expect(list.body == ["images": []])
        // This MCUboot has neither echo nor MCUmgr parameters; console echo it has.
        #expect(try exchange(device, .write, group: .os, command: 0, body: ["d": "x"]).rc == 8)
        #expect(try exchange(device, .read, group: .os, command: 6).rc == 8)
        #expect(try exchange(device, .write, group: .os, command: 1, body: ["echo": false]).rc == 0)
        #expect(try exchange(device, .read, group: .enumeration, command: 0).rc == 8)
        // An upload chunk answers rc first, then off.
        let image = SimulatedMCUbootImage.build(version: McuMgrImageVersion(major: 1, minor: 2, revision: 3), body: Array(repeating: 7, count: 300))
        let first = try exchange(
            device, .write, group: .image, command: 1,
            body: .map(.entries(["off": 0, "len": .unsigned(UInt64(image.count)), "data": .bytes(Array(image.prefix(100)))])))
        #expect(first.body == .map(.entries(["rc": 0, "off": 100])))
        let rest = try exchange(
            device, .write, group: .image, command: 1,
            body: .map(.entries(["off": 100, "data": .bytes(Array(image.dropFirst(100)))])))
        #expect(rest["off"]?.int == image.count)
        // After a reset the uploaded image boots: the application answers (4 x 1024, RAM load: no state write).
        try Self.reset(device)
        let params = try exchange(device, .read, group: .os, command: 6)
        #expect(params["buf_size"]?.int == 1024 && params["buf_count"]?.int == 4)
        let running = try exchange(device, .read, group: .image, command: 0)
        #expect(running["images"]?.arrayValue?.first?["version"]?.string == "1.2.3")
        #expect(try exchange(device, .write, group: .image, command: 0, body: ["confirm": true]).rc == 8)
    }

    @Test func mps2AppStorageEraseBreaksTheFileSystemUntilAReset() throws {
        let device = SimulatedDevice(configuration: ZephyrBuild.mps2App.configuration)
        let upload: CBOR = ["name": "/lfs1/a", "off": 0, "len": 3, "data": .bytes([1, 2, 3])]
        #expect(try exchange(device, .write, group: .fileSystem, command: 0, body: upload)["off"]?.int == 3)
        #expect(try exchange(device, .write, group: .zephyrBasic, command: 0).isSuccess)
        let stat = try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1/a"])
        #expect(stat.errGroup == 8 && stat.errRC == 1)
        #expect(try exchange(device, .write, group: .fileSystem, command: 0, body: upload).errRC == 1)
        // The mount point itself is still a directory; a path elsewhere has no mount point.
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1"]).errRC == 4)
        try Self.reset(device)
        // Remounted (formatted) empty: the file is gone, writes work again.
        #expect(try exchange(device, .read, group: .fileSystem, command: 1, body: ["name": "/lfs1/a"]).errRC == 3)
        #expect(try exchange(device, .write, group: .fileSystem, command: 0, body: upload)["off"]?.int == 3)
    }

    @Test func qemuCortexM0SlotsAndUploads() throws {
        let device = SimulatedDevice(configuration: ZephyrBuild.qemuCortexM0.configuration)
        let params = try exchange(device, .read, group: .os, command: 6)
        #expect(params["buf_size"]?.int == 384 && params["buf_count"]?.int == 4)
        #expect(try exchange(device, .read, group: .enumeration, command: 1)["groups"] == [10, 1, 0, 2])
        // Slot info: both slots of 0x1A000, upload_image_id on the inactive one, no max_image_size.
        let info = try exchange(device, .read, group: .image, command: 6)
        #expect(info.body == [
            "images": [["image": 0, "slots": [["slot": 0, "size": 0x1A000], ["slot": 1, "size": 0x1A000, "upload_image_id": 0]]]]
        ])
        // A single-image build ignores the upload's image number; too large is IMG err 30.
        let image = SimulatedMCUbootImage.build(version: McuMgrImageVersion(major: 2, minor: 0, revision: 0), body: Array(repeating: 1, count: 200))
        let chunk: [CBORMapEntry] = .entries(["off": 0, "data": .bytes(Array(image.prefix(64)))])
        let other = try exchange(device, .write, group: .image, command: 1, body: .map(chunk + .entries(["image": 2, "len": .unsigned(UInt64(image.count))])))
        #expect(other["off"]?.int == 64)
        let large = try exchange(device, .write, group: .image, command: 1, body: .map(chunk + .entries(["len": .unsigned(0x1A001)])))
        #expect(large.errGroup == 1 && large.errRC == 30)
        // The whole image: the last answer has no match (no CONFIG_IMG_ENABLE_IMAGE_CHECK).
        _ = try exchange(device, .write, group: .image, command: 1, body: .map(chunk + .entries(["len": .unsigned(UInt64(image.count))])))
        let last = try exchange(device, .write, group: .image, command: 1, body: .map(.entries(["off": 64, "data": .bytes(Array(image.dropFirst(64)))])))
        #expect(last.body == .map(.entries(["off": .unsigned(UInt64(image.count))])))
    }
}
