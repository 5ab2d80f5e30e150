import Foundation
import McuManager
import Testing

/// The transfer rate people see: over a sliding window of time, never over a single chunk. Driven by a
/// scripted clock (the times passed in), so nothing here depends on how fast the machine is.
@Suite struct TransferRateEstimatorTests {
    /// A scripted clock: time since the transfer started, moved on by the test.
    struct ScriptedClock {
        var now: Duration = .zero
        mutating func advance(_ step: Duration) { now += step }
    }

    @Test func noRateFromTheFirstChunk() throws {
        var clock = ScriptedClock()
        var rate = TransferRateEstimator()
        rate.record(bytes: 0, at: clock.now)
        #expect(rate.bytesPerSecond == nil, "no rate before anything moved")
        // The first 1.4 kB chunk answered after 6 µs: the old code reported 227 MB/s here.
        clock.advance(.microseconds(6))
        rate.record(bytes: 1400, at: clock.now)
        #expect(rate.bytesPerSecond == nil)
        // Still nothing until half a second of transfer.
        clock.advance(.milliseconds(400))
        rate.record(bytes: 2800, at: clock.now)
        #expect(rate.bytesPerSecond == nil)
        clock.advance(.milliseconds(100))
        rate.record(bytes: 4200, at: clock.now)
        let value = try #require(rate.bytesPerSecond)
        #expect(abs(value - 4200 / 0.500006) < 0.01)
    }

    @Test func aSteadyTransferReadsItsRate() throws {
        var clock = ScriptedClock()
        var rate = TransferRateEstimator()
        var bytes = 0
        rate.record(bytes: bytes, at: clock.now)
        // 1 KiB every 10 ms = 102400 B/s, for 10 s.
        for _ in 0..<1000 {
            clock.advance(.milliseconds(10))
            bytes += 1024
            rate.record(bytes: bytes, at: clock.now)
            if clock.now >= .milliseconds(500) {
                let value = try #require(rate.bytesPerSecond)
                #expect(abs(value - 102_400) < 1, "at \(clock.now)")
            }
        }
    }

    @Test func theRateFollowsTheLastSecondsNotTheWholeTransfer() throws {
        var clock = ScriptedClock()
        var rate = TransferRateEstimator(window: .seconds(2))
        var bytes = 0
        rate.record(bytes: bytes, at: clock.now)
        // 10 s at 100 kB/s, then the link slows to 10 kB/s.
        for _ in 0..<100 {
            clock.advance(.milliseconds(100))
            bytes += 10_000
            rate.record(bytes: bytes, at: clock.now)
        }
        #expect(abs(try #require(rate.bytesPerSecond) - 100_000) < 1)
        for _ in 0..<30 {
            clock.advance(.milliseconds(100))
            bytes += 1_000
            rate.record(bytes: bytes, at: clock.now)
        }
        // Three seconds later the 2 s window holds only the slow part (a whole-transfer average would
        // still say ~80 kB/s).
        let slow = try #require(rate.bytesPerSecond)
        #expect(slow >= 9_000 && slow <= 11_000, "rate \(slow)")
    }

    @Test func burstsAreSmoothedOverTheWindow() throws {
        var clock = ScriptedClock()
        var rate = TransferRateEstimator(window: .seconds(1), minimumSpan: .milliseconds(500))
        var bytes = 0
        rate.record(bytes: bytes, at: clock.now)
        // A serial link that delivers 4 chunks back to back, then waits: 4 x 128 bytes every 200 ms.
        var seen: [Double] = []
        for _ in 0..<50 {
            clock.advance(.milliseconds(199))
            for _ in 0..<4 {
                clock.advance(.microseconds(250))
                bytes += 128
                rate.record(bytes: bytes, at: clock.now)
                if let value = rate.bytesPerSecond { seen.append(value) }
            }
        }
        // 512 bytes per 200 ms = 2560 B/s; the per-chunk rate (128 B / 250 µs = 512 kB/s) never shows.
        #expect(!seen.isEmpty)
        #expect(seen.allSatisfy { $0 > 1_500 && $0 < 4_000 }, "rates \(seen.min() ?? 0)...\(seen.max() ?? 0)")
    }

    @Test func aResumeStartsOver() throws {
        var clock = ScriptedClock()
        var rate = TransferRateEstimator()
        rate.record(bytes: 0, at: clock.now)
        clock.advance(.seconds(2))
        // The device already held 48 KiB: those bytes were not transferred now.
        rate.restart(bytes: 49_152, at: clock.now)
        clock.advance(.milliseconds(100))
        rate.record(bytes: 50_176, at: clock.now)
        #expect(rate.bytesPerSecond == nil)
        clock.advance(.milliseconds(900))
        rate.record(bytes: 59_392, at: clock.now)
        #expect(abs(try #require(rate.bytesPerSecond) - 10_240) < 1)
    }

    @Test func bytesThatGoBackStartOver() {
        var rate = TransferRateEstimator()
        rate.record(bytes: 0, at: .zero)
        rate.record(bytes: 100_000, at: .seconds(1))
        #expect(rate.bytesPerSecond != nil)
        rate.record(bytes: 0, at: .milliseconds(1100))
        #expect(rate.bytesPerSecond == nil)
    }

    @Test func settingsOutOfRangeAreClamped() {
        let zero = TransferRateEstimator(window: .zero, minimumSpan: .seconds(-1))
        #expect(zero.window == .milliseconds(1) && zero.minimumSpan == .zero)
        let long = TransferRateEstimator(window: .seconds(1), minimumSpan: .seconds(5))
        #expect(long.minimumSpan == .seconds(1))
    }

    @Test func memoryStaysSmallAtHighChunkRates() throws {
        var rate = TransferRateEstimator(window: .seconds(3))
        // 100000 samples 10 µs apart: one second of a very fast link.
        for index in 0...100_000 {
            rate.record(bytes: index * 100, at: .microseconds(index * 10))
        }
        #expect(abs(try #require(rate.bytesPerSecond) - 10_000_000) < 1)
        let mirror = Mirror(reflecting: rate)
        let samples = try #require(mirror.children.first { $0.label == "samples" }?.value as? [Any])
        #expect(samples.count <= 18)
    }

    /// Through the uploader: a rate appears only once the upload has run for the estimator's minimum
    /// span (checked one way against the wall clock: a slow machine only makes the upload longer).
    @Test func uploadProgressHasNoRateBeforeHalfASecond() async throws {
        let rig = ManagerRig()
        let manager = FileSystemManager(client: rig.client)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = directory.appendingPathComponent("data.bin")
        try Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: local)
        let started = ContinuousClock.now
        let reports = ManagerTestBox<[(TransferProgress, Duration)]>([])
        _ = try await manager.upload(local, to: "/lfs1/data.bin") { progress in
            reports.withValue { $0.append((progress, ContinuousClock.now - started)) }
        }
        let seen = reports.current
        #expect(seen.last?.0.bytesTransferred == 65_536)
        for (progress, elapsed) in seen where progress.bytesPerSecond != nil {
            #expect(elapsed >= .milliseconds(500), "a rate after \(elapsed)")
        }
    }
}
