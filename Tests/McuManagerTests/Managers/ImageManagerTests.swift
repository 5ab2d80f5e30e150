import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing

@Suite struct ImageManagerTests {
    static func image(kib: Int = 300, version: McuMgrImageVersion = McuMgrImageVersion(major: 2, minor: 1, revision: 0)) -> [UInt8] {
        SimulatedMCUbootImage.build(version: version, body: managerTestBytes(kib * 1024 - 72))
    }

    /// Offsets of the image upload chunks the client sent.
    static func uploadOffsets(_ tap: ManagerTapTransport) -> [Int] {
        tap.sent.filter { $0.header.group == .image && $0.header.command == McuMgrCommand.Image.upload }
            .compactMap { smpBody($0)["off"]?.int }
    }

    @Test func listAndSlotInfo() async throws {
        let rig = ManagerRig()
        let manager = ImageManager(client: rig.client)
        let list = try await manager.list()
        #expect(list.images.count == 1)
        let primary = try #require(list.images.first)
        #expect(primary.active && primary.confirmed && primary.slot == 0 && primary.image == 0)
        #expect(primary.version == "1.0.0")
        #expect(primary.hash?.count == 32)
        let info = try await manager.slotInfo()
        #expect(info.images.first?.slots.count == 2)
        #expect(info.images.first?.maximumImageSize == 0x76000)
    }

