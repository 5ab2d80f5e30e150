import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Transfers that survive `kill -9` of `smp` (the same command run again continues from the device's
/// offset) and devices that reset or misbehave mid-transfer (`smp-sim --faults`).
@Suite(.serialized) struct ResumeAndFaultTests {
    @Test("kill -9 of smp mid fs upload: the same command continues from the device's bytes and verifies", .timeLimit(.minutes(10)))
    func fsUploadResumesAfterKill() async throws {
        try await withSimulator(.serial, extraArguments: ["--baud", "115200"]) { session in
            let payload = randomBytes(80_000)
            let local = session.directory.path("up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let arguments = ["--device", session.device, "fs", "upload", local, "/lfs1/killed.bin"]
            let first = try await TransferEndToEndTests.runStopped(
                ["-v"] + arguments, after: 4, of: "<- write-response fs(8) cmd 0", signal: SIGKILL)
            #expect(first.signalled && first.status == 128 + SIGKILL, "smp must die mid-upload: \(first.stderr.suffix(800))")
            let again = expectSuccess(try await session.smp(["--json"] + Array(arguments.dropFirst(2)), timeout: 120))
            let result = try TransferEndToEndTests.json(again.stdout)
            let resumed = result["resumed_from"] as? Int ?? 0
            #expect(resumed > 0 && resumed < payload.count, "no resume from the device's bytes: \(again)")
            #expect(result["verified"] as? String == "sha256", "\(again)")
            let back = session.directory.path("back.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/killed.bin", back], timeout: 120))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    @Test("kill -9 of smp mid image upload: the same command resumes the device's session and the slot holds the image", .timeLimit(.minutes(10)))
    func imageUploadResumesAfterKill() async throws {
        try await withDFUSimulator(.serial, extraArguments: ["--baud", "115200"]) { session in
            let image = try DFUPackages.image(version: (4, 0, 0), size: 96 * 1024, seed: 41)
            let path = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let first = try await TransferEndToEndTests.runStopped(
                ["-v", "--device", session.device, "image", "upload", path], after: 4,
                of: "<- write-response image(1) cmd 1", signal: SIGKILL)
            #expect(first.signalled && first.status == 128 + SIGKILL, "smp must die mid-upload: \(first.stderr.suffix(800))")
            let again = expectSuccess(try await session.smp(["--json", "image", "upload", path], timeout: 120))
            let result = try TransferEndToEndTests.json(again.stdout)
            let resumed = result["resumed_from"] as? Int ?? 0
            #expect(resumed > 0 && resumed < image.data.count, "no resume from the device's offset: \(again)")
            let slots = try await session.imageList()
            #expect(slots.contains { $0.slot == 1 && $0.hash == hex(image.hash) }, "\(slots)")
        }
    }

    @Test("kill -9 of smp mid dfu (stopped at a chunk, not a time): the next run resumes and the device runs the image", .timeLimit(.minutes(10)))
    func dfuResumesAfterKill() async throws {
        try await withDFUSimulator(.serial, extraArguments: ["--baud", "115200", "--swap-time", "0.2"]) { session in
            let image = try DFUPackages.image(version: (5, 0, 0), size: 96 * 1024, seed: 43)
            let path = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let first = try await TransferEndToEndTests.runStopped(
                ["-v", "--device", session.device, "dfu", path], after: 4, of: "<- write-response image(1) cmd 1",
                signal: SIGKILL)
            #expect(first.signalled && first.status == 128 + SIGKILL, "smp must die mid-upload: \(first.stderr.suffix(800))")
            let again = try await session.smp(["--json", "dfu", path], timeout: 120)
            expectSuccess(again)
            let images = try #require(dfuResult(again)?["images"] as? [[String: Any]])
            let resumed = jsonInt(images.first?["resumed_from"]) ?? 0
            #expect(resumed > 0 && resumed < image.data.count, "\(again)")
            let slots = try await session.imageList()
            #expect(slots.contains { $0.active && $0.hash == hex(image.hash) }, "\(slots)")
        }
    }

    @Test("a device that resets mid dfu upload (RAM session lost) and during the erase: the upgrade completes", .timeLimit(.minutes(10)),
          arguments: [Link.serial, Link.udp])
    func dfuFollowsDeviceResets(_ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: ["--faults", "reset-after=40000,reset-in-erase=1,seed=3", "--swap-time", "0.2"]) { session in
            let image = try DFUPackages.image(version: (6, 0, 0), size: 96 * 1024, seed: 45)
            let path = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "dfu", path, "--swap-time", "0.2"], timeout: 150)
            expectSuccess(run)
            let slots = try await session.imageList()
            #expect(slots.contains { $0.active && $0.confirmed && $0.hash == hex(image.hash) }, "\(slots)")
        }
    }

    @Test("a device that resets mid fs upload: the upload completes and the file is whole", .timeLimit(.minutes(10)),
          arguments: [Link.serial, Link.udp])
    func fsUploadFollowsDeviceReset(_ link: Link) async throws {
        try await withSimulator(link, extraArguments: ["--faults", "reset-after=30000,seed=5"]) { session in
            let payload = randomBytes(70_000)
            let local = session.directory.path("up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp(["fs", "upload", local, "/lfs1/reset.bin"], timeout: 120))
            let back = session.directory.path("back.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/reset.bin", back], timeout: 120))
            #expect(try Data(contentsOf: URL(fileURLWithPath: back)) == payload)
        }
    }

    @Test("a device that goes silent mid upload: a clear timeout naming the offset, inside the deadline")
    func silentDeviceGivesClearError() async throws {
        try await withSimulator(.udp, extraArguments: ["--faults", "silent-after=20"]) { session in
            let local = session.directory.path("up.bin")
            try randomBytes(200_000).write(to: URL(fileURLWithPath: local))
            let run = try await session.smp(["--timeout", "2", "fs", "upload", local, "/lfs1/silent.bin"], timeout: 60)
            expectStatus(run, SMPExit.timeout)
            #expect(run.stderr.contains("offset") && run.stderr.contains("again"), "\(run.stderr)")
        }
    }

    @Test("smp-sim refuses a --udp address off loopback unless --allow-remote; --faults errors say what to write")
    func simulatorOptionChecks() async throws {
        let remote = try await ProcessRunner.run(TestEnvironment.smpSim, ["--udp", "0.0.0.0:0"], timeout: 20)
        #expect(remote.status == 64, "\(remote)")
        #expect(remote.stderr.contains("not a loopback address") && remote.stderr.contains("--allow-remote"), "\(remote.stderr)")
        let badFaults = try await ProcessRunner.run(TestEnvironment.smpSim, ["--udp", "127.0.0.1:0", "--faults", "loss=7"], timeout: 20)
        #expect(badFaults.status == 64, "\(badFaults)")
        #expect(badFaults.stderr.contains("probability"), "\(badFaults.stderr)")
        let unknown = try await runSMP(["--device", "sim:?faults=wobble=1", "os", "echo", "hi"])
        expectStatus(unknown, SMPExit.usage)
        #expect(unknown.stderr.contains("unknown fault"), "\(unknown.stderr)")
        let sim = try await SimProcess.start(["--udp", "0.0.0.0:0", "--allow-remote"])
        sim.stop()
    }

    @Test("the in-process sim: device with seeded faults: transfers still verify")
    func inProcessFaults() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let payload = randomBytes(40_000)
        let local = directory.path("up.bin")
        try payload.write(to: URL(fileURLWithPath: local))
        let run = try await runSMP(
            ["-v", "--json", "--device", "sim:?fs_blocks=0&faults=loss=0.2,dup=0.05,reorder=0.05,seed=9", "fs", "upload", local, "/lfs1/f.bin"],
            timeout: 120)
        expectSuccess(run)
        #expect(try TransferEndToEndTests.json(run.stdout)["verified"] as? String == "sha256", "\(run)")
        // The faults happened: requests were resent.
        #expect(run.stderr.contains("resend seq") || run.stderr.contains("sent again at once"), "\(run.stderr.suffix(2000))")
    }
}
