import Foundation
import McuManager
import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// Drives the simulated device with raw image-group requests in every MCUboot mode and checks the image
/// list after each step.
@Suite("Simulated device: MCUboot modes")
struct SimulatedBootloaderModeTests {
    typealias T = SimulatedImageGroupTests

    static func device(_ mode: SimulatedBootloader.Mode, images: Int = 1, configure: (inout SimulatorConfiguration) -> Void = { _ in })
        -> SimulatedDevice
    {
        var configuration = SimulatorConfiguration()
        configuration.bootloader.mode = mode
        configuration.imageCount = images
        configure(&configuration)
        return SimulatedDevice(configuration: configuration)
    }

    /// The list as `image/slot version flags` lines.
    static func summary(_ device: SimulatedDevice) throws -> [String] {
        try T.list(device).map { entry in
            let image = entry["image"]?.int.map { "\($0)/" } ?? ""
            return "\(image)\(entry["slot"]?.int ?? -1) \(entry["version"]?.string ?? "?") \(T.flags(entry))"
        }
    }

    static func hash(_ image: [UInt8]) throws -> [UInt8] { try #require(SimulatedMCUbootImage.imageHash(of: image)) }

    static func setState(_ device: SimulatedDevice, _ image: [UInt8]?, confirm: Bool) throws -> SimResponse {
        var body: [CBORMapEntry] = .entries(["confirm": .bool(confirm)])
        if let image { body.append("hash", .bytes(try hash(image))) }
        return try exchange(device, .write, group: .image, command: 0, body: .map(body))
    }

    @discardableResult
    static func reset(_ device: SimulatedDevice, bootMode: UInt64? = nil) throws -> SimResponse {
        var body: [CBORMapEntry] = []
        if let bootMode { body.append("boot_mode", .unsigned(bootMode)) }
        return try exchange(device, .write, group: .os, command: 5, body: .map(body))
    }

    // MARK: Bootloader info

    @Test(arguments: SimulatedBootloader.Mode.allCases)
    func bootloaderInfoReportsTheMode(_ mode: SimulatedBootloader.Mode) throws {
        let device = Self.device(mode) { $0.bootloader.noDowngrade = mode == .swapUsingOffset }
        #expect(try exchange(device, .read, group: .os, command: 8)["bootloader"]?.string == "MCUboot")
        let answer = try exchange(device, .read, group: .os, command: 8, body: ["query": "mode"])
        #expect(answer["mode"]?.int == mode.rawValue)
        #expect(answer["no-downgrade"]?.boolValue == (mode == .swapUsingOffset ? true : nil))
        #expect(SimulatedBootloader.Mode(name: mode.name) == mode)
        #expect(SimulatedBootloader.Mode(name: "\(mode.rawValue)") == mode)
    }

    @Test func modeNumbersAreMCUbootsEnum() {
        // boot_status.h enum mcuboot_mode; 8 is single-slot RAM load.
        #expect(SimulatedBootloader.Mode.allCases.map(\.rawValue) == [0, 1, 2, 3, 4, 5, 6, 7, 9])
        #expect(SimulatedBootloader.Mode(name: "swap-offset")?.rawValue == 9)
        #expect(SimulatedBootloader.Mode(name: "nonsense") == nil)
    }

    // MARK: Swap

    @Test(arguments: [SimulatedBootloader.Mode.swapUsingScratch, .swapUsingMove, .swapUsingOffset])
    func swapTestRevertAndPermanent(_ mode: SimulatedBootloader.Mode) throws {
        let device = Self.device(mode) { $0.swapTime = .seconds(3); $0.bootTime = .milliseconds(100) }
        let new = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try T.upload(new, to: device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable"])
        #expect(try Self.setState(device, new, confirm: false).isSuccess)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable,pending"])
        let collector = ResetEventBox()
        device.setResetObserver { collector.add($0) }
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 2.0.0 bootable,active", "1 1.0.0 bootable,confirmed"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable"])
        // Swap time: both reboots moved images, so the device stays silent for it.
        let events = collector.events
        #expect(events.count == 2 && events.allSatisfy(\.swapped))
        let expectedUntil = SMPInstant(nanoseconds: 3_350_000_000)
        #expect(events[0].rebootingUntil == expectedUntil)
        #expect(events[0].rebootAt == SMPInstant(nanoseconds: 250_000_000))
        #expect(device.isRebooting(at: SMPInstant(nanoseconds: 3_000_000_000)))
        #expect(!device.isRebooting(at: expectedUntil))
        // A third reset has nothing to swap: boot time only.
        try Self.reset(device)
        #expect(collector.events.last?.swapped == false)
        #expect(collector.events.last?.rebootingUntil == SMPInstant(nanoseconds: 350_000_000))
        // Permanent.
        #expect(try Self.setState(device, new, confirm: true).isSuccess)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable,pending,permanent"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 2.0.0 bootable,confirmed,active", "1 1.0.0 bootable"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 2.0.0 bootable,confirmed,active", "1 1.0.0 bootable"])
    }