    @Test func uploadTestResetMakesTheImageActive() async throws {
        let rig = ManagerRig()
        let manager = ImageManager(client: rig.client)
        let file = Self.image()
        let progress = ManagerTestBox<[TransferProgress]>([])
        let result = try await manager.upload(data: Data(file)) { p in progress.withValue { $0.append(p) } }
        #expect(result.totalBytes == file.count)
        #expect(result.resumedFrom == 0)
        #expect(result.pipelineDepth == 3)  // buf_count 4 - 1

        // First chunk: len, sha of the whole file, no image key; chunks fit buf_size; pipelined.
        let uploads = rig.tap.sent.filter { $0.header.group == .image && $0.header.command.rawValue == 1 }
        let first = smpBody(try #require(uploads.first))
        #expect(first["len"]?.int == file.count)
        #expect(first["sha"]?.byteString == Array(SHA256.hash(data: file)))
        #expect(first["image"] == nil)
        #expect(uploads.dropFirst().allSatisfy { smpBody($0)["len"] == nil && smpBody($0)["sha"] == nil })
        #expect(uploads.allSatisfy { $0.bytes.count <= 2048 })
        #expect(uploads.dropFirst().contains { $0.bytes.count > 2000 })  // chunks use the buffer
        #expect(rig.tap.maximumInFlight > 1)
        let reports = progress.current
        #expect(reports.last?.bytesTransferred == file.count)
        #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.bytesTransferred < $1.bytesTransferred })

        let hash = try #require(SimulatedMCUbootImage.imageHash(of: file))
        let listed = try await manager.list()
        let secondary = try #require(listed.images.first { $0.slot == 1 })
        #expect(secondary.hash == Data(hash))
        #expect(secondary.version == "2.1.0")

        let afterTest = try await manager.test(hash: Data(hash))
        #expect(afterTest.images.first { $0.slot == 1 }?.pending == true)
        try await DefaultManager(client: rig.client).reset()
        try await rig.waitForReboot()
        let booted = try await manager.list()
        let active = try #require(booted.images.first { $0.active })
        #expect(active.hash == Data(hash))
        #expect(active.version == "2.1.0")
        #expect(!active.confirmed)

        let confirmed = try await manager.confirm()
        #expect(confirmed.images.first { $0.active }?.confirmed == true)
    }

    @Test func uploadFromFileWithImageNumberAndConfiguration() async throws {
        let rig = ManagerRig { $0.imageCount = 2 }
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = Self.image(kib: 40)
        let url = directory.appendingPathComponent("app.bin")
        try Data(file).write(to: url)
        let configuration = UploadConfiguration(pipelineDepth: 2, byteAlignment: 8, maximumChunkSize: 500)
        let result = try await ImageManager(client: rig.client).upload(file: url, image: 1, configuration: configuration)
        #expect(result.pipelineDepth == 2)
        #expect(result.chunkSize == 496)
        let uploads = rig.tap.sent.filter { $0.header.group == .image && $0.header.command.rawValue == 1 }
        #expect(smpBody(uploads[0])["image"] == 1)
        let lengths = uploads.compactMap { smpBody($0)["data"]?.byteString?.count }
        #expect(lengths.dropLast().allSatisfy { $0 % 8 == 0 && $0 <= 500 })
        #expect(rig.tap.maximumInFlight <= 2)
        #expect(rig.device.imageSlots.contains { $0.image == 1 && $0.slot == 1 && $0.bytes == file })
    }

    @Test func uploadResumesAfterCancellation() async throws {
        let rig = ManagerRig()
        let manager = ImageManager(client: rig.client)
        let file = Data(Self.image())
        let canceller = ManagerTestCanceller()
        let task = Task {
            try await manager.upload(data: file) { progress in
                if progress.bytesTransferred > file.count / 2 { canceller.cancel() }
            }
        }
        canceller.attach(task)
        let interrupted = await task.result
        let error = try #require(interrupted.managerFailure as? McuMgrError)
        #expect(error.kind == .cancelled)
        let firstRun = Self.uploadOffsets(rig.tap)
        #expect((firstRun.max() ?? 0) > file.count / 3)
        #expect((firstRun.max() ?? 0) < file.count)

        rig.tap.resetCounters()
        let progress = ManagerTestBox<[Int]>([])
        let result = try await manager.upload(data: file) { p in progress.withValue { $0.append(p.bytesTransferred) } }
        #expect(result.resumedFrom > file.count / 2)
        let offsets = Self.uploadOffsets(rig.tap)
        #expect(offsets.first == 0)
        // After the offset-0 probe, nothing below the resume point is sent again.
        #expect(offsets.dropFirst().allSatisfy { $0 >= result.resumedFrom })
        #expect((progress.current.first ?? 0) >= result.resumedFrom)
        #expect(rig.device.imageSlots.contains { $0.slot == 1 && $0.bytes == Array(file) })
    }

    @Test func busyDeviceIsRetried() async throws {
        let rig = ManagerRig()
        let busyAnswers = ManagerTestBox(0)
        rig.tap.rule.withValue { rule in
            rule = { packet in
                guard packet.header.group == .image, packet.header.command.rawValue == 1,
                    smpBody(packet)["off"]?.int ?? 0 > 0
                else { return .forward(packet.bytes) }
                let answerBusy = busyAnswers.withValue { count -> Bool in
                    count += 1
                    return count <= 2
                }
                return answerBusy ? .reply(.textMap(["rc": 10])) : .forward(packet.bytes)
            }
        }
        let file = Self.image(kib: 20)
        _ = try await ImageManager(client: rig.client).upload(data: Data(file))
        #expect(busyAnswers.current > 2)
        #expect(rig.device.imageSlots.contains { $0.slot == 1 && $0.bytes == file })
    }

    @Test func deviceWithoutParametersGetsStopAndWait() async throws {
        let rig = ManagerRig()
        rig.tap.rule.withValue { rule in
            rule = { packet in
                packet.header.group == .os && packet.header.command == McuMgrCommand.OS.mcuMgrParameters
                    ? .reply(.textMap(["rc": 8])) : .forward(packet.bytes)
            }
        }
        let result = try await ImageManager(client: rig.client).upload(data: Data(Self.image(kib: 16)))
        #expect(result.pipelineDepth == 1)
        #expect(rig.tap.maximumInFlight == 1)
    }

    @Test func imageErrorsAreDeviceErrors() async throws {
        let rig = ManagerRig()
        let manager = ImageManager(client: rig.client)
        let error = await #expect(throws: McuMgrError.self) { try await manager.test(hash: Data(repeating: 1, count: 32)) }
        #expect(error?.kind == .device)
        #expect(error?.groupError == McuMgrGroupError(group: .image, rc: 8))
        #expect(error?.message.contains("HASH_NOT_FOUND") == true)

        var bad = Self.image(kib: 4)
        bad[0] = 0
        let magic = await #expect(throws: McuMgrError.self) { try await manager.upload(data: Data(bad)) }
        #expect(magic?.message.contains("INVALID_IMAGE_HEADER_MAGIC") == true)

        let tooSmall = await #expect(throws: McuMgrError.self) { try await manager.upload(data: Data([1, 2, 3])) }
        #expect(tooSmall?.kind == .usage)
    }

    @Test func eraseSecondarySlot() async throws {
        let rig = ManagerRig()
        let manager = ImageManager(client: rig.client)
        _ = try await manager.upload(data: Data(Self.image(kib: 8)))
        #expect(rig.device.imageSlots.count == 2)
        try await manager.erase(slot: 1)
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["slot": 1]))
        #expect(rig.device.imageSlots.count == 1)
        try await manager.erase()
    }
}

extension Result {
    var managerFailure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
