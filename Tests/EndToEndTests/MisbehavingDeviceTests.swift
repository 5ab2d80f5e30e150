import Foundation
import Testing

/// `smp` against a device that misbehaves mid-transfer (through a relay that rewrites its UDP traffic):
/// it answers garbage, answers requests never sent, goes silent, or resets. Each time the transfer
/// completes and verifies, or stops with a clear error inside `--timeout`; no data is lost.
@Suite("Misbehaving devices", .serialized)
struct MisbehavingDeviceTests {
    static let imageSize = 192 * 1024

    /// An smp-sim over UDP behind a relay with `rewrite`, and a fresh image file in its directory.
    static func withRelay<R>(
        seed: UInt64, _ rewrite: @escaping LossyUDPProxy.Rewrite,
        _ body: (SimSession, LossyUDPProxy, _ file: String, _ hash: Data) async throws -> R
    ) async throws -> R {
        try TestEnvironment.requireBinaries()
        let (data, hash) = try DFUPackages.image(size: imageSize, seed: seed)
        return try await withSimulator(.udp, extraArguments: ["--buf-size", "2048"]) { session in
            let file = try DFUPackages.write(data, "img.bin", in: session.directory)
            let devicePort = try #require(session.sim.udpEndpoints.first?.port)
            let proxy = try LossyUDPProxy(devicePort: devicePort, rewrite: rewrite)
            defer { proxy.stop() }
            return try await body(session, proxy, file, hash)
        }
    }

    static func smp(_ proxy: LossyUDPProxy, timeout: Int = 20, _ arguments: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(
            TestEnvironment.smp, ["--device", "udp:127.0.0.1:\(proxy.port)", "--timeout", String(timeout)] + arguments,
            timeout: 240)
    }

    /// The device holds exactly the image in its second slot.
    static func expectUploaded(_ session: SimSession, _ hash: Data) async throws {
        let slots = try await session.imageList()
        #expect(slots.contains { $0.slot == 1 && $0.hash == hex(hash) }, "\(slots)")
    }

    /// A device that answers `count` requests and then says nothing more (and hears nothing).
    static func silent(after count: Int) -> LossyUDPProxy.Rewrite {
        var answers = 0
        return { direction, datagram in
            if direction == .toClient, Self.isAnswer(datagram) { answers += 1 }
            return answers > count ? [] : [Array(datagram)]
        }
    }

    /// Whether a datagram is an SMP answer (read or write response) with a whole header.
    static func isAnswer(_ datagram: ArraySlice<UInt8>) -> Bool {
        datagram.count >= 8 && [1, 3].contains(datagram[datagram.startIndex] & 0x07)
    }

    @Test func garbageAndTornAnswersAreIgnored() async throws {
        // Before every answer: random bytes of random length, and the answer's first half (a header that
        // promises more than arrives).
        var dice = SeededBytes(seed: 61)
        try await Self.withRelay(seed: 61, { direction, datagram in
            guard direction == .toClient else { return [Array(datagram)] }
            let garbage = (0..<(1 + Int(dice.next() % 40))).map { _ in dice.next() }
            return [garbage, Array(datagram.prefix(max(1, datagram.count / 2))), Array(datagram)]
        }) { session, proxy, file, hash in
            let upload = try await Self.smp(proxy, ["image", "upload", file])
            #expect(upload.status == 0, "\(upload)")
            try await Self.expectUploaded(session, hash)
        }
    }

    @Test func answersToRequestsNeverSentAndRepeatedAnswersAreIgnored() async throws {
        // Beside every answer: a copy under a sequence number no request carries (128 further on), one
        // for another group, and, after it, the previous answer again (late and repeated).
        var previous: [UInt8]?
        try await Self.withRelay(seed: 62, { direction, datagram in
            guard direction == .toClient, Self.isAnswer(datagram) else { return [Array(datagram)] }
            var stranger = Array(datagram)
            stranger[6] &+= 128
            var otherGroup = Array(datagram)
            otherGroup[5] = 9
            otherGroup[6] &+= 128
            defer { previous = Array(datagram) }
            return [stranger, otherGroup, Array(datagram)] + (previous.map { [$0] } ?? [])
        }) { session, proxy, file, hash in
            let upload = try await Self.smp(proxy, ["image", "upload", file])
            #expect(upload.status == 0, "\(upload)")
            try await Self.expectUploaded(session, hash)
        }
    }

