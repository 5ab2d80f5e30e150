import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore
import McuMgrSimulator

/// `smp demo`: a whole firmware upgrade of the built-in simulated device, step by step.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Upgrade a simulated device end to end: build a firmware image in memory and install it, step by step.",
        discussion: """
            Needs no hardware: builds an MCUboot image in memory (McuMgrImageBuilder), starts a simulated \
            device inside the tool (MCUboot swap with test/confirm/revert, the same device as `smp-sim`), \
            and upgrades it as `smp dfu` upgrades a real board, printing each step.
            """)

    @Option(help: ArgumentHelp("confirm-only, test-and-confirm, test-only or upload-only.", valueName: "mode"))
    var mode: String = "test-and-confirm"

    @Option(help: "Number of images: 1 (application) or 2 (application and network core).")
    var images: Int = 1

    @Option(help: ArgumentHelp("Size of each demo image in KiB.", valueName: "KiB"))
    var size: Int = 256

    @Option(help: ArgumentHelp("Seconds the simulated device takes to swap images after the reset.", valueName: "seconds"))
    var swapTime: Double = 1

    @Flag(help: "Print one JSON object per event instead of text.")
    var json = false

    @Flag(name: [.short, .long], help: "Show protocol details.")
    var verbose = false

    func validate() throws {
        _ = try DFUCommand.parseMode(mode)
        guard (1...2).contains(images) else { throw ValidationError("--images must be 1 or 2") }
        guard (1...4096).contains(size) else { throw ValidationError("--size must be 1...4096 KiB") }
        guard swapTime >= 0, swapTime <= 60 else { throw ValidationError("--swap-time must be 0...60 seconds") }
    }

    func run() async throws {
        do {
            try await demo()
        } catch let error as McuMgrError {
            CommandRunner.report(error, json: json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        }
    }

    private func step(_ number: Int, _ text: String) {
        guard !json else { return }
        Terminal.print("\n[\(number)/5] \(text)")
    }

    private func say(_ text: String) {
        if !json { Terminal.print(text) }
    }

    private func demo() async throws {
        let upgradeMode = try DFUCommand.parseMode(mode)

        step(1, "Building a demo firmware package in memory")
        var files: [McuMgrPackage.Image] = []
        let names = ["app_update.bin", "net_core_update.bin"]
        for index in 0..<images {
            var rng = SystemRandomNumberGenerator()
            let body = Data((0..<(size * 1024 - 0x200 - 48)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let version = McuMgrImageVersion(major: 1, minor: 1, revision: 0, build: UInt32(index))
            let image = try McuMgrImageBuilder(version: version).image(body: body)
            files.append(
                McuMgrPackage.Image(
                    image: index, contentType: .mcubootImage, hash: image.hash, version: version.description,
                    data: image.data, fileName: names[index]))
            say("  image \(index) (\(index == 0 ? "application core" : "network core")): \(names[index]), "
                + "\(Terminal.bytes(Double(image.data.count))), version \(version), hash \(JSONRendering.hex(Array(image.hash)).prefix(16))…")
        }

        step(2, "Starting a simulated device (in this process): MCUboot swap using scratch, version 1.0.0")
        var simulator = SimulatorConfiguration()
        simulator.imageCount = images
        simulator.swapTime = .milliseconds(Int64(swapTime * 1000))
        simulator.imageSlotSize = max(simulator.imageSlotSize, size * 1024 + 4096)
        let device = SimulatedDevice(configuration: simulator)
        let transport = InMemorySimulatorTransport(device: device, options: .init(latency: .milliseconds(10)))
        let client = McuMgrClient(transport: transport, configuration: .init(timeout: .seconds(5)))
        defer { Task { await client.close() } }
        let before = try await ImageManager(client: client).list()
        for slot in before.images { say("  " + DFUView.slotText(slot)) }

        step(3, "Upgrading in \(DFUCommand.modeName(upgradeMode)) mode (what `smp dfu` does with a real board)")
        let configuration = FirmwareUpgradeConfiguration(
            upgradeMode: upgradeMode, estimatedSwapTime: .milliseconds(Int64(swapTime * 1000)),
            resetDelay: .milliseconds(300), reconnectTimeout: .seconds(30), retryInterval: .milliseconds(250))
        let manager = FirmwareUpgradeManager(
            client: client, reconnection: .reopen, options: .init(reconnectProbeTimeout: .milliseconds(500)))
        let view = DFUView(json: json, verbose: verbose)
        let result = try await DFUCommand.run(manager, images: files, configuration: configuration, view: view)

        step(4, "What the device reports now")
        for slot in result.finalImages { say("  " + DFUView.slotText(slot)) }
        let running = result.finalImages.first { $0.image == 0 && $0.active }
        let runsNew = running?.hash == files[0].hash
        switch upgradeMode {
        case .uploadOnly:
            say("  The new image waits in slot 1; the device still runs 1.0.0 (upload-only changes nothing else).")
        case .testOnly:
            say(runsNew ? "  The device runs the new image on trial: it is not confirmed." : "  The device does not run the new image.")
        default:
            say(runsNew && running?.confirmed == true
                ? "  The device runs the new image, confirmed." : "  The device does not run the new image confirmed.")
        }

        step(5, "Resetting once more: a confirmed image stays, an unconfirmed one is reverted")
        try await DefaultManager(client: client).reset()
        try await Task.sleep(for: .milliseconds(Int64(300 + swapTime * 1000 + 200)))
        var after: McuMgrImageStateResponse?
        for _ in 0..<40 {
            if let list = try? await ImageManager(client: client).list() { after = list; break }
            try await Task.sleep(for: .milliseconds(250))
        }
        guard let after else {
            throw McuMgrError(.timeout, "the simulated device did not come back after the second reset")
        }
        for slot in after.images { say("  " + DFUView.slotText(slot)) }
        if json {
            Terminal.print(JSONRendering.render(.textMap([
                "event": "demo", "after_second_reset": .array(after.images.map(DFUView.slotItem)),
            ])))
        } else {
            let runningNow = after.images.first { $0.image == 0 && $0.active }
            say(runningNow?.hash == files[0].hash
                ? "  Still the new image: the upgrade is permanent." : "  Back to the old image (MCUboot reverted it).")
            say("""

                Next: the same with a simulated device over a serial port (or your board):
                  smp-sim --pty-link /tmp/smp-tty &
                  smp --device serial:/tmp/smp-tty dfu app_update.bin --mode test-and-confirm
                """)
        }
    }
}
