import Foundation
import McuMgrSimulator
import Testing

/// `smp dfu` against `smp-sim --bootloader-mode firmware-loader` over a pty and UDP: the application reports
/// bootloader mode 7, stores the loader's advertising name, resets with boot_mode 1 into the loader (which
/// answers on the same port), the loader takes the image in slot 0, and after the reset the application
/// runs the uploaded hash.
@Suite("smp dfu through the firmware loader", .timeLimit(.minutes(10)))
struct FirmwareLoaderDFUTests {
    @Test("Nordic's flow with the loader's name stored", arguments: Link.allCases)
    func flowWithTheLoaderName(_ link: Link) async throws {
        try await withDFUSimulator(link, extraArguments: DFUTests.simArguments(link, bootloader: "firmware-loader")) { session in
            let image = try DFUPackages.image(version: (3, 0, 0), size: 24 * 1024, seed: 7)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "dfu", package, "--loader-name", "FL_E2E01"], timeout: 90)
            expectSuccess(run)
            let result = dfuResult(run) ?? [:]
            #expect(result["status"] as? String == "success")
            #expect(jsonInt(result["bootloader_mode"]) == 7)
            #expect(result["reset"] as? Bool == true)
            #expect((result["uploaded"] as? [Any])?.count == 1, "\(result)")
            let states = dfuEvents(run).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
            #expect(
                states.starts(with: ["requestMcuMgrParameters", "bootloaderInfo", "validate", "resetIntoFirmwareLoader", "reconnect", "upload", "reset", "reconnect", "success"]),
                "\(states)")
            let logs = dfuEvents(run).compactMap { $0["message"] as? String }
            #expect(logs.contains { $0.contains("advertise as \"FL_E2E01\"") }, "\(logs)")
            #expect(logs.contains { $0.contains("into its firmware loader (boot mode 1)") }, "\(logs)")

            // The application runs the uploaded image from slot 0.
            let after = try await session.imageList()
            let active = after.first { $0.active }
            #expect(active?.hash == hex(image.hash) && active?.slot == 0 && active?.version == "3.0.0", "\(after)")
            // It kept the name it was given (saved: it lasts across resets, as the loader needs).
            let name = try await session.smp("settings", "read", "fw_loader/adv_name")
            expectSuccess(name)
            #expect(name.stdout.contains("FL_E2E01"), "\(name)")
            // The same package again: nothing to upload, no loader.
            let again = try await session.smp(["--json", "dfu", package, "--loader-name", "FL_E2E01"], timeout: 60)
            expectSuccess(again)
            #expect((dfuResult(again)?["skipped"] as? [Any])?.count == 1)
            let againStates = dfuEvents(again).compactMap { $0["event"] as? String == "state" ? $0["to"] as? String : nil }
            #expect(!againStates.contains("resetIntoFirmwareLoader"), "\(againStates)")
        }
    }

    @Test("without a name nothing is written; the loader answers on the same link")
    func flowWithoutAName() async throws {
        try await withDFUSimulator(.udp, extraArguments: DFUTests.simArguments(.udp, bootloader: "firmware-loader")) { session in
            let image = try DFUPackages.image(version: (2, 5, 0), size: 16 * 1024, seed: 9)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(["--json", "dfu", package], timeout: 90)
            expectSuccess(run)
            let logs = dfuEvents(run).compactMap { $0["message"] as? String }
            #expect(!logs.contains { $0.contains("fw_loader/adv_name") }, "\(logs)")
            let after = try await session.imageList()
            #expect(after.first { $0.active }?.hash == hex(image.hash), "\(after)")
            let name = try await session.smp("settings", "read", "fw_loader/adv_name")
            expectStatus(name, SMPExit.device)
        }
    }

    /// An application without the settings group (the qemu_cortex_m0 build's groups: no settings) answers the
    /// name's write with rc 8: the upgrade goes on through the loader and says the name was not stored.
    @Test("an application without settings: the name is not stored, the upgrade goes on and says so")
    func applicationWithoutSettings() async throws {
        let extra = ["--like", "qemu_cortex_m0", "--bootloader-mode", "firmware-loader", "--swap-time", "0.2"]
        try await withDFUSimulator(.udp, extraArguments: extra) { session in
            let image = try DFUPackages.image(version: (2, 6, 0), size: 16 * 1024, seed: 10)
            let package = try DFUPackages.write(image.data, "app.bin", in: session.directory)
            let run = try await session.smp(
                ["--json", "dfu", package, "--bootloader-mode", "firmware-loader", "--loader-name", "FL_NOSET"], timeout: 90)
            expectSuccess(run)
            let result = dfuResult(run) ?? [:]
            #expect(
                (result["notes"] as? [String])?.contains { $0.contains("did not store the firmware loader's advertising name \"FL_NOSET\"") } == true,
                "\(result)")
            let after = try await session.imageList()
            #expect(after.first { $0.active }?.hash == hex(image.hash), "\(after)")
        }
    }

    /// The loader personality on its own: what the nRF Connect SDK fw_loader sample builds (reset, params,
    /// bootloader info, image and basic groups); echo and the settings group answer rc 8 there, and a normal
    /// reset brings the application back.
    @Test("the simulated loader answers as Nordic's fw_loader sample")
    func loaderPersonality() async throws {
        try await withDFUSimulator(.udp, extraArguments: DFUTests.simArguments(.udp, bootloader: "firmware-loader")) { session in
            expectSuccess(try await session.smp("os", "echo", "app"))
            expectSuccess(try await session.smp("os", "reset", "--boot-mode", "1"))
            let mode = try await session.smpOnceAnswering("os", "bootloader", "mode")
            expectSuccess(mode)
            #expect(mode.stdout.contains("mode 7"), "\(mode)")
            let echo = try await session.smp("os", "echo", "loader")
            expectStatus(echo, SMPExit.device)
            let settings = try await session.smp("settings", "read", "fw_loader/adv_name")
            expectStatus(settings, SMPExit.device)
            expectSuccess(try await session.smp("os", "reset"))
            let back = try await session.smpOnceAnswering("os", "echo", "app again")
            expectSuccess(back)
        }
    }
}
