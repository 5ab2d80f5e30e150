import Foundation
import McuManager
import McuMgrCore
import Testing

@Suite struct RoundTripMemoryTests {
    private static func withFile(_ body: (URL) throws -> Void) rethrows {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("rtt-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        try body(file)
    }

    @Test func whatOneConnectionMeasuredIsRecalledForTheSameDeviceOnly() throws {
        try Self.withFile { file in
            let memory = RoundTripMemory(file: file)
            #expect(memory.recall("udp:192.0.2.7:1337") == nil)
            let measured = SMPRoundTrip(smoothed: .microseconds(6906), variation: .microseconds(4891))
            memory.remember(measured, for: "udp:192.0.2.7:1337")
            #expect(RoundTripMemory(file: file).recall("udp:192.0.2.7:1337") == measured)
            #expect(memory.recall("udp:192.0.2.8:1337") == nil)
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: [String: Int]]
            #expect(object?["udp:192.0.2.7:1337"]?["srtt_us"] == 6906)
            #expect(object?["udp:192.0.2.7:1337"]?["rttvar_us"] == 4891)
        }
    }

    @Test func oldOddAndUnreadableEntriesAreIgnored() throws {
        try Self.withFile { file in
            let now = Int(Date().timeIntervalSince1970)
            let text = """
                {"old": {"srtt_us": 5000, "rttvar_us": 100, "seen": \(now - 2 * 86400)},
                 "huge": {"srtt_us": 99000000, "rttvar_us": 100, "seen": \(now)},
                 "negative": {"srtt_us": -1, "rttvar_us": 100, "seen": \(now)},
                 "text": {"srtt_us": "fast", "rttvar_us": 100, "seen": \(now)},
                 "partial": {"srtt_us": 5000},
                 "good": {"srtt_us": 5000, "rttvar_us": 1000, "seen": \(now)}}
                """
            try Data(text.utf8).write(to: file)
            let memory = RoundTripMemory(file: file)
            for name in ["old", "huge", "negative", "text", "partial", "missing"] {
                #expect(memory.recall(name) == nil, "\(name)")
            }
            #expect(memory.recall("good") == SMPRoundTrip(smoothed: .milliseconds(5), variation: .milliseconds(1)))
            try Data("not json".utf8).write(to: file)
            #expect(memory.recall("good") == nil)
            memory.remember(SMPRoundTrip(smoothed: .milliseconds(2), variation: .zero), for: "good")
            #expect(memory.recall("good") == SMPRoundTrip(smoothed: .milliseconds(2), variation: .zero))
        }
    }

    @Test func theFileKeepsTheDevicesSeenLast() throws {
        try Self.withFile { file in
            let memory = RoundTripMemory(file: file)
            for index in 0..<(RoundTripMemory.capacity + 5) {
                memory.remember(SMPRoundTrip(smoothed: .milliseconds(1), variation: .zero), for: "udp:10.0.0.\(index)")
            }
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
            #expect(object?.count == RoundTripMemory.capacity)
        }
    }

    /// The file is decoded once per process while it stays the same; a write by another process (another
    /// `smp` of a fleet, replacing the file, or changing it in place) is read.
    @Test func aWriteByAnotherProcessIsSeen() throws {
        try Self.withFile { file in
            let now = Int(Date().timeIntervalSince1970)
            let memory = RoundTripMemory(file: file)
            memory.remember(SMPRoundTrip(smoothed: .microseconds(10_000), variation: .microseconds(2_000)), for: "udp:a", now: now)
            #expect(memory.recall("udp:a")?.smoothed == .microseconds(10_000))
            // Replaced (a new file renamed over it), the same length.
            let other = file.deletingLastPathComponent().appendingPathComponent("other-\(UUID().uuidString).json")
            try Data(#"{"udp:a": {"srtt_us": 30000, "rttvar_us": 2000, "seen": \#(now)}}"#.utf8).write(to: other)
            #expect(rename(other.path, file.path) == 0)
            #expect(memory.recall("udp:a")?.smoothed == .microseconds(30_000))
            // Changed in place.
            try Data(#"{"udp:a": {"srtt_us": 40000, "rttvar_us": 2000, "seen": \#(now)}}"#.utf8).write(to: file)
            #expect(memory.recall("udp:a")?.smoothed == .microseconds(40_000))
        }
    }

    /// Entries past their lifetime (a day) would be ignored: a write drops them, so that the file a rig's
    /// changing devices leave behind stays as small as the devices of the last day.
    @Test func aWriteDropsEntriesPastTheirLifetime() throws {
        try Self.withFile { file in
            let now = Int(Date().timeIntervalSince1970)
            try Data(#"{"udp:old": {"srtt_us": 5000, "rttvar_us": 100, "seen": \#(now - 86_401)}, "udp:recent": {"srtt_us": 5000, "rttvar_us": 100, "seen": \#(now - 3600)}}"#.utf8).write(to: file)
            RoundTripMemory(file: file).remember(SMPRoundTrip(smoothed: .milliseconds(1), variation: .zero), for: "udp:new", now: now)
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
            #expect(object.map { Set($0.keys) } == ["udp:recent", "udp:new"])
        }
    }

    @Test func aCloseValueSeenWithinTheHourIsNotWrittenAgain() throws {
        try Self.withFile { file in
            let memory = RoundTripMemory(file: file)
            let now = Int(Date().timeIntervalSince1970)
            memory.remember(SMPRoundTrip(smoothed: .microseconds(10_000), variation: .microseconds(2_000)), for: "udp:a", now: now)
            let written = try Data(contentsOf: file)
            // Close to what is there, within the hour: the file stays as it was.
            memory.remember(SMPRoundTrip(smoothed: .microseconds(10_900), variation: .microseconds(2_400)), for: "udp:a", now: now + 60)
            #expect(try Data(contentsOf: file) == written)
            #expect(memory.recall("udp:a") == SMPRoundTrip(smoothed: .microseconds(10_000), variation: .microseconds(2_000)))
            // Another value, or an hour later: written.
            memory.remember(SMPRoundTrip(smoothed: .microseconds(20_000), variation: .microseconds(2_000)), for: "udp:a", now: now + 60)
            #expect(memory.recall("udp:a") == SMPRoundTrip(smoothed: .microseconds(20_000), variation: .microseconds(2_000)))
            memory.remember(SMPRoundTrip(smoothed: .microseconds(20_100), variation: .microseconds(2_000)), for: "udp:a", now: now + 60 + 3600)
            #expect(memory.recall("udp:a") == SMPRoundTrip(smoothed: .microseconds(20_100), variation: .microseconds(2_000)))
        }
    }
}
