import Foundation
import TestSupport
import Testing

/// The README's library examples (Sources/Examples, built with the package) run against smp-sim, and the
/// README shows exactly their code: a README example can no longer fail to compile or to run.
@Suite("README library examples")
struct ExampleTests {
    /// The examples' main files, by executable name.
    static let examples: [(executable: String, source: String)] = [
        ("example-udp-upgrade", "Sources/Examples/UDPUpgrade/main.swift"),
        ("example-serial-upgrade", "Sources/Examples/SerialUpgrade/main.swift"),
        ("example-udp-fleet", "Sources/Examples/UDPFleetQuery/main.swift"),
        ("example-ble-upload", "Sources/Examples/BLEUpload/main.swift"),
        ("example-file-transfer", "Sources/Examples/FileTransfer/main.swift"),
    ]

    static func executable(_ name: String) throws -> URL {
        let url = TestEnvironment.binaryDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw E2EError("\(url.path) is missing: run `swift build` first (the examples are targets of the package)")
        }
        return url
    }

    /// The ```swift blocks of a Markdown text.
    static func swiftBlocks(_ markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.joined(separator: "\n") + "\n")
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test func theReadmeShowsEachExampleVerbatim() throws {
        let root = TestEnvironment.repositoryRoot
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = Self.swiftBlocks(readme)
        let sources = try Self.examples.map {
            try String(contentsOf: root.appendingPathComponent($0.source), encoding: .utf8)
        }
        // (Booleans first: the expectations' messages stay short.)
        for block in blocks {
            let isExample = sources.contains(block)
            #expect(isExample, "a ```swift block of README.md is not one of Sources/Examples/*/main.swift (edit the example, then copy it whole into README.md):\n\(block)")
        }
        for (example, source) in zip(Self.examples, sources) {
            let shown = blocks.contains(source)
            #expect(shown, "README.md does not show \(example.source) as it is (copy the whole file into a ```swift block)")
        }
        // Every example directory is one of the list above (and so built, run and shown).
        let directories = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Sources/Examples").path)
        #expect(Set(directories.map { "Sources/Examples/\($0)/main.swift" }) == Set(Self.examples.map(\.source)))
    }

    @Test func udpUpgradeExample() async throws {
        try await withDFUSimulator(.udp) { session in
            let (image, _) = try DFUPackages.image(version: (1, 1, 0), size: 64 * 1024, seed: 11)
            let path = try DFUPackages.write(image, "app_update.bin", in: session.directory)
            let run = try await ProcessRunner.run(
                try Self.executable("example-udp-upgrade"), [session.device, path, "0"], timeout: 120)
            expectSuccess(run)
            #expect(run.stdout.contains("echo: hello\n"), "\(run)")
            #expect(run.stdout.contains("image 0 slot 0: 1.0.0 active=true confirmed=true\n"), "\(run)")
            for state in ["upload", "test", "reset", "confirm", "success"] {
                #expect(run.stdout.contains("state: \(state)\n"), "no state \(state): \(run)")
            }
            #expect(run.stdout.contains("uploaded \(image.count) of \(image.count) bytes"), "\(run)")
            #expect(run.stdout.contains("uploaded images: [0]"), "\(run)")
            #expect(run.stdout.contains("image 0 slot 0: 1.1.0 active=true confirmed=true\n"), "\(run)")
        }
    }

    @Test func udpUpgradeExampleExplainsItsUsage() async throws {
        let run = try await ProcessRunner.run(try Self.executable("example-udp-upgrade"), ["serial:/dev/ttyACM0"], timeout: 30)
        #expect(run.status == 64, "\(run)")
        #expect(run.stdout.contains("usage: example-udp-upgrade udp:HOST[:PORT] PACKAGE"), "\(run)")
    }

    @Test func serialUpgradeExampleFollowsTheVanishingPort() async throws {
        try await withDFUSimulator(.serial, extraArguments: ["--reset-vanish"]) { session in
            let (image, _) = try DFUPackages.image(version: (1, 2, 0), size: 32 * 1024, seed: 12)
            let path = try DFUPackages.write(image, "app_update.bin", in: session.directory)
            let port = try #require(session.sim.ptyLink)
            let run = try await ProcessRunner.run(try Self.executable("example-serial-upgrade"), [port, path, "0"], timeout: 120)
            expectSuccess(run)
            #expect(run.stdout.contains("upload 100%"), "\(run)")
            #expect(run.stdout.contains("state: success\n"), "\(run)")
            #expect(run.stdout.contains("image 0: app_update.bin uploaded\n"), "\(run)")
            #expect(run.stdout.contains("running: image 0 version 1.2.0, confirmed=true\n"), "\(run)")
        }
    }

    @Test func serialUpgradeExampleNamesAMissingPackage() async throws {
        try await withSimulator(.serial) { session in
            let port = try #require(session.sim.ptyLink)
            let missing = session.directory.path("no-such.zip")
            let run = try await ProcessRunner.run(try Self.executable("example-serial-upgrade"), [port, missing], timeout: 60)
            #expect(run.status == 1, "\(run)")
            #expect(run.stdout.contains("upgrade failed:") && run.stdout.contains("no-such.zip"), "\(run)")
        }
    }

    @Test func udpFleetExampleReportsEveryDevice() async throws {
        let first = try await SimProcess.start(["--udp", "127.0.0.1:0"])
        defer { first.stop() }
        let second = try await SimProcess.start(["--udp", "127.0.0.1:0", "--buf-size", "1024", "--buf-count", "6"])
        defer { second.stop() }
        // A port where nothing answers: bound by us, never read.
        let silent = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(silent) }
        let silentPort = try #require(bindToLoopback(silent))
        let addresses = [first.udpURI, second.udpURI, "udp:127.0.0.1:\(silentPort)"]
        let run = try await ProcessRunner.run(try Self.executable("example-udp-fleet"), addresses, timeout: 60)
        #expect(run.status == 1, "one device is silent: \(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 3, "\(run)")
        #expect(lines[0].hasPrefix("\(first.udpURI)  ok  echo "), "\(run)")
        #expect(lines[0].hasSuffix(", buffers 4 x 2048 B, image 0 1.0.0"), "\(run)")
        #expect(lines[1].hasPrefix("\(second.udpURI)  ok  echo "), "\(run)")
        #expect(lines[1].hasSuffix(", buffers 6 x 1024 B, image 0 1.0.0"), "\(run)")
        #expect(lines[2].hasPrefix("udp:127.0.0.1:\(silentPort)  FAILED  "), "\(run)")
    }

    @Test(arguments: [Link.serial, Link.udp])
    func fileTransferExampleRoundTrip(_ link: Link) async throws {
        try await withSimulator(link) { session in
            let payload = randomBytes(48 * 1024 + 7)
            let local = session.directory.path("settings.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            let run = try await ProcessRunner.run(
                try Self.executable("example-file-transfer"), [session.device, local, "/lfs1/settings.bin"], timeout: 120)
            expectSuccess(run)
            #expect(run.stdout.contains("upload 100%: \(payload.count) of \(payload.count) bytes"), "\(run)")
            #expect(run.stdout.contains("upload: \(payload.count) bytes, verified by SHA-256\n"), "\(run)")
            #expect(run.stdout.contains("download: \(payload.count) bytes, verified by SHA-256\n"), "\(run)")
            #expect(run.stdout.hasSuffix("the device holds the same bytes\n"), "\(run)")
        }
    }

    @Test(.enabled(if: BLERig.isAvailable, BLERig.skipReason))
    func bleUploadExample() async throws {
        let rig = try BLERig.start()
        defer { rig.stop() }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sim = try await SimProcess.start(["--ble", BLERig.peripheralAdapter], environment: rig.environment)
        defer { sim.stop() }
        let (image, hash) = try DFUPackages.image(version: (3, 0, 1), size: 40 * 1024, seed: 13)
        let path = try DFUPackages.write(image, "app_update.bin", in: directory)
        let run = try await ProcessRunner.run(
            try Self.executable("example-ble-upload"), ["ble:\(BLERig.peripheralAddress)", path], timeout: 120,
            environment: rig.environment)
        expectSuccess(run)
        let hex = hash.map { String(format: "%02x", $0) }.joined()
        #expect(run.stdout.contains("uploading version 3.0.1, hash \(hex)\n"), "\(run)")
        #expect(run.stdout.contains("\(image.count) of \(image.count) bytes"), "\(run)")
        #expect(run.stdout.contains("image 0 slot 1: 3.0.1 pending=true active=false\n"), "\(run)")
        #expect(run.stdout.hasSuffix("reset: the device boots the new image once\n"), "\(run)")
    }
}
