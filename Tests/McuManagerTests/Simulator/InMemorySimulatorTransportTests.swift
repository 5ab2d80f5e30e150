import Foundation
import McuManager
import McuMgrCore
import Testing

@testable import McuMgrSimulator
import TestSupport

/// Collects transport events for assertions.
final class EventCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [McuMgrTransportEvent] = []

    func add(_ event: McuMgrTransportEvent) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }

    var packets: [[UInt8]] {
        lock.lock()
        defer { lock.unlock() }
        return events.compactMap { if case .packet(let p) = $0 { return p } else { return nil } }
    }

    var closed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return events.contains { if case .closed = $0 { return true } else { return false } }
    }

    /// Waits until `count` packets arrived or the time is up (generous: it only stops a hang).
    func waitForPackets(_ count: Int, timeout: Duration = .seconds(120)) async {
        await waitUntil(timeout: timeout, interval: .milliseconds(5)) { packets.count >= count }
    }
}

@Suite("In-memory simulator transport")
struct InMemorySimulatorTransportTests {
    @Test func deliversResponsesInOrderAsynchronously() async throws {
        let transport = InMemorySimulatorTransport()
        #expect(transport.linkLimits.maximumPacketSize == 2048)
        #expect(transport.linkLimits.session.window == 3)
        #expect(transport.linkLimits.window == 3)
        let events = EventCollector()
        try await transport.open { events.add($0) }
        for sequence in 0..<20 {
            try transport.send(smpRequest(.write, group: .os, command: 0, body: ["d": .text("\(sequence)")], sequence: UInt8(sequence)))
        }
        await events.waitForPackets(20)
        let packets = events.packets
        #expect(packets.count == 20)
        #expect(packets.map { $0[6] } == (0..<20).map { UInt8($0) })
        await transport.close()
        #expect(events.closed)
        #expect(throws: McuMgrError.self) { try transport.send(smpRequest(.read, group: .os, command: 6)) }
    }

    @Test func dropsEveryNthResponseAndCanGoSilent() async throws {
        let transport = InMemorySimulatorTransport(options: .init(latency: .milliseconds(2), dropEveryNthResponse: 3))
        let events = EventCollector()
        try await transport.open { events.add($0) }
        for sequence in 0..<9 { try transport.send(smpRequest(.read, group: .os, command: 6, sequence: UInt8(sequence))) }
        // Once the link has finished with all nine requests, no answer is still on its way.
        await waitUntil { transport.handledRequests == 9 }
        #expect(events.packets.count == 6)
        #expect(transport.droppedResponses == 3)
        #expect(!events.packets.map { $0[6] }.contains(2))

        transport.options.silent = true
        try transport.send(smpRequest(.read, group: .os, command: 6))
        await waitUntil { transport.handledRequests == 10 }
        #expect(events.packets.count == 6)
        await transport.close()
    }

    @Test func staysSilentWhileTheDeviceReboots() async throws {
        var configuration = SimulatorConfiguration()
        configuration.resetDelay = .seconds(1)
        configuration.bootTime = .zero
        let clock = ManualClock()
        let transport = InMemorySimulatorTransport(device: SimulatedDevice(configuration: configuration), clock: { clock.instant })
        let events = EventCollector()
        try await transport.open { events.add($0) }
        try transport.send(smpRequest(.write, group: .os, command: 5))
        await events.waitForPackets(1)
        try transport.send(smpRequest(.read, group: .os, command: 6))
        await waitUntil { transport.handledRequests == 2 }
        #expect(events.packets.count == 1)
        clock.advance(to: .seconds(1))
        try transport.send(smpRequest(.read, group: .os, command: 6))
        await events.waitForPackets(2)
        #expect(events.packets.count == 2)
        #expect(transport.device.resetCount == 1)
        await transport.close()
    }
}
