import Foundation
import McuMgrSimulator
import Testing

/// One cell of the `smp dfu` matrix: an MCUboot mode of the simulated device, an upgrade mode, a link.
struct DFUCase: Sendable, CustomStringConvertible {
    var bootloader: String
    var mode: String
    var link: Link

    var description: String { "\(bootloader) \(mode) over \(link)" }

    /// MCUboot modes that can revert a test boot.
    var reverts: Bool { ["swap-scratch", "swap-move", "swap-offset", "direct-xip-revert"].contains(bootloader) }
    var isDirectXIP: Bool { bootloader.hasPrefix("direct-xip") }
    /// Single-application MCUboot: the application has no image group; the upgrade goes through serial recovery.
    var isSingleApp: Bool { bootloader == "single-app" }
    /// Options `smp dfu` gets besides the mode: one single-app cell is told the bootloader mode (no bootloader
    /// info asked), the other finds it (mode 0 from bootloader info, then rc 8 to the image list).
    var dfuOptions: [String] { isSingleApp && mode == "test-and-confirm" ? ["--bootloader-mode", "single-app"] : [] }

    /// Every upgrade mode for every MCUboot mode it applies to; swap-scratch over both links, the others
    /// alternating between the pty and UDP so both links see every mode.
    static let matrix: [DFUCase] = {
        let modes = ["confirm-only", "test-and-confirm", "test-only", "upload-only"]
        let plan: [(String, [String])] = [
            ("swap-move", modes), ("swap-offset", modes), ("overwrite", modes), ("direct-xip-revert", modes),
            ("direct-xip", ["confirm-only", "test-only", "upload-only"]), ("ram-load", ["confirm-only", "upload-only"]),
            ("firmware-loader", ["confirm-only", "test-and-confirm"]), ("single-app", ["confirm-only", "test-and-confirm"]),
        ]
        var cases = modes.flatMap { mode in Link.allCases.map { DFUCase(bootloader: "swap-scratch", mode: mode, link: $0) } }
        var index = 0
        for (bootloader, modes) in plan {
            for mode in modes {
                cases.append(DFUCase(bootloader: bootloader, mode: mode, link: index % 2 == 0 ? .serial : .udp))
                index += 1
            }
        }
        return cases
    }()
}

/// `smp dfu` end to end: the real binary against `smp-sim` over a pty (which vanishes on reset and comes
/// back, like USB CDC) and over UDP (silent while swapping); the device's image list afterwards is what
/// the mode promises.
@Suite("smp dfu against smp-sim", .timeLimit(.minutes(10)))
struct DFUTests {
    static func simArguments(_ link: Link, bootloader: String, extra: [String] = []) -> [String] {
        var arguments = ["--bootloader-mode", bootloader, "--swap-time", "0.2"] + extra
        if link == .serial { arguments.append("--reset-vanish") }
        return arguments
    }

    /// The package for a matrix cell and the hash of the build that must end up running.
    static func package(for test: DFUCase, in directory: TemporaryDirectory) throws -> (String, String) {
        if test.isDirectXIP {
            let slot0 = try DFUPackages.image(linkedSlot: 0)
            let slot1 = try DFUPackages.image(linkedSlot: 1)
            let zip = try DFUPackages.directXIPZip(slot0: slot0.data, slot1: slot1.data)
            // The device runs from slot 0: the build for slot 1 must go up.
            return (try DFUPackages.write(zip, "dfu_application.zip", in: directory), hex(slot1.hash))
        }
        let image = try DFUPackages.image()
        return (try DFUPackages.write(image.data, "app_update.bin", in: directory), hex(image.hash))
    }

    @Test("each upgrade mode on each MCUboot mode", arguments: DFUCase.matrix)
    func matrix(_ test: DFUCase) async throws {
        try await withDFUSimulator(test.link, extraArguments: Self.simArguments(test.link, bootloader: test.bootloader)) { session in
            if test.isSingleApp {
                try await Self.checkSingleApp(test, session)
            } else {
                try await Self.check(test, session)
            }
        }
    }

