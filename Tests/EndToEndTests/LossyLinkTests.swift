import Foundation
import Testing

/// `smp` over links that lose data: every transfer completes and verifies, or fails clearly in time.
@Suite("Lossy links", .serialized)
struct LossyLinkTests {
    /// A 1 MiB image upload through a UDP path that loses 10 % of the datagrams each way.
    @Test func aMebibyteImageUploadThroughTenPercentLossCompletesAndVerifies() async throws {
        try TestEnvironment.requireBinaries()
        let (data, hash) = try DFUPackages.image(size: 1 << 20, seed: 10)
        try await withSimulator(.udp, extraArguments: ["--slot-size", String(0x120000), "--buf-size", "2048"]) { session in
            let file = try DFUPackages.write(data, "big.bin", in: session.directory)
            let devicePort = try #require(session.sim.udpEndpoints.first?.port)
            let proxy = try LossyUDPProxy(devicePort: devicePort, lossRate: 0.10, seed: 42)
            defer { proxy.stop() }
            let upload = try await ProcessRunner.run(
                TestEnvironment.smp,
                ["--device", "udp:127.0.0.1:\(proxy.port)", "--timeout", "60", "--json", "image", "upload", file], timeout: 300)
            #expect(upload.status == 0, "\(upload)")
            #expect(proxy.dropped > 50, "the path lost \(proxy.dropped) of \(proxy.dropped + proxy.forwarded) datagrams")
            // The device (asked directly) holds exactly the uploaded image in the second slot.
            let slots = try await session.imageList()
            #expect(slots.contains { $0.slot == 1 && $0.hash == hex(hash) }, "\(slots)")
        }
    }
}

/// `smp` over a noisy serial line (issue: serial never retransmitted, so one flipped byte failed a
/// transfer and dropped lines hung it for minutes). `--timeout 60`: the subject is loss, and a suite
/// that runs QEMU guests beside it can starve the simulator for seconds.
@Suite("Noisy serial lines", .serialized)
struct NoisySerialTests {
    static func withRelay<R>(
        corruption: Double = 0, lineLoss: Double = 0,
        simArguments: [String] = ["--buf-size", "2048", "--rx-lines", "0", "--fs-blocks", "0"],
        _ body: (SimSession, SerialFaultRelay) async throws -> R
    ) async throws -> R {
        try TestEnvironment.requireBinaries()
        return try await withSimulator(.serial, extraArguments: simArguments) { session in
            let relay = try SerialFaultRelay(
                devicePath: session.directory.path("tty"), corruption: corruption, lineLoss: lineLoss)
            defer { relay.stop() }
            return try await body(session, relay)
        }
    }

    /// Runs `smp ARGS` through the relay (serial, --timeout 60).
    static func smp(through relay: SerialFaultRelay, _ arguments: [String], timeout: Double = 300) async throws -> ProcessResult {
        try await ProcessRunner.run(
            TestEnvironment.smp, ["--device", "serial:\(relay.path)", "--timeout", "60"] + arguments, timeout: timeout)
    }

    /// Uploads a 256 KiB image through the relay; the device then holds it in slot 1; returns the relay.
    static func uploadImage(seed: UInt64, corruption: Double = 0, lineLoss: Double = 0) async throws -> SerialFaultRelay {
        let (data, hash) = try DFUPackages.image(size: 256 * 1024, seed: seed)
        return try await withRelay(corruption: corruption, lineLoss: lineLoss) { session, relay in
            let file = try DFUPackages.write(data, "img.bin", in: session.directory)
            let upload = try await smp(through: relay, ["image", "upload", file])
            #expect(upload.status == 0, "\(upload)")
            relay.stop()  // it holds the device's pty: ask the device directly now
            let slots = try await session.imageList()
            #expect(slots.contains { $0.slot == 1 && $0.hash == hex(hash) }, "\(slots)")
            return relay
        }
    }

    @Test func a256KiBImageUploadSurvivesOneCorruptByteInTenThousand() async throws {
        let relay = try await Self.uploadImage(seed: 12, corruption: 1e-4)
        #expect(relay.corrupted > 0)
    }