    @Test func confirmWhileTestingKeepsTheNewImage() throws {
        let device = Self.device(.swapUsingMove)
        let new = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try T.upload(new, to: device)
        _ = try Self.setState(device, new, confirm: false)
        try Self.reset(device)
        // Pending test elsewhere blocks nothing now; confirming the running image sticks.
        #expect(try Self.setState(device, nil, confirm: true).isSuccess)
        #expect(try Self.summary(device) == ["0 2.0.0 bootable,confirmed,active", "1 1.0.0 bootable"])
        // While the revert was due, the old image could not be overwritten; now it can.
        try T.upload(T.makeImage(McuMgrImageVersion(major: 3, minor: 0, revision: 0)), to: device)
    }

    @Test func uploadIsRefusedWhileARevertIsDue() throws {
        let device = Self.device(.swapUsingScratch)
        let new = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try T.upload(new, to: device)
        _ = try Self.setState(device, new, confirm: false)
        try Self.reset(device)
        let other = T.makeImage(McuMgrImageVersion(major: 3, minor: 0, revision: 0))
        let answer = try exchange(
            device, .write, group: .image, command: 1,
            body: ["off": 0, "len": .unsigned(UInt64(other.count)), "data": .bytes(Array(other[0..<500]))])
        #expect(answer.errRC == 9)  // NO_FREE_SLOT: the old image must stay for the revert
    }

    // MARK: Overwrite

    @Test(arguments: [false, true])
    func overwriteCopiesWithoutRevert(confirm: Bool) throws {
        let device = Self.device(.overwriteOnly) { $0.swapTime = .seconds(1) }
        let collector = ResetEventBox()
        device.setResetObserver { collector.add($0) }
        let new = T.makeImage(McuMgrImageVersion(major: 2, minor: 1, revision: 0))
        try T.upload(new, to: device)
        #expect(try Self.setState(device, new, confirm: confirm).isSuccess)
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 2.1.0 bootable,confirmed,active"])
        #expect(collector.events.last?.swapped == true)
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 2.1.0 bootable,confirmed,active"])
        #expect(collector.events.last?.swapped == false)
    }

    // MARK: Direct-XIP

