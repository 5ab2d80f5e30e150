import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: stats, settings, log, crash, run, shell, enumeration, basic")
struct SimulatedOtherGroupsTests {
    @Test func statsListAndRead() throws {
        let device = SimulatedDevice()
        let names = try #require(try exchange(device, .read, group: .stats, command: 1)["stat_list"]?.arrayValue)
        #expect(names.contains("smp_svr_stats") && names.contains("ble"))
        let early = try exchange(device, .read, group: .stats, command: 0, body: ["name": "smp_svr_stats"], now: SMPInstant(nanoseconds: 1_000_000_000))
        #expect(early["name"]?.string == "smp_svr_stats")
        let late = try exchange(device, .read, group: .stats, command: 0, body: ["name": "smp_svr_stats"], now: SMPInstant(nanoseconds: 11_000_000_000))
        let t0 = try #require(early["fields"]?["ticks"]?.int)
        let t1 = try #require(late["fields"]?["ticks"]?.int)
        #expect(t1 - t0 == 10)
        let a = try #require(try exchange(device, .read, group: .stats, command: 0, body: ["name": "smp"])["fields"]?["requests"]?.int)
        let b = try #require(try exchange(device, .read, group: .stats, command: 0, body: ["name": "smp"])["fields"]?["requests"]?.int)
        #expect(b == a + 1)
        let unknown = try exchange(device, .read, group: .stats, command: 0, body: ["name": "nope"])
        // INVALID_STAT_NAME, ENOENT in v1 (native_sim_udp 4.4.0).
        #expect(unknown.errGroup == 2 && unknown.errRC == 3)
        #expect(try exchange(device, .read, group: .stats, command: 0, body: ["name": "nope"], version: .v1).rc == 5)
        #expect(try exchange(device, .read, group: .stats, command: 0).rc == 3)
    }

    @Test func settingsReadWriteDeleteSaveLoad() throws {
        let device = SimulatedDevice()
        func s(_ op: SMPOperation, _ command: UInt8, _ body: CBOR = [:]) throws -> SimResponse {
            try exchange(device, op, group: .settings, command: command, body: body)
        }
        #expect(try s(.read, 0, ["name": "app/name"])["val"]?.byteString == Array("zephyr-sim".utf8))
        #expect(try s(.read, 0, ["name": "app/name", "max_size": 3])["val"]?.byteString == Array("zep".utf8))
        let limited = try s(.read, 0, ["name": "app/name", "max_size": 1000])
        #expect(limited["max_size"]?.int == 256)
        #expect(try s(.read, 0, ["name": "missing"]).errRC == 3)
        #expect(try s(.read, 0, ["name": "missing"]).errGroup == 3)
        #expect(try s(.write, 0, ["name": "k/v", "val": .bytes([1, 2, 3])]).isSuccess)
        #expect(try s(.read, 0, ["name": "k/v"])["val"]?.byteString == [1, 2, 3])
        #expect(try s(.write, 0, ["name": "k/v", "val": "text"]).rc == 3)
        #expect(try s(.write, 0, ["name": .text(String(repeating: "k", count: 65)), "val": .bytes([1])]).errRC == 2)
        #expect(try s(.write, 2).isSuccess)
        // Unsaved values are lost on reboot; saved ones survive.
        device.powerCycle(now: .zero)
        #expect(try s(.read, 0, ["name": "k/v"]).errRC == 3)
        #expect(try s(.write, 0, ["name": "k/v", "val": .bytes([4])]).isSuccess)
        #expect(try s(.write, 3, ["name": "k"]).isSuccess)
        device.powerCycle(now: .zero)
        #expect(try s(.read, 0, ["name": "k/v"])["val"]?.byteString == [4])
        // Load restores persisted values over runtime ones.
        #expect(try s(.write, 0, ["name": "k/v", "val": .bytes([5])]).isSuccess)
        #expect(try s(.read, 3).isSuccess)
        #expect(try s(.read, 0, ["name": "k/v"])["val"]?.byteString == [4])
        #expect(try s(.write, 1, ["name": "k/v"]).isSuccess)
        #expect(try s(.read, 0, ["name": "k/v"]).errRC == 3)
    }

    @Test func zephyrBasicEraseClearsSettings() throws {
        let device = SimulatedDevice()
        #expect(device.setting("app/name") != nil)
        #expect(try exchange(device, .write, group: .zephyrBasic, command: 0).isSuccess)
        #expect(device.setting("app/name") == nil)
        #expect(try exchange(device, .read, group: .settings, command: 0, body: ["name": "app/name"]).errRC == 3)
    }

    @Test func logGroup() throws {
        let device = SimulatedDevice()
        let show = try exchange(device, .read, group: .log, command: 0)
        let logs = try #require(show["logs"]?.arrayValue)
        #expect(logs.first?["name"]?.string == "reboot_log")
        #expect((logs.first?["entries"]?.arrayValue?.count ?? 0) >= 1)
        #expect(show["next_index"] != nil)
        #expect(try exchange(device, .read, group: .log, command: 5)["log_list"] == ["reboot_log"])
        #expect(try exchange(device, .read, group: .log, command: 4)["level_map"]?["ERROR"]?.int == 3)
        #expect(try exchange(device, .read, group: .log, command: 0, body: ["log_name": "nope"]).rc == 5)
        #expect(try exchange(device, .write, group: .log, command: 1).isSuccess)
        let cleared = try exchange(device, .read, group: .log, command: 0)["logs"]?.arrayValue?.first?["entries"]?.arrayValue
        #expect(cleared?.isEmpty == true)
    }

