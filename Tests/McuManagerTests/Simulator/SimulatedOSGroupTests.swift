import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: OS group")
struct SimulatedOSGroupTests {
    @Test func echoReadAndWrite() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .write, group: .os, command: 0, body: ["d": "hi"])["r"]?.string == "hi")
        #expect(try exchange(device, .read, group: .os, command: 0, body: ["d": "ho"])["r"]?.string == "ho")
    }

    @Test func taskStatisticsHaveThreadsAndFitSmallBuffers() throws {
        let device = SimulatedDevice()
        let tasks = try #require(try exchange(device, .read, group: .os, command: 2)["tasks"]?.mapEntries)
        #expect(tasks.count >= 4)
        let main = try #require(tasks.first { $0.key == "main" }?.value)
        for key in ["prio", "tid", "state", "stkuse", "stksiz"] { #expect(main[key] != nil, "\(key)") }
        #expect(main["cswcnt"] == nil)

        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 128
        let small = SimulatedDevice(configuration: configuration)
        let trimmed = try exchange(small, .read, group: .os, command: 2)
        #expect(trimmed.isSuccess)
        #expect((trimmed["tasks"]?.mapEntries?.count ?? 0) < tasks.count)
    }

    @Test func memoryPoolStatistics() throws {
        let device = SimulatedDevice()
        let heap = try #require(try exchange(device, .read, group: .os, command: 3)["mpools"]?["heap"])
        #expect(heap["blksiz"] != nil && heap["nblks"] != nil && heap["nfree"] != nil && heap["min"] != nil)
    }

    @Test func dateTimeSetThenGetAdvancesWithNow() throws {
        let device = SimulatedDevice()
        let set = try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2024-02-28T23:59:30"], now: SMPInstant(nanoseconds: 1_000_000_000))
        #expect(set.isSuccess)
        let get = try exchange(device, .read, group: .os, command: 4, now: SMPInstant(nanoseconds: 46_000_000_000))
        #expect(get["datetime"]?.string == "2024-02-29T00:00:15")
        // A zone and fraction are accepted and ignored.
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2030-01-01T00:00:00+02:00"]).isSuccess)
        #expect(try exchange(device, .read, group: .os, command: 4)["datetime"]?.string == "2030-01-01T00:00:00")
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2031-02-03 04:05:06.789"]).isSuccess)
        #expect(try exchange(device, .read, group: .os, command: 4)["datetime"]?.string == "2031-02-03T04:05:06")
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2030-01-01T00:00:00.123+02:00"]).rc == 3)
    }

    @Test func dateTimeRejectsBadValues() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2024-13-01T00:00:00"]).errRC == 5)
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2024-xx-01T00:00:00"]).errRC == 5)
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": "2024-01-01"]).rc == 3)
        #expect(try exchange(device, .write, group: .os, command: 4, body: ["datetime": 5]).rc == 3)
    }

    @Test func initialUnixTimeIsUsed() throws {
        var configuration = SimulatorConfiguration()
        configuration.initialUnixTime = 1_700_000_000
        let device = SimulatedDevice(configuration: configuration)
        #expect(try exchange(device, .read, group: .os, command: 4)["datetime"]?.string == "2023-11-14T22:13:20")
    }

    @Test func resetAnswersThenReboots() throws {
        let device = SimulatedDevice()
        let events = EventBox()
        device.setResetObserver { events.append($0) }
        let response = try exchange(device, .write, group: .os, command: 5, body: ["force": true, "boot_mode": 0], now: SMPInstant(nanoseconds: 5_000_000_000))
        #expect(response.isSuccess)
        #expect(device.resetCount == 1)
        let until = try #require(device.rebootingUntil)
        #expect(until == SMPInstant(nanoseconds: 5_300_000_000))
        #expect(device.isRebooting(at: SMPInstant(nanoseconds: 5_100_000_000)))
        #expect(!device.isRebooting(at: SMPInstant(nanoseconds: 5_300_000_000)))
        #expect(events.events.count == 1)
        #expect(events.events.first?.reason == .resetCommand)
        #expect(events.events.first?.bootMode == 0)
        // `force` as an int is ignored, not an error.
        #expect(try exchange(device, .write, group: .os, command: 5, body: ["force": 1]).isSuccess)
        #expect(device.resetCount == 2)
    }

    @Test func parameters() throws {
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 512
        configuration.bufferCount = 2
        let response = try exchange(SimulatedDevice(configuration: configuration), .read, group: .os, command: 6)
        #expect(response["buf_size"]?.int == 512)
        #expect(response["buf_count"]?.int == 2)
    }

    @Test func osInfoFormats() throws {
        var configuration = SimulatorConfiguration()
        configuration.hostname = "node1"
        configuration.boardName = "board@1"
        let device = SimulatedDevice(configuration: configuration)
        #expect(try exchange(device, .read, group: .os, command: 7)["output"]?.string == "Zephyr")
        // Fixed order whatever the letter order.
        #expect(try exchange(device, .read, group: .os, command: 7, body: ["format": "in"])["output"]?.string == "node1 board@1")
        let all = try #require(try exchange(device, .read, group: .os, command: 7, body: ["format": "a"])["output"]?.string)
        #expect(all.hasPrefix("Zephyr node1 "))
        #expect(all.hasSuffix("board@1 Zephyr"))
        let bad = try exchange(device, .read, group: .os, command: 7, body: ["format": "sX"])
        #expect(bad.errGroup == 0 && bad.errRC == 2)
    }

    @Test func bootloaderInfo() throws {
        let device = SimulatedDevice()
        #expect(try exchange(device, .read, group: .os, command: 8)["bootloader"]?.string == "MCUboot")
        let mode = try exchange(device, .read, group: .os, command: 8, body: ["query": "mode"])
        #expect(mode["mode"]?.int == 1)
        #expect(mode["no-downgrade"] == nil)
        #expect(try exchange(device, .read, group: .os, command: 8, body: ["query": "what"]).errRC == 3)
        #expect(try exchange(device, .read, group: .os, command: 8, body: ["query": "what"], version: .v1).rc == 5)

        var configuration = SimulatorConfiguration()
        configuration.bootloaderMode = 3
        configuration.noDowngrade = true
        let other = try exchange(SimulatedDevice(configuration: configuration), .read, group: .os, command: 8, body: ["query": "mode"])
        #expect(other["mode"]?.int == 3)
        #expect(other["no-downgrade"] == true)
    }
}

final class EventBox: @unchecked Sendable {
    private var storage: [SimulatedResetEvent] = []
    private let lock = NSLockLike()
    func append(_ event: SimulatedResetEvent) { lock.with { storage.append(event) } }
    var events: [SimulatedResetEvent] { lock.with { storage } }
}

import Foundation

struct NSLockLike: @unchecked Sendable {
    let lock = NSLock()
    func with<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}
