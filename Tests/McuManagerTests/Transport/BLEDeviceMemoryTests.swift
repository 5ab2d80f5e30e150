import Foundation
import McuManager
import McuMgrCore
import Testing

@Suite struct BLEDeviceMemoryTests {
    private static func withMemory(_ body: (BLEDeviceMemory) throws -> Void) rethrows {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ble-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try body(BLEDeviceMemory(file: file))
    }

    @Test func reassemblyIsRecalledForTheSameBufferOnly() {
        Self.withMemory { memory in
            memory.remember(BLEDeviceProfile(bufferSize: 2475, bufferCount: 4, reassembles: true), for: "00:AA:01:01:00:01")
            #expect(memory.recall("00:AA:01:01:00:01", bufferSize: 2475)?.reassembles == true)
            #expect(memory.recall("00:AA:01:01:00:01", bufferSize: 2475)?.piecesArriveOutOfOrder == false)
            #expect(memory.recall("00:AA:01:01:00:01", bufferSize: 1024) == nil, "new firmware: probed again")
            #expect(memory.recall("00:AA:01:01:00:02", bufferSize: 2475) == nil)
            // Nothing learned, nothing stored.
            memory.remember(BLEDeviceProfile(bufferSize: 384), for: "00:AA:01:01:00:03")
            #expect(memory.recall("00:AA:01:01:00:03", bufferSize: 384) == nil)
        }
    }

    /// An unanswered probe says more about the link (BlueZ's EATT bearers) than about the device, and
    /// the link can change: it is trusted for a day, a firmware fact for good.
    @Test func anUnansweredProbeIsTrustedForADay() {
        Self.withMemory { memory in
            let now = 1_800_000_000
            let reordered = BLEDeviceProfile(bufferSize: 2475, bufferCount: 4, reassembles: false, piecesArriveOutOfOrder: true)
            memory.remember(reordered, for: "link", now: now)
            memory.remember(BLEDeviceProfile(bufferSize: 2475, reassembles: false), for: "firmware", now: now)
            let soon = memory.recall("link", bufferSize: 2475, now: now + 3600)
            #expect(soon?.reassembles == false && soon?.piecesArriveOutOfOrder == true)
            #expect(memory.recall("link", bufferSize: 2475, now: now + BLEDeviceMemory.unansweredLifetime + 1) == nil)
            #expect(memory.recall("firmware", bufferSize: 2475, now: now + 30 * 86400)?.reassembles == false)
        }
    }

    /// A command that exits without waiting for BlueZ's disconnect leaves the time it asked; what was
    /// learned about the device and that time are kept side by side.
    @Test func aRequestedDisconnectIsKeptBesideWhatWasLearned() {
        Self.withMemory { memory in
            #expect(memory.disconnectRequested("00:AA:01:01:00:01") == nil)
            memory.remember(BLEDeviceProfile(bufferSize: 2475, bufferCount: 4, reassembles: true), for: "00:AA:01:01:00:01")
            memory.noteDisconnectRequested("00:AA:01:01:00:01", at: 1_800_000_000.25)
            #expect(memory.disconnectRequested("00:AA:01:01:00:01") == 1_800_000_000.25)
            #expect(memory.recall("00:AA:01:01:00:01", bufferSize: 2475)?.reassembles == true)
            // Learning again keeps the request; a device only ever disconnected has nothing to recall.
            memory.remember(BLEDeviceProfile(bufferSize: 2475, bufferCount: 4, reassembles: false), for: "00:AA:01:01:00:01")
            #expect(memory.disconnectRequested("00:AA:01:01:00:01") == 1_800_000_000.25)
            #expect(memory.recall("00:AA:01:01:00:01", bufferSize: 2475)?.reassembles == false)
            memory.noteDisconnectRequested("00:AA:01:01:00:02", at: 1_800_000_001)
            #expect(memory.recall("00:AA:01:01:00:02", bufferSize: 2475) == nil)
            #expect(memory.disconnectRequested("00:AA:01:01:00:02") == 1_800_000_001)
        }
    }
}
