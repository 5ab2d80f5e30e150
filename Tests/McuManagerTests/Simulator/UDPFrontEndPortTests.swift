import McuMgrCore
import NIOCore
import Testing

@testable import McuMgrSimulator

/// Many UDP front ends in one process (`smp-sim --count N --udp HOST:0`): each gets a port of its own.
@Suite("UDP front ends on port 0")
struct UDPFrontEndPortTests {
    @Test("port 0 binds without SO_REUSEADDR, a port asked for by number with it")
    func reuseAddressOnlyForFixedPorts() async throws {
        let free = UDPFrontEnd(device: SimulatedDevice(), host: "127.0.0.1", port: 0)
        let address = try await free.start()
        let port = try #require(address.port)
        let freeOption = try await free.boundChannel?.getOption(.socketOption(.so_reuseaddr)).get()
        #expect(freeOption == 0)
        await free.stop()
        // The port just released, asked for by number: SO_REUSEADDR as before.
        let fixed = UDPFrontEnd(device: SimulatedDevice(), host: "127.0.0.1", port: port)
        try await fixed.start()
        let fixedOption = try await fixed.boundChannel?.getOption(.socketOption(.so_reuseaddr)).get()
        #expect(fixedOption != 0)
        await fixed.stop()
    }

    @Test("300 devices on port 0 get 300 different ports")
    func distinctPorts() async throws {
        // With SO_REUSEADDR on every socket Linux handed out duplicates (about 1 in 70 sockets of 500).
        var frontEnds: [UDPFrontEnd] = []
        var ports: [Int] = []
        for _ in 0..<300 {
            let frontEnd = UDPFrontEnd(device: SimulatedDevice(), host: "127.0.0.1", port: 0)
            let address = try await frontEnd.start()
            frontEnds.append(frontEnd)
            ports.append(try #require(address.port))
        }
        for frontEnd in frontEnds { await frontEnd.stop() }
        #expect(Set(ports).count == ports.count, "duplicated ports: \(ports.filter { p in ports.filter { $0 == p }.count > 1 })")
    }
}
