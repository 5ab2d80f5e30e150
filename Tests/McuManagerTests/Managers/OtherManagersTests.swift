import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing

@Suite struct StatsAndSettingsTests {
    @Test func statistics() async throws {
        let rig = ManagerRig()
        let manager = StatsManager(client: rig.client)
        let names = try await manager.list()
        #expect(!names.isEmpty)
        let group = try await manager.read(group: names[0])
        #expect(!group.fields.isEmpty)
        let error = await #expect(throws: McuMgrError.self) { try await manager.read(group: "nope") }
        #expect(error?.kind == .device)
        // Zephyr answers an unknown statistics group with INVALID_STAT_NAME (measured on native_sim_udp 4.4.0).
        #expect(error?.message.contains("INVALID_STAT_NAME") == true)
    }

    @Test func settingsLifecycle() async throws {
        let rig = ManagerRig()
        let manager = SettingsManager(client: rig.client)
        #expect(try await manager.read(name: "app/name") == Data("zephyr-sim".utf8))
        try await manager.write(name: "app/colour", value: Data([1, 2, 3]))
        #expect(try await manager.read(name: "app/colour", maxSize: 16) == Data([1, 2, 3]))
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["name": "app/colour", "max_size": 16]))
        try await manager.commit()
        try await manager.save(name: "app")
        try await manager.save()
        try await manager.load()
        try await manager.delete(name: "app/colour")
        let error = await #expect(throws: McuMgrError.self) { try await manager.read(name: "app/colour") }
        #expect(error?.message.contains("KEY_NOT_FOUND") == true)
        #expect(rig.device.setting("app/colour") == nil)
    }
}

@Suite struct MynewtGroupsTests {
    @Test func logGroup() async throws {
        let rig = ManagerRig()
        let manager = LogManager(client: rig.client)
        #expect(try await manager.logsList().count == 1)
        #expect(!(try await manager.levelList()).isEmpty)
        #expect(!(try await manager.moduleList()).isEmpty)
        _ = try await manager.show()
        try await manager.clear()
        let shown = try await manager.show(index: 0)
        #expect(shown.logs != nil)
    }

    @Test func runTestsAndCrash() async throws {
        let rig = ManagerRig()
        let run = RunTestManager(client: rig.client)
        let tests = try await run.list()
        #expect(tests.contains("selftest"))
        try await run.test(name: "selftest", token: "t1")
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["testname": "selftest", "token": "t1"]))
        let entries = try await LogManager(client: rig.client).show().logs?.first?.entries ?? []
        #expect(entries.contains { $0.text?.contains("selftest passed t1") == true })
        // The device faults before it answers (Mynewt's crash test): a timeout, one request, one reboot.
        let crashing = ManagerRig(device: rig.device, timeout: .milliseconds(500))
        let error = await #expect(throws: McuMgrError.self) { try await CrashManager(client: crashing.client).test(.divideByZero) }
        #expect(error?.kind == .timeout)
        #expect(crashing.tap.sent.map(smpBody) == [.textMap(["t": "div0"])])
        #expect(rig.device.resetCount == 1)
    }
}

@Suite struct ShellEnumerationBasicTests {
    @Test func shellExecute() async throws {
        let rig = ManagerRig()
        let manager = ShellManager(client: rig.client)
        let result = try await manager.execute(["echo", "hi", "there"])
        #expect(result.output == "hi there\n")
        #expect(result.returnCode == 0)
        let missing = try await manager.execute(command: "frobnicate now")
        #expect(missing.returnCode == -8)
        let error = await #expect(throws: McuMgrError.self) { try await manager.execute([""]) }
        #expect(error?.message.contains("EMPTY_COMMAND") == true)
    }

    @Test func shellLegacyReturnCodeIsNotAnError() async throws {
        let rig = ManagerRig()
        rig.tap.rule.withValue { rule in
            rule = { packet in
                packet.header.group == .shell ? .reply(.textMap(["o": "boom\n", "rc": 3])) : .forward(packet.bytes)
            }
        }
        let result = try await ShellManager(client: rig.client).execute(["boom"])
        #expect(result == ShellExecuteResponse(output: "boom\n", returnCode: 3))
    }

    @Test func enumeration() async throws {
        let rig = ManagerRig()
        let manager = EnumerationManager(client: rig.client)
        let count = try await manager.count()
        let groups = try await manager.list()
        #expect(groups.count == count)
        #expect(groups.contains(.image))
        let first = try await manager.single(index: 0)
        #expect(first.group == groups[0])
        #expect(!first.isLast)
        let last = try await manager.single(index: count - 1)
        #expect(last.isLast)
        let error = await #expect(throws: McuMgrError.self) { try await manager.single(index: count + 5) }
        #expect(error?.message.contains("INDEX_TOO_LARGE") == true)
        let details = try await manager.details(groups: [.os, .fileSystem])
        #expect(details.map(\.group) == [.os, .fileSystem])
        #expect(details.first?.name != nil)
        #expect(try await manager.details().count == count)
    }