    /// Mynewt's crash test faults inside the handler: no answer, and the device reboots at once.
    @Test func crashRebootsWithoutAnswering() throws {
        let device = SimulatedDevice()
        #expect(device.handle(smpRequest(.write, group: .crash, command: 0, body: ["t": "div0"]), now: .zero) == nil)
        #expect(device.resetCount == 1)
        #expect(device.isRebooting(at: .zero))
        let back = SMPInstant.zero + device.configuration.bootTime
        #expect(try exchange(device, .write, group: .crash, command: 0, body: ["t": "nothing"], now: back).rc == 3)
        #expect(device.resetCount == 1)
    }

    @Test func runTests() throws {
        let device = SimulatedDevice()
        let list = try #require(try exchange(device, .read, group: .run, command: 1)["run_list"]?.arrayValue)
        #expect(!list.isEmpty)
        #expect(try exchange(device, .write, group: .run, command: 0, body: ["testname": list[0], "token": "t1"]).isSuccess)
        #expect(try exchange(device, .write, group: .run, command: 0, body: ["testname": "bogus"]).rc == 5)
    }

    @Test func shellCommands() throws {
        let device = SimulatedDevice()
        func run(_ argv: [CBOR]) throws -> SimResponse { try exchange(device, .write, group: .shell, command: 0, body: ["argv": .array(argv)]) }
        let version = try run(["kernel", "version"])
        #expect(version["o"]?.string == "Zephyr version 3.7.0\n")
        #expect(version["ret"]?.int == 0)
        #expect(try run(["echo", "a", "b"])["o"]?.string == "a b\n")
        #expect(try run(["kernel", "uptime"])["o"]?.string?.hasPrefix("Uptime: ") == true)
        #expect(try run(["help"])["ret"]?.int == 0)
        // `kernel sleep ms` as Zephyr 4.4 answers it; the device is busy for that long before it answers.
        #expect(try run(["kernel", "sleep", "20"])["ret"]?.int == 0)
        let sleep = SimulatedDevice().responsesAndBusyTime(
            to: smpRequest(.write, group: .shell, command: 0, body: ["argv": ["kernel", "sleep", "1500"]]))
        #expect(sleep.busy == .milliseconds(1500) && sleep.responses.count == 1)
        #expect(try run(["kernel", "sleep"])["o"]?.string == "sleep: wrong parameter count\nsleep - ms\n")
        #expect(try run(["kernel", "sleep"])["ret"]?.int == -22)
        #expect(try run(["kernel", "sleep", "-5"])["o"]?.string == "Unable to parse input (err -22)\n")
        #expect(SimulatedDevice().responsesAndBusyTime(
            to: smpRequest(.write, group: .shell, command: 0, body: ["argv": ["kernel", "version"]])).busy == .zero)
        let ls = try #require(try run(["fs", "ls", "/lfs1"])["o"]?.string)
        #expect(ls.contains("hello.txt"))
        let unknown = try run(["frobnicate"])
        #expect(unknown["ret"]?.int != 0)
        #expect(unknown["o"]?.string?.contains("command not found") == true)
        #expect(try run([]).errRC == 3)
        #expect(try run([]).errGroup == 9)
        // No argv at all is a malformed request (rc 3), measured on the shared mps2_an385 app.
        #expect(try exchange(device, .write, group: .shell, command: 0).rc == 3)
        #expect(try run([1]).rc == 3)
        // Output never exceeds the buffer.
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 64
        let small = SimulatedDevice(configuration: configuration)
        let help = try exchange(small, .write, group: .shell, command: 0, body: ["argv": ["help"]])
        #expect(help.raw.count <= 64)
        #expect(help["ret"]?.int == 0)
    }

    @Test func enumeration() throws {
        let device = SimulatedDevice()
        let count = try #require(try exchange(device, .read, group: .enumeration, command: 0)["count"]?.int)
        let groups = try #require(try exchange(device, .read, group: .enumeration, command: 1)["groups"]?.arrayValue)
        #expect(groups.count == count)
        #expect(groups.contains(0) && groups.contains(1) && groups.contains(8) && groups.contains(63))
        let first = try exchange(device, .read, group: .enumeration, command: 2)
        #expect(first["group"] == groups[0])
        #expect(first["end"] == nil)
        let last = try exchange(device, .read, group: .enumeration, command: 2, body: ["index": .unsigned(UInt64(count - 1))])
        #expect(last["group"] == groups[count - 1])
        #expect(last["end"] == true)
        #expect(try exchange(device, .read, group: .enumeration, command: 2, body: ["index": .unsigned(UInt64(count))]).errRC == 4)
        let details = try #require(try exchange(device, .read, group: .enumeration, command: 3)["groups"]?.arrayValue)
        #expect(details.count == count)
        #expect(details[0]["name"]?.string == "os mgmt")
        #expect(details[0]["handlers"]?.int == 9)
        let some = try #require(try exchange(device, .read, group: .enumeration, command: 3, body: ["groups": [1, 8]])["groups"]?.arrayValue)
        #expect(some.map { $0["group"]?.int } == [1, 8])
    }
}