    @Test func directXIPBootsTheHigherVersionWithoutStateWrite() throws {
        let device = Self.device(.directXIP) { $0.swapTime = .seconds(5) }
        let collector = ResetEventBox()
        device.setResetObserver { collector.add($0) }
        let new = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try T.upload(new, to: device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable,pending,permanent"])
        #expect(try Self.setState(device, new, confirm: false).rc == 8)
        #expect(try Self.setState(device, new, confirm: true).rc == 8)
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 2.0.0 bootable,confirmed,active"])
        #expect(collector.events.last?.swapped == false)  // no swap time in place
        // The next upload goes to the now inactive slot 0; a lower version does not boot.
        let older = T.makeImage(McuMgrImageVersion(major: 1, minor: 5, revision: 0), seed: 9)
        try T.upload(older, to: device)
        #expect(try Self.summary(device) == ["0 1.5.0 bootable", "1 2.0.0 bootable,confirmed,active"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.5.0 bootable", "1 2.0.0 bootable,confirmed,active"])
        // The active slot cannot be erased, the other can (default: the other slot).
        #expect(try exchange(device, .write, group: .image, command: 5, body: ["slot": 1]).errRC == 9)
        #expect(try exchange(device, .write, group: .image, command: 5).isSuccess)
        #expect(try Self.summary(device) == ["1 2.0.0 bootable,confirmed,active"])
    }

    @Test func directXIPSkipsABuildLinkedForTheOtherSlot() throws {
        let device = Self.device(.directXIP)
        let configuration = device.configuration
        let body = pseudoRandomBytes(3000, seed: 5)
        func build(slot: Int) -> [UInt8] {
            SimulatedMCUbootImage.build(
                version: McuMgrImageVersion(major: 3, minor: 0, revision: 0), body: body, flags: SimulatedMCUbootImage.romFixedFlag,
                loadAddress: configuration.slotAddress(image: 0, slot: slot))
        }
        // The build for slot 0 uploaded to slot 1 never boots.
        try T.upload(build(slot: 0), to: device)
        try Self.reset(device)
        #expect(try Self.summary(device).first == "0 1.0.0 bootable,confirmed,active")
        _ = try exchange(device, .write, group: .image, command: 5)
        try T.upload(build(slot: 1), to: device)
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 3.0.0 bootable,confirmed,active"])
    }

    @Test func directXIPWithRevert() throws {
        let device = Self.device(.directXIPWithRevert)
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        // Uploaded but not marked: MCUboot erases it at boot and keeps the old one.
        try T.upload(v2, to: device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active"])
        // Test: boots once unconfirmed, then a reset without confirm reverts (and erases it).
        try T.upload(v2, to: device)
        #expect(try Self.setState(device, v2, confirm: false).isSuccess)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable,pending"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed", "1 2.0.0 bootable,active"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active"])
        // Test, reset, confirm: permanent.
        try T.upload(v2, to: device)
        _ = try Self.setState(device, v2, confirm: false)
        try Self.reset(device)
        #expect(try Self.setState(device, nil, confirm: true).isSuccess)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 2.0.0 bootable,confirmed,active"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 2.0.0 bootable,confirmed,active"])
        // Confirm right away (permanent) from slot 1 to a v3 in slot 0.
        let v3 = T.makeImage(McuMgrImageVersion(major: 3, minor: 0, revision: 0))
        try T.upload(v3, to: device)
        #expect(try Self.setState(device, v3, confirm: true).isSuccess)
        #expect(try Self.summary(device) == ["0 3.0.0 bootable,pending,permanent", "1 2.0.0 bootable,confirmed,active"])
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 3.0.0 bootable,confirmed,active", "1 2.0.0 bootable"])
        #expect(try Self.setState(device, v3, confirm: false).errRC == 33)
    }

    // MARK: RAM load

    @Test func ramLoadBootsTheHigherVersion() throws {
        let device = Self.device(.ramLoad)
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        try T.upload(v2, to: device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 2.0.0 bootable,pending,permanent"])
        // Confirm is accepted (nothing to do: it boots next anyway); test is "already pending".
        #expect(try Self.setState(device, v2, confirm: true).isSuccess)
        #expect(try Self.setState(device, v2, confirm: false).errRC == 28)
        try Self.reset(device)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 2.0.0 bootable,confirmed,active"])
    }

    // MARK: Firmware loader

    @Test func firmwareLoaderWritesTheApplicationSlot() throws {
        let device = Self.device(.firmwareLoader)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable,confirmed,active", "1 1.0.0 bootable"])
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        // The application cannot write its own slot.
        let refused = try exchange(
            device, .write, group: .image, command: 1,
            body: ["off": 0, "len": .unsigned(UInt64(v2.count)), "data": .bytes(Array(v2[0..<500]))])
        #expect(refused.errRC == 9)
        try Self.reset(device, bootMode: 1)
        #expect(device.runMode == .firmwareLoader)
        #expect(try Self.summary(device) == ["0 1.0.0 bootable", "1 1.0.0 bootable,confirmed,active"])
        try T.upload(v2, to: device)
        #expect(try Self.setState(device, v2, confirm: true).rc == 8)
        try Self.reset(device)
        #expect(device.runMode == .application)
        #expect(try Self.summary(device) == ["0 2.0.0 bootable,confirmed,active", "1 1.0.0 bootable"])
    }

    // MARK: Serial recovery

    @Test func serialRecoveryUploadsToThePrimarySlot() throws {
        let device = Self.device(.singleApplication)
        try Self.reset(device, bootMode: 1)
        #expect(device.runMode == .serialRecovery)
        let params = try exchange(device, .read, group: .os, command: 6)
        #expect(params["buf_count"]?.int == 1 && params["buf_size"]?.int == 1024 && params.rc == 0)
        #expect(try exchange(device, .read, group: .os, command: 8).rc == 8)
        #expect(try exchange(device, .read, group: .stats, command: 1).rc == 8)
        #expect(try exchange(device, .read, group: .os, command: 0, body: ["d": "hi"])["r"]?.string == "hi")
        let list = try T.list(device)
        #expect(list.count == 1 && list[0]["version"]?.string == "1.0.0" && list[0]["active"] == nil)
        // Upload: rc in every answer; sha ignored, so off 0 always restarts.
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        func chunk(_ offset: Int, _ count: Int) throws -> SimResponse {
            var body: [CBORMapEntry] = .entries([
                "off": .unsigned(UInt64(offset)), "data": .bytes(Array(v2[offset..<min(offset + count, v2.count)])),
            ])
            if offset == 0 {
                body.append("len", .unsigned(UInt64(v2.count)))
                body.append("sha", .bytes(Array(SHA256.hash(data: v2))))
            }
            return try exchange(device, .write, group: .image, command: 1, body: .map(body))
        }
        #expect(try chunk(0, 600)["off"]?.int == 600)
        #expect(try chunk(600, 600)["off"]?.int == 1200)
        let restarted = try chunk(0, 600)
        #expect(restarted["off"]?.int == 600 && restarted.rc == 0)
        #expect(try chunk(4000, 600)["off"]?.int == 600)  // wrong offset: where it stands
        var offset = 600
        while offset < v2.count { offset = try #require(try chunk(offset, 600)["off"]?.int) }
        #expect(try T.list(device).first?["version"]?.string == "2.0.0")
        try Self.reset(device)
        #expect(device.runMode == .application)
        // The single-application app has no image group (Zephyr builds none under single-app MCUboot).
        #expect(try exchange(device, .read, group: .image, command: 0).rc == 8)
        #expect(device.imageSlots.map(\.version.description) == ["2.0.0"])
    }

    @Test func serialRecoveryStaysWhenThePrimarySlotIsBroken() throws {
        let device = Self.device(.swapUsingScratch)
        try Self.reset(device, bootMode: 1)
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        // Interrupted upload: the primary slot is erased and incomplete.
        _ = try exchange(
            device, .write, group: .image, command: 1,
            body: ["off": 0, "len": .unsigned(UInt64(v2.count)), "data": .bytes(Array(v2[0..<500]))])
        try Self.reset(device)
        #expect(device.runMode == .serialRecovery)
        // Malformed requests get no answer at all.
        #expect(device.handle([0x0A, 0, 0, 9, 0, 0, 1, 0]) == nil)
    }

    // MARK: Multi-image

    @Test func netCoreImageHasItsOwnSlots() throws {
        let device = Self.device(.swapUsingScratch, images: 2)
        #expect(
            try Self.summary(device) == ["0/0 1.0.0 bootable,confirmed,active", "1/0 1.0.0 bootable,confirmed,active"])
        let app = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0))
        let net = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 1), seed: 3)
        try T.upload(app, to: device, imageNumber: 0)
        try T.upload(net, to: device, imageNumber: 1)
        #expect(try Self.setState(device, app, confirm: true).isSuccess)
        #expect(try Self.setState(device, net, confirm: true).isSuccess)
        #expect(
            try Self.summary(device) == [
                "0/0 1.0.0 bootable,confirmed,active", "0/1 2.0.0 bootable,pending,permanent",
                "1/0 1.0.0 bootable,confirmed,active", "1/1 2.0.1 bootable,pending,permanent",
            ])
        try Self.reset(device)
        #expect(
            try Self.summary(device) == [
                "0/0 2.0.0 bootable,confirmed,active", "0/1 1.0.0 bootable",
                "1/0 2.0.1 bootable,confirmed,active", "1/1 1.0.0 bootable",
            ])
        let info = try #require(try exchange(device, .read, group: .image, command: 6)["images"]?.arrayValue)
        #expect(info.count == 2)
    }

    // MARK: Upload resume

    @Test func uploadResumesWithTheSameShaAndRestartsAfterAReset() throws {
        let device = Self.device(.swapUsingScratch)
        let v2 = T.makeImage(McuMgrImageVersion(major: 2, minor: 0, revision: 0), bodySize: 20_000)
        let sha = Array(SHA256.hash(data: v2))
        func first(sha: [UInt8]?) throws -> SimResponse {
            var body: [CBORMapEntry] = .entries([
                "off": 0, "len": .unsigned(UInt64(v2.count)), "data": .bytes(Array(v2[0..<1000])),
            ])
            if let sha { body.append("sha", .bytes(sha)) }
            return try exchange(device, .write, group: .image, command: 1, body: .map(body))
        }
        #expect(try first(sha: sha)["off"]?.int == 1000)
        for offset in stride(from: 1000, to: 8000, by: 1000) {
            _ = try exchange(
                device, .write, group: .image, command: 1,
                body: ["off": .unsigned(UInt64(offset)), "data": .bytes(Array(v2[offset..<(offset + 1000)]))])
        }
        // The client was killed; it comes back with off 0 and the same sha: the device says 8000.
        #expect(try first(sha: sha)["off"]?.int == 8000)
        #expect(device.imageUploadOffset == 8000)
        // A truncated sha works too (Zephyr compares the length sent).
        #expect(try first(sha: Array(sha.prefix(8)))["off"]?.int == 1000)  // different tag: restart
        #expect(try first(sha: Array(sha.prefix(8)))["off"]?.int == 1000)  // now it resumes that session
        // Without sha every off 0 restarts.
        #expect(try first(sha: nil)["off"]?.int == 1000)
        // A reset loses the RAM session: off 0 with the sha starts over.
        #expect(try first(sha: sha)["off"]?.int == 1000)
        _ = try exchange(device, .write, group: .image, command: 1, body: ["off": 1000, "data": .bytes(Array(v2[1000..<2000]))])
        try Self.reset(device)
        #expect(device.imageUploadOffset == nil)
        #expect(try first(sha: sha)["off"]?.int == 1000)
        // Finish; then the same file again is "already there" (image check): off = len at once.
        var offset = 1000
        while offset < v2.count {
            offset = try #require(
                try exchange(
                    device, .write, group: .image, command: 1,
                    body: ["off": .unsigned(UInt64(offset)), "data": .bytes(Array(v2[offset..<min(offset + 1500, v2.count)]))]
                )["off"]?.int)
        }
        let again = try first(sha: sha)
        #expect(again["off"]?.int == v2.count && again["match"] == true)
    }

    // MARK: URI

    @Test func simURIOptions() throws {
        let uri = try McuMgrDeviceURI(parsing: "sim:?mode=direct-xip-revert&images=2&swap_time=0.25&no_downgrade")
        let configuration = try SimulatorURI.configuration(for: uri)
        #expect(configuration.bootloader.mode == .directXIPWithRevert)
        #expect(configuration.bootloader.noDowngrade)
        #expect(configuration.imageCount == 2)
        #expect(configuration.swapTime == .milliseconds(250))
        #expect(configuration.suit == nil)
        #expect(try SimulatorURI.configuration(for: McuMgrDeviceURI(parsing: "sim:?suit")).suit != nil)
        #expect(try SimulatorURI.configuration(for: McuMgrDeviceURI(parsing: "sim:?mode=4")).bootloader.mode == .directXIP)
        #expect(throws: McuMgrError.self) { try SimulatorURI.configuration(for: McuMgrDeviceURI(parsing: "sim:?mode=flash")) }
        #expect(throws: McuMgrError.self) { try SimulatorURI.configuration(for: McuMgrDeviceURI(parsing: "sim:?swap_time=-1")) }
    }
}

/// Collects reset events from the device's observer.
final class ResetEventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [SimulatedResetEvent] = []
    func add(_ event: SimulatedResetEvent) { lock.withLock { stored.append(event) } }
    var events: [SimulatedResetEvent] { lock.withLock { stored } }
}