    /// Single-application MCUboot: the Zephyr application has no image group (MCUMGR_GRP_IMG depends on
    /// !MCUBOOT_BOOTLOADER_MODE_SINGLE_APP; smp-sim answers rc 8 as such a build does), so nothing here
    /// lists the application's images. `smp dfu` goes through serial recovery; afterwards the application
    /// answers bootloader info (recovery answers rc 8), and serial recovery, entered with boot mode 1,
    /// lists slot 0 with the new hash.
    static func checkSingleApp(_ test: DFUCase, _ session: SimSession) async throws {
        let (package, newHash) = try Self.package(for: test, in: session.directory)
        let run = try await session.smp(
            ["--json", "dfu", package, "--mode", test.mode, "--swap-time", "0.2"] + test.dfuOptions, timeout: 90)
        expectSuccess(run)
        let result = dfuResult(run) ?? [:]
        #expect(result["status"] as? String == "success")
        #expect(jsonInt(result["bootloader_mode"]) == 0)
        #expect(result["serial_recovery"] as? Bool == true)
        #expect(result["reset"] as? Bool == true)
        #expect((result["uploaded"] as? [Any])?.count == 1, "\(result)")
        let verified = result["verified"] as? String ?? ""
        #expect(verified.contains("slot 0 with the uploaded hash") && verified.contains(newHash), "\(verified)")
        // No test or confirm: MCUboot's serial recovery has neither.
        let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
        #expect(!states.contains("test") && !states.contains("confirm"), "\(states)")
        let logs = dfuEvents(run).compactMap { $0["message"] as? String }
        #expect(logs.contains { $0.contains("into MCUboot's serial recovery (boot mode 1)") }, "\(logs)")
        if test.mode != "confirm-only" {
            #expect((result["notes"] as? [String])?.contains { $0.contains("cannot test-boot") } == true, "\(result)")
        }

        // The application runs: it answers bootloader info with mode 0.
        let application = try await session.smp(["--timeout", "2", "os", "bootloader", "mode"])
        expectSuccess(application)
        #expect(application.stdout.contains("mode 0"), "\(application)")
        // Serial recovery lists slot 0 with the new hash; a normal reset boots the application again.
        expectSuccess(try await session.smp("os", "reset", "--boot-mode", "1"))
        let recovery = try await session.imageList()  // retried while the device reboots
        #expect(recovery.contains { $0.slot == 0 && $0.hash == newHash }, "\(recovery)")
        expectSuccess(try await session.smp("os", "reset"))
        let back = try await session.smpOnceAnswering("os", "bootloader", "mode")
        #expect(back.status == 0 && back.stdout.contains("mode 0"), "the application is back: \(back)")
    }

    static func check(_ test: DFUCase, _ session: SimSession) async throws {
        let before = try await session.imageList()
        let oldHash = before.first(where: { $0.active })?.hash ?? ""
        let (package, newHash) = try Self.package(for: test, in: session.directory)
        let run = try await session.smp(["--json", "dfu", package, "--mode", test.mode, "--swap-time", "0.2"], timeout: 90)
        expectSuccess(run)
        let result = dfuResult(run) ?? [:]
        #expect(result["status"] as? String == "success")
        #expect(jsonInt(result["bootloader_mode"]) == SimulatedBootloader.Mode(name: test.bootloader)?.rawValue)

        let after = try await session.imageList()
        let new = after.first { $0.hash == newHash }
        if test.mode == "upload-only" && test.bootloader != "firmware-loader" {
            #expect(after.first { $0.active }?.hash == oldHash, "still runs the old image: \(after)")
            #expect(new != nil && new?.active == false, "new image waits in a slot: \(after)")
            // Direct-XIP without revert and RAM load boot the higher version next: it shows pending.
            #expect(new?.pending == ["direct-xip", "ram-load"].contains(test.bootloader), "\(after)")
        } else if test.mode == "test-only" && test.reverts {
            #expect(new?.active == true && new?.confirmed == false, "runs unconfirmed: \(after)")
            let reverted = try await session.resetAndWait()
            #expect(reverted.first { $0.active }?.hash == oldHash, "a second reset reverts it: \(reverted)")
        } else {
            #expect(new?.active == true && new?.confirmed == true, "runs the new image, confirmed: \(after)")
            if test.mode != "confirm-only" && !test.reverts {
                #expect((result["notes"] as? [String])?.isEmpty == false, "a note says the mode cannot test-boot")
            }
        }
    }