    @Test func aDeviceThatGoesSilentMidUploadFailsWithinTheTimeoutAndTheRestResumes() async throws {
        try await Self.withRelay(seed: 63, Self.silent(after: 30)) { session, proxy, file, hash in
            let upload = try await Self.smp(proxy, timeout: 3, ["image", "upload", file])
            expectStatus(upload, SMPExit.timeout)
            // Bounded by --timeout, not by the resends' backoff or a fixed first-chunk allowance (the
            // margin is for a loaded machine, not a target).
            #expect(upload.duration < 20, "\(upload)")
            #expect(upload.stderr.contains("127.0.0.1:\(proxy.port)"), "names the device: \(upload.stderr)")
            #expect(upload.stderr.range(of: #"offset \d+"#, options: .regularExpression) != nil, "names the offset: \(upload.stderr)")
            #expect(upload.stderr.contains("again"), "says how to go on: \(upload.stderr)")
            // Nothing is lost: the same command, on a link that works, completes from where the device is.
            let again = try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", session.device, "--json", "image", "upload", file], timeout: 120)
            #expect(again.status == 0, "\(again)")
            let resumed = (try? TransferEndToEndTests.json(again.stdout))?["resumed_from"] as? Int ?? 0
            #expect(resumed > 0, "continued from the device's offset: \(again.stdout)")
            try await Self.expectUploaded(session, hash)
        }
    }

    @Test func aDeviceThatGoesSilentMidDownloadFailsWithinTheTimeoutAndLeavesNoFile() async throws {
        // Silent after the first piece of the file.
        try await Self.withRelay(seed: 65, Self.silent(after: 1)) { session, proxy, _, _ in
            let local = session.directory.path("f.bin")
            try randomBytes(4000).write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp("fs", "upload", local, "/lfs1/f.bin"))
            let back = session.directory.path("back.bin")
            // Small answers (the device's buffer is 2048 bytes), so the download takes several.
            let download = try await Self.smp(proxy, timeout: 3, ["fs", "download", "/lfs1/f.bin", back])
            expectStatus(download, SMPExit.timeout)
            #expect(download.duration < 20, "\(download)")
            #expect(download.stderr.range(of: #"offset \d+"#, options: .regularExpression) != nil, "names the offset: \(download.stderr)")
            #expect(!FileManager.default.fileExists(atPath: back), "no partial file")
        }
    }

    @Test func aDeviceThatResetsMidUploadIsFollowedToTheEnd() async throws {
        // After 40 answers the device is reset (an `os reset` from elsewhere, sent ahead of the next request):
        // its upload session is gone and the next chunk is answered with offset 0. The upload starts again
        // from there and completes; the answer to the reset belongs to no request of smp's.
        var answers = 0
        var resets = 0
        try await Self.withRelay(seed: 64, { direction, datagram in
            if direction == .toClient, Self.isAnswer(datagram) { answers += 1 }
            guard direction == .toDevice, answers >= 40, resets == 0, datagram.count >= 8 else { return [Array(datagram)] }
            resets += 1
            let reset: [UInt8] = [0x0A, 0, 0, 1, 0, 0, datagram[datagram.startIndex + 6] &+ 128, 5, 0xA0]
            return [reset, Array(datagram)]
        }) { session, proxy, file, hash in
            let upload = try await Self.smp(proxy, ["-v", "--json", "image", "upload", file])
            #expect(upload.status == 0, "\(upload)")
            #expect(resets == 1)
            #expect(upload.stderr.contains("the device went back from offset"), "says so: \(upload.stderr.suffix(2000))")
            // Every chunk after the reset went again: more requests than the image takes.
            let requests = upload.stderr.components(separatedBy: "-> write image(1) cmd 1 ").count - 1
            #expect(requests > Self.imageSize / 1472 + 30, "\(requests) image upload requests")
            try await Self.expectUploaded(session, hash)
        }
    }
}