    @Test func aDownloadSurvivesCorruptBytes() async throws {
        try await Self.withRelay(corruption: 1e-4) { session, relay in
            let content = Data((0..<16 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            let local = try DFUPackages.write(content, "f.bin", in: session.directory)
            // Through the relay too (the relay holds the device's pty): the upload meets the same noise.
            expectSuccess(try await Self.smp(through: relay, ["fs", "upload", local, "/lfs1/f.bin"], timeout: 120))
            let back = session.directory.path("back.bin")
            let download = try await Self.smp(through: relay, ["fs", "download", "/lfs1/f.bin", back], timeout: 120)
            #expect(download.status == 0, "\(download)")
            #expect(FileManager.default.contents(atPath: back) == content)
            #expect(relay.corrupted > 0)
        }
    }

    @Test func anImageUploadSurvivesLostLines() async throws {
        let relay = try await Self.uploadImage(seed: 13, lineLoss: 0.03)
        #expect(relay.linesLost > 0)
    }
}

/// Over UDP, Zephyr holds a request's buffer until its answer, which takes a second one: `smp` keeps
/// `buf_count / 2` requests in flight, so nothing is lost to full buffers. That nothing is then resent is
/// a timing property (every answer within the resend timeout), tested in virtual time by
/// `UploadTimingTests.bufCountHalfInFlightOnZephyrsUDPBuffersResendsNothing`: here, between real
/// processes on a machine that may be loaded (an answer late by the scheduler is resent, harmlessly),
/// the window and the outcome.
@Suite("UDP windows that fit Zephyr's buffers")
struct UDPWindowTests {
    @Test func anUploadToZephyrsDefaultBuffersKeepsHalfOfThemInFlightAndArrivesWhole() async throws {
        try TestEnvironment.requireBinaries()
        try await withSimulator(.udp, extraArguments: ["--udp-queue", "zephyr", "--buf-size", "384", "--buf-count", "4"]) { session in
            let local = session.directory.path("w.bin")
            let content = Data((0..<64 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 5) })
            try content.write(to: URL(fileURLWithPath: local))
            let upload = expectSuccess(try await session.smp("-v", "fs", "upload", local, "/lfs1/w.bin"))
            #expect(upload.stderr.contains("2 frames in flight"), "\(upload.stderr.suffix(2000))")
            // The device holds the file byte for byte.
            let back = session.directory.path("w.back")
            expectSuccess(try await session.smp("fs", "download", "/lfs1/w.bin", back))
            #expect(FileManager.default.contents(atPath: back) == content)
        }
    }
}

@Suite(.serialized)
struct RoundTripMemoryEndToEndTests {
    @Test func aSecondRunStartsFromTheRoundTripTheFirstMeasured() async throws {
        try TestEnvironment.requireBinaries()
        try await withSimulator(.udp) { session in
            let cache = session.directory.path("cache")
            let environment = ["XDG_CACHE_HOME": cache]
            let first = expectSuccess(
                try await ProcessRunner.run(
                    TestEnvironment.smp, ["--device", session.device, "-v", "os", "echo", "one"], environment: environment))
            #expect(!first.stderr.contains("remembered"), "\(first.stderr)")
            let file = URL(fileURLWithPath: cache).appendingPathComponent("smp/round-trips.json")
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: [String: Int]]
            let entry = try #require(object?.values.first)
            #expect(object?.count == 1)
            #expect((entry["srtt_us"] ?? -1) >= 0 && (entry["srtt_us"] ?? .max) < 10_000_000)
            let second = expectSuccess(
                try await ProcessRunner.run(
                    TestEnvironment.smp, ["--device", session.device, "-v", "os", "echo", "two"], environment: environment))
            #expect(second.stdout == "two\n")
            #expect(second.stderr.contains("round trip remembered from an earlier connection"), "\(second.stderr)")
            // SMP_NO_CACHE turns the memory off.
            let off = expectSuccess(
                try await ProcessRunner.run(
                    TestEnvironment.smp, ["--device", session.device, "-v", "os", "echo", "three"],
                    environment: environment.merging(["SMP_NO_CACHE": "1"]) { $1 }))
            #expect(!off.stderr.contains("remembered"), "\(off.stderr)")
        }
    }
}
