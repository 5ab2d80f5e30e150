import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing

@Suite struct DefaultManagerTests {
    @Test func echoReturnsTheText() async throws {
        let rig = ManagerRig()
        let manager = DefaultManager(client: rig.client)
        #expect(try await manager.echo("hello") == "hello")
        let request = try #require(rig.tap.sent.last)
        #expect(smpBody(request) == .textMap(["d": "hello"]))
    }

    @Test func consoleEchoIsUnsupportedOnZephyr() async throws {
        let rig = ManagerRig()
        let error = await #expect(throws: McuMgrError.self) {
            try await DefaultManager(client: rig.client).consoleEcho(enabled: true)
        }
        #expect(error?.kind == .device)
        #expect(error?.returnCode == .notSupported)
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["echo": 1]))
    }

    @Test func taskAndMemoryPoolStatistics() async throws {
        let rig = ManagerRig()
        let manager = DefaultManager(client: rig.client)
        let tasks = try await manager.taskStats()
        #expect(!tasks.isEmpty)
        #expect(tasks.values.contains { $0.stackSize != nil })
        let pools = try await manager.memoryPoolStats()
        #expect(!pools.isEmpty)
        #expect(pools.values.allSatisfy { $0.blockSize != nil })
    }

    @Test func dateTimeRoundTripsInUTC() async throws {
        let rig = ManagerRig()
        let manager = DefaultManager(client: rig.client)
        let date = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
        let started = ContinuousClock.now
        try await manager.writeDatetime(date)
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["datetime": "2026-01-01T00:00:00"]))
        let read = try await manager.readDatetime()
        // The device's clock ran on from the date set for as long as the two requests took (however
        // slow the machine), read back in whole seconds.
        let elapsed = Double((ContinuousClock.now - started).components.seconds) + 1
        #expect(read.timeIntervalSince(date) >= -1 && read.timeIntervalSince(date) <= elapsed + 1, "\(read) after \(elapsed) s")
    }

    @Test func dateTimeFormatting() {
        #expect(McuMgrDateTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00")
        #expect(McuMgrDateTime.format(Date(timeIntervalSince1970: 1_700_000_123)) == "2023-11-14T22:15:23")
        #expect(McuMgrDateTime.parse("2023-11-14T22:15:23") == Date(timeIntervalSince1970: 1_700_000_123))
        let withMilliseconds = McuMgrDateTime.parse("2023-11-14T22:15:23.500+02:00")
        #expect(withMilliseconds.map { abs($0.timeIntervalSince1970 - 1_700_000_123.5) < 0.001 } == true)
        #expect(McuMgrDateTime.parse("garbage") == nil)
    }

    @Test func resetReboots() async throws {
        let rig = ManagerRig()
        try await DefaultManager(client: rig.client).reset()
        #expect(smpBody(try #require(rig.tap.sent.last)) == .map([]))
        #expect(rig.device.resetCount == 1)
        try await rig.waitForReboot()
        try await DefaultManager(client: rig.client).reset(force: true, bootMode: 1)
        #expect(smpBody(try #require(rig.tap.sent.last)) == .textMap(["force": true, "boot_mode": 1]))
    }

    @Test func parametersInfoAndBootloader() async throws {
        let rig = ManagerRig { $0.bufferSize = 1024; $0.bufferCount = 6 }
        let manager = DefaultManager(client: rig.client)
        let parameters = try await manager.mcuMgrParameters()
        #expect(parameters == McuMgrParametersResponse(bufferSize: 1024, bufferCount: 6))
        #expect(try await manager.applicationInfo(format: "sn") == "Zephyr zephyr-sim")
        #expect(try await manager.applicationInfo().hasPrefix("Zephyr"))
        #expect(try await manager.bootloaderName() == "MCUboot")
        #expect(try await manager.bootloaderMode() == .swapUsingScratch)
        let info = try await manager.bootloaderInfo(query: "mode")
        #expect(info.mode == BootloaderMode(1))
    }

    @Test func deviceErrorNamesTheGroupError() async throws {
        let rig = ManagerRig()
        let error = await #expect(throws: McuMgrError.self) {
            try await DefaultManager(client: rig.client).bootloaderInfo(query: "no-such-query")
        }
        #expect(error?.kind == .device)
        #expect(error?.groupError == McuMgrGroupError(group: .os, rc: 3))
        #expect(error?.message.contains("QUERY_YIELDS_NO_ANSWER") == true)
        let formatError = await #expect(throws: McuMgrError.self) {
            try await DefaultManager(client: rig.client).applicationInfo(format: "Q")
        }
        #expect(formatError?.message.contains("INVALID_FORMAT") == true)
    }

    @Test func bootloaderModeNames() {
        #expect(BootloaderMode.directXIPWithRevert.rawValue == 5)
        #expect(BootloaderMode(42).name == "mode 42")
        #expect(BootloaderMode.firmwareLoader.description == "firmware loader (7)")
    }
}
