import Foundation
import McuManager
import Testing

@Suite struct DeviceParametersMemoryTests {
    static func memory() throws -> (DeviceParametersMemory, URL) {
        let directory = try makeManagerTestDirectory()
        return (DeviceParametersMemory(file: directory.appendingPathComponent("smp/device-params.json")), directory)
    }

    @Test func remembersBuffersAndUnfinishedUploadsPerDevice() throws {
        let (memory, directory) = try Self.memory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(!memory.knows("udp:a"))
        #expect(memory.recall("udp:a") == nil)
        memory.remember(.init(bufferSize: 2048, bufferCount: 2), for: "udp:a", now: 1000)
        #expect(memory.knows("udp:a", now: 1000))
        #expect(memory.recall("udp:a", now: 1000) == .init(bufferSize: 2048, bufferCount: 2))
        #expect(memory.recall("udp:b", now: 1000) == nil)

        memory.beginUpload(of: "/lfs1/x.bin", bytes: 10, to: "udp:a", now: 1001)
        #expect(memory.hasUnfinishedUpload(of: "/lfs1/x.bin", to: "udp:a", now: 1001))
        #expect(!memory.hasUnfinishedUpload(of: "/lfs1/y.bin", to: "udp:a", now: 1001))
        // Buffers asked again keep the unfinished upload; forgetting the buffers keeps it too.
        memory.remember(.init(bufferSize: 1024, bufferCount: 4), for: "udp:a", now: 1002)
        #expect(memory.hasUnfinishedUpload(of: "/lfs1/x.bin", to: "udp:a", now: 1002))
        memory.forgetParameters(of: "udp:a")
        #expect(memory.recall("udp:a", now: 1002) == nil)
        #expect(memory.hasUnfinishedUpload(of: "/lfs1/x.bin", to: "udp:a", now: 1002))
        memory.finishUpload(of: "/lfs1/x.bin", to: "udp:a", now: 1003)
        #expect(!memory.hasUnfinishedUpload(of: "/lfs1/x.bin", to: "udp:a", now: 1003))
        #expect(memory.knows("udp:a", now: 1003))
    }

    @Test func entriesExpireAfterADayAndOddOnesAreIgnored() throws {
        let (memory, directory) = try Self.memory()
        defer { try? FileManager.default.removeItem(at: directory) }
        memory.remember(.init(bufferSize: 384, bufferCount: 4), for: "serial:/dev/ttyACM0", now: 0)
        #expect(memory.recall("serial:/dev/ttyACM0", now: 24 * 3600 - 1) != nil)
        #expect(memory.recall("serial:/dev/ttyACM0", now: 24 * 3600) == nil)
        #expect(!memory.knows("serial:/dev/ttyACM0", now: 24 * 3600))

        try Data(#"{"udp:a": {"buf": "big", "count": 4, "seen": 10}, "udp:b": {"buf": 4, "count": 4, "seen": 10}, "udp:c": 7}"#.utf8)
            .write(to: memory.file)
        #expect(memory.recall("udp:a", now: 11) == nil)
        #expect(memory.knows("udp:a", now: 11))
        #expect(memory.recall("udp:b", now: 11) == nil)  // smaller than an SMP header
        #expect(!memory.knows("udp:c", now: 11))
        try Data("not json".utf8).write(to: memory.file)
        #expect(!memory.knows("udp:a", now: 11))
    }
}