    @Test("multi-image app + net core zip", arguments: [("confirm-only", Link.serial), ("test-and-confirm", Link.udp)])
    func multiImage(_ mode: String, _ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: Self.simArguments(link, bootloader: "swap-scratch", extra: ["--images", "2"])) { session in
            let app = try DFUPackages.image(image: 0)
            let net = try DFUPackages.image(size: 12 * 1024, image: 1)
            let zip = try DFUPackages.write(try DFUPackages.twoCoreZip(app: app.data, net: net.data), "dfu_application.zip", in: session.directory)
            let run = try await session.smp(["--json", "dfu", zip, "--mode", mode, "--swap-time", "0.2"], timeout: 90)
            expectSuccess(run)
            let result = try #require(dfuResult(run))
            #expect((result["uploaded"] as? [Any])?.count == 2)
            let after = try await session.imageList()
            #expect(after.contains { $0.image == 0 && $0.slot == 0 && $0.hash == hex(app.hash) && $0.confirmed }, "\(after)")
            #expect(after.contains { $0.image == 1 && $0.slot == 0 && $0.hash == hex(net.hash) }, "\(after)")
            // Running the same package again uploads nothing.
            let again = try await session.smp(["--json", "dfu", zip, "--mode", mode], timeout: 60)
            expectSuccess(again)
            #expect((dfuResult(again)?["skipped"] as? [Any])?.count == 2)
        }
    }

    @Test("SUIT envelope: the device asks for a resource, installs and reboots", arguments: Link.allCases)
    func suitEnvelopeWithResource(_ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: ["--suit", "--swap-time", "0.2"] + (link == .serial ? ["--reset-vanish"] : [])) { session in
            let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 2, applicationSize: 20 * 1024)
            let suit = try DFUPackages.write(Data(envelope.bytes), "root.suit", in: session.directory)
            let app = try DFUPackages.write(Data(try #require(envelope.detachedResources["file://app.bin"])), "app.bin", in: session.directory)
            // Without the resource the device's request cannot be served: a clear error.
            let missing = try await session.smp(["dfu", suit], timeout: 60)
            expectStatus(missing, SMPExit.file)
            #expect(missing.stderr.contains("app.bin") && missing.stderr.contains("--resource"))

            let run = try await session.smp(["--json", "dfu", suit, "--resource", "app.bin=\(app)"], timeout: 60)
            expectSuccess(run)
            let logs = dfuEvents(run).compactMap { $0["message"] as? String }
            #expect(logs.contains { $0.contains("asks for resource file://app.bin") }, "\(logs)")
            let after = try await session.imageList()
            #expect(after.first { $0.active }?.version == "2", "installed root manifest: \(after)")
            #expect(after.first { $0.active }?.hash == hex(Data(envelope.digest)))
        }
    }

    @Test("SUIT zip: envelope and cache partition", arguments: [Link.udp])
    func suitZipWithCache(_ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: ["--suit", "--swap-time", "0.2"]) { session in
            let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 3, applicationSize: 8 * 1024)
            let zip = try DFUPackages.write(try DFUPackages.suitZip(envelope), "dfu_application.zip", in: session.directory)
            let run = try await session.smp(["--json", "dfu", zip], timeout: 60)
            expectSuccess(run)
            let logs = dfuEvents(run).compactMap { $0["message"] as? String }
            #expect(logs.contains { $0.contains("uploading SUIT cache") })
            #expect(!logs.contains { $0.contains("asks for resource") }, "the cache held the image: \(logs)")
            let after = try await session.imageList()
            #expect(after.first { $0.active }?.version == "3", "\(after)")
        }
    }

    @Test("a killed smp dfu resumes from the device's offset when run again", .timeLimit(.minutes(10)))
    func resumeAfterKill() async throws {
        try await withDFUSimulator(.serial, extraArguments: ["--baud", "230400", "--swap-time", "0.2"]) { session in
            let image = try DFUPackages.image(size: 96 * 1024, seed: 9)
            let path = try DFUPackages.write(image.data, "app_update.bin", in: session.directory)
            // Killed (SIGKILL) while uploading: once four chunks are answered, not after a time (a loaded
            // machine once had sent nothing after 2.5 s).
            let first = try await TransferEndToEndTests.runStopped(
                ["-v", "--device", session.device, "dfu", path, "--mode", "upload-only"], after: 4,
                of: "<- write-response image(1) cmd 1", signal: SIGKILL)
            #expect(first.signalled, "the first run must still be uploading when killed: \(first.stderr.suffix(800))")

            let second = try await session.smp(["--json", "dfu", path, "--mode", "test-and-confirm"], timeout: 60)
            expectSuccess(second)
            let logs = dfuEvents(second).compactMap { $0["message"] as? String }
            let resume = try #require(logs.first { $0.hasPrefix("resuming image 0") }, "\(logs)")
            let result = try #require(dfuResult(second))
            let images = try #require(result["images"] as? [[String: Any]])
            let resumedFrom = try #require(jsonInt(images.first?["resumed_from"]))
            // The device holds the four answered chunks at least, and not the whole image.
            #expect(resumedFrom > 0 && resumedFrom < image.data.count, "resumed at \(resumedFrom)")
            #expect(resume.contains("offset \(resumedFrom) of \(image.data.count)"))
            #expect(jsonInt(images.first?["bytes_sent"]) == image.data.count - resumedFrom, "fewer bytes sent")
            let after = try await session.imageList()
            #expect(after.contains { $0.active && $0.confirmed && $0.hash == hex(image.hash) }, "\(after)")
        }
    }

    @Test("the live view: states, progress and the final image list", arguments: Link.allCases)
    func humanOutput(_ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: Self.simArguments(link, bootloader: "swap-scratch")) { session in
            let image = try DFUPackages.image(version: (2, 0, 0))
            let path = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["dfu", path, "--mode", "test-and-confirm", "--pipeline", "2", "--alignment", "4"], timeout: 60)
            expectSuccess(run)
            for text in ["» uploading", "» marking for a test boot", "» resetting", "» waiting for the device to come back",
                         "» confirming", "image 0: 100%", "done: uploaded image(s) 0", "image 0 slot 0: version 2.0.0 active confirmed"] {
                #expect(run.stdout.contains(text), "missing \"\(text)\" in:\n\(run.stdout)")
            }
        }
    }

    @Test("--no-reset leaves the install to the next reset")
    func noReset() async throws {
        try await withDFUSimulator(.udp, extraArguments: Self.simArguments(.udp, bootloader: "swap-scratch")) { session in
            let image = try DFUPackages.image()
            let path = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "dfu", path, "--no-reset"], timeout: 60)
            expectSuccess(run)
            #expect(dfuResult(run)?["reset"] as? Bool == false)
            let pending = try await session.imageList()
            #expect(pending.contains { $0.hash == hex(image.hash) && $0.pending && $0.permanent }, "\(pending)")
            let after = try await session.resetAndWait()
            #expect(after.contains { $0.hash == hex(image.hash) && $0.active && $0.confirmed }, "\(after)")
        }
    }

    @Test("a device that does not come back fails with exit 75 and a clear message")
    func deviceGone() async throws {
        try await withDFUSimulator(.udp, extraArguments: Self.simArguments(.udp, bootloader: "swap-scratch", extra: ["--swap-time", "30"])) { session in
            let path = try DFUPackages.write(try DFUPackages.image().data, "app.bin", in: session.directory)
            let run = try await session.smp(["dfu", path, "--reconnect-timeout", "2"], timeout: 60)
            expectStatus(run, SMPExit.timeout)
            #expect(run.stderr.contains("did not come back within 2 s"), "\(run.stderr)")
        }
    }

    @Test("bad input: missing file, not a package, bad options; --dry-run needs no device")
    func badInput() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let missing = try await runSMP(["--device", "sim:", "dfu", directory.path("nope.bin")])
        expectStatus(missing, SMPExit.file)
        let text = try DFUPackages.write(Data("hello".utf8), "notes.txt", in: directory)
        let notPackage = try await runSMP(["--device", "sim:", "dfu", text])
        expectStatus(notPackage, SMPExit.file)
        #expect(notPackage.stderr.contains(".bin") && notPackage.stderr.contains(".zip"))
        let badMode = try await runSMP(["--device", "sim:", "dfu", text, "--mode", "sideways"])
        expectStatus(badMode, SMPExit.usage)
        #expect(badMode.stderr.contains("confirm-only"))
        let badBootloader = try await runSMP(["--device", "sim:", "dfu", text, "--bootloader-mode", "warp"])
        expectStatus(badBootloader, SMPExit.usage)
        let image = try DFUPackages.image()
        let path = try DFUPackages.write(image.data, "app.bin", in: directory)
        let dry = try await runSMP(["dfu", path, "--dry-run"])
        expectSuccess(dry)
        #expect(dry.stdout.contains(hex(image.hash)))
    }

    @Test("smp demo upgrades the built-in simulated device step by step")
    func demo() async throws {
        let run = try await runSMP(["demo", "--size", "64", "--swap-time", "0.2"], timeout: 60)
        expectSuccess(run)
        for text in ["[1/5]", "[5/5]", "» uploading", "» confirming", "The device runs the new image, confirmed.",
                     "Still the new image: the upgrade is permanent."] {
            #expect(run.stdout.contains(text), "missing \"\(text)\" in:\n\(run.stdout)")
        }
        let testOnly = try await runSMP(["demo", "--size", "32", "--swap-time", "0", "--mode", "test-only", "--images", "2"], timeout: 60)
        expectSuccess(testOnly)
        #expect(testOnly.stdout.contains("Back to the old image (MCUboot reverted it)."), "\(testOnly.stdout)")
    }
}