    @Test func basicEraseStorage() async throws {
        let rig = ManagerRig()
        try await BasicManager(client: rig.client).eraseStorage()
        #expect(rig.tap.sent.last?.header.group == .zephyrBasic)
    }
}

/// A user-defined request in a vendor group, as the `McuMgrCustomRequest` documentation shows.
struct SensorReadRequest: McuMgrRequest {
    static var group: McuMgrGroup { McuMgrGroup(64) }
    static var command: McuMgrCommand { McuMgrCommand(0) }
    static var operation: SMPOperation { .read }
    static var operationName: String { "sensor read" }
    struct Response: Decodable, Sendable { var celsius: Double }
    var channel: Int
}

@Suite struct CustomGroupTests {
    @Test func unknownGroupIsReportedAsNotSupported() async throws {
        let rig = ManagerRig()
        let error = await #expect(throws: McuMgrError.self) {
            _ = try await rig.client.send(SensorReadRequest(channel: 2))
        }
        #expect(error?.kind == .device)
        #expect(error?.returnCode == .notSupported)
        #expect(error?.message.contains("sensor read") == true)
        let request = try #require(rig.tap.sent.last)
        #expect(request.header.group == McuMgrGroup(64))
        #expect(smpBody(request) == .textMap(["channel": 2]))
    }

    @Test func customGroupAnswerDecodes() async throws {
        let rig = ManagerRig()
        rig.tap.rule.withValue { rule in
            rule = { packet in
                packet.header.group == McuMgrGroup(64) ? .reply(.textMap(["celsius": .double(21.5)])) : .forward(packet.bytes)
            }
        }
        let reading = try await rig.client.send(SensorReadRequest(channel: 1))
        #expect(reading.celsius == 21.5)
    }
}

@Suite struct ResponseDecodingTests {
    @Test func memoryPoolsAtTopLevelOrUnderMpools() throws {
        let pool: CBOR = .textMap(["blksiz": 16, "nblks": 8, "nfree": 3, "min": 1])
        let topLevel = try CBORDecoder().decode(MemoryPoolStatisticsResponse.self, from: .textMap(["pool0": pool]))
        let wrapped = try CBORDecoder().decode(
            MemoryPoolStatisticsResponse.self, from: .textMap(["mpools": .textMap(["pool0": pool])]))
        #expect(topLevel == wrapped)
        #expect(topLevel.pools["pool0"]?.freeCount == 3)
    }

    @Test func imageListToleratesMissingKeys() throws {
        let list = try CBORDecoder().decode(
            McuMgrImageStateResponse.self,
            from: .textMap(["images": [.textMap(["slot": 1, "version": "1.2.3", "pending": true])]]))
        let slot = try #require(list.images.first)
        #expect(slot.image == 0)
        #expect(slot.slot == 1)
        #expect(slot.pending)
        #expect(!slot.active && !slot.confirmed && !slot.bootable && !slot.permanent)
        #expect(slot.hash == nil)
        #expect(list.splitStatus == nil)
        #expect(try CBORDecoder().decode(McuMgrImageStateResponse.self, from: .map([])).images.isEmpty)
    }

    @Test func shellResponseReadsRetOrRc() throws {
        let modern = try CBORDecoder().decode(ShellExecuteResponse.self, from: .textMap(["o": "x", "ret": -2]))
        let legacy = try CBORDecoder().decode(ShellExecuteResponse.self, from: .textMap(["o": "x", "rc": 4]))
        #expect(modern.returnCode == -2)
        #expect(legacy.returnCode == 4)
    }

    @Test func requestsUseProtocolKeys() throws {
        let first = ImageUploadTarget(image: 1, sha: Data(repeating: 7, count: 32)).request(
            offset: 0, data: Data([1, 2]), totalSize: 100)
        let encoded = try CBOR(decoding: CBOREncoder().encode(first))
        #expect(encoded["image"] == 1)
        #expect(encoded["len"] == 100)
        #expect(encoded["off"] == 0)
        #expect(encoded["sha"]?.byteString?.count == 32)
        #expect(encoded["data"] == .bytes([1, 2]))
        let zero = try CBOR(decoding: CBOREncoder().encode(ImageUploadTarget(image: 0, sha: nil).request(
            offset: 0, data: Data(), totalSize: 5)))
        #expect(zero["image"] == nil)
        let next = try CBOR(decoding: CBOREncoder().encode(
            ImageUploadTarget(image: 1, sha: Data([1])).request(offset: 64, data: Data([9]), totalSize: 100)))
        #expect(next["len"] == nil && next["sha"] == nil && next["image"] == nil)
        let hash = try CBOR(decoding: CBOREncoder().encode(FileHashRequest(name: "/a", type: "crc32", offset: 2, length: 3)))
        #expect(hash == .textMap(["name": "/a", "type": "crc32", "off": 2, "len": 3]))
    }
}
