import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Many devices from one `smp` process: `smp dfu` (and `os echo`, `image upload`) given several
/// `--device`s or a `--devices` file, against several `smp-sim` processes over UDP and a pty. Each device
/// gets its own session and result; a silent board and a board that refuses the image fail on their own
/// while the others finish; the JSON lines and the JUnit report say which and why.
@Suite("smp with many devices", .timeLimit(.minutes(10)))
struct FleetTests {
    /// Simulators started for one test, stopped (and their directory removed) in all paths.
    final class Rig: @unchecked Sendable {
        let directory: TemporaryDirectory
        private(set) var sims: [SimProcess] = []

        init() throws { directory = try TemporaryDirectory() }

        /// Starts an smp-sim serving UDP on a free loopback port; returns its URI.
        func udp(_ extra: [String] = []) async throws -> (uri: String, session: SimSession) {
            let sim = try await SimProcess.start(["--udp", "127.0.0.1:0", "--swap-time", "0.2"] + extra)
            sims.append(sim)
            return (sim.udpURI, SimSession(sim: sim, link: .udp, directory: directory))
        }

        /// Starts an smp-sim on a pty that vanishes on reset (USB CDC-like); returns its URI.
        func serial(_ name: String, _ extra: [String] = []) async throws -> (uri: String, session: SimSession) {
            let sim = try await SimProcess.start(
                ["--pty-link", directory.path(name), "--swap-time", "0.2", "--reset-vanish"] + extra)
            sims.append(sim)
            return (sim.serialURI, SimSession(sim: sim, link: .serial, directory: directory))
        }

        func stop() {
            for sim in sims { sim.stop() }
            directory.remove()
        }
    }

    static func withRig<R: Sendable>(_ body: @escaping @Sendable (Rig) async throws -> R) async throws -> R {
        try await DFUConcurrencyLimit.shared.run {
            let rig = try Rig()
            defer { rig.stop() }
            return try await body(rig)
        }
    }

    static func smp(_ arguments: [String], timeout: Double = 120) async throws -> ProcessResult {
        try TestEnvironment.requireBinaries()
        return try await ProcessRunner.run(TestEnvironment.smp, arguments, timeout: timeout)
    }

    /// The JSON objects of stdout, one per line; a line that is not one is recorded as an issue.
    static func lines(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        result.stdout.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("not a JSON object: \(line)\n\(result)", sourceLocation: sourceLocation)
                return nil
            }
            return object
        }
    }

    /// The `result` line of each device, by device.
    static func results(_ events: [[String: Any]]) -> [String: [String: Any]] {
        var byDevice: [String: [String: Any]] = [:]
        for event in events where event["event"] as? String == "result" {
            if let device = event["device"] as? String { byDevice[device] = event }
        }
        return byDevice
    }

    // MARK: dfu

    @Test("dfu of one package to three devices (two over UDP, one on a pty): all succeed")
    func dfuToThreeDevices() async throws {
        try await Self.withRig { rig in
            let a = try await rig.udp()
            let b = try await rig.udp()
            let c = try await rig.serial("tty-c")
            let image = try DFUPackages.image(version: (1, 2, 0))
            let package = try DFUPackages.write(image.data, "app_update.bin", in: rig.directory)
            let junit = rig.directory.path("dfu.xml")
            let devices = [a.uri, b.uri, c.uri]
            let result = try await Self.smp(
                ["--json", "dfu", package, "--junit", junit] + devices.flatMap { ["--device", $0] })
            expectSuccess(result)

            let events = Self.lines(result)
            // Every event but the package, the device list and the summary names its device.
            #expect(events.first?["event"] as? String == "package")
            let list = try #require(events.first { $0["event"] as? String == "devices" })
            #expect(list["devices"] as? [String] == devices)
            for event in events.dropLast() where !["package", "devices"].contains(event["event"] as? String ?? "") {
                #expect(devices.contains(event["device"] as? String ?? ""), "event without a device: \(event)")
            }
            let states = events.filter { $0["event"] as? String == "state" }
            #expect(Set(states.compactMap { $0["device"] as? String }) == Set(devices))
            let results = Self.results(events)
            #expect(Set(results.keys) == Set(devices))
            for device in devices {
                let item = try #require(results[device])
                #expect(item["status"] as? String == "success", "\(item)")
                #expect(jsonInt(item["bytes"]) == image.data.count, "\(item)")
                let finals = item["final_images"] as? [[String: Any]] ?? []
                #expect(finals.contains { $0["hash"] as? String == hex(image.hash) && $0["active"] as? Bool == true })
            }
            let summary = try #require(events.last)
            #expect(summary["event"] as? String == "summary")
            #expect(jsonInt(summary["succeeded"]) == 3 && jsonInt(summary["failed"]) == 0 && jsonInt(summary["exit_code"]) == 0)

            // Each device runs the new image, confirmed.
            for session in [a.session, b.session, c.session] {
                let slots = try await session.imageList()
                #expect(
                    slots.contains { $0.hash == hex(image.hash) && $0.slot == 0 && $0.active && $0.confirmed },
                    "\(session.device): \(slots)")
            }

            let report = try JUnitReport(path: junit)
            #expect(report.suites.first?["name"] == "smp dfu")
            #expect(report.suites.first?["tests"] == "3" && report.suites.first?["failures"] == "0")
            #expect(report.cases.map { $0["name"] ?? "" } == devices)
            #expect(report.failures.isEmpty)
        }
    }

    @Test("dfu with one silent board and one refusing the image: the others finish, both failures named")
    func dfuWithASilentAndARefusingBoard() async throws {
        try await Self.withRig { rig in
            let good1 = try await rig.udp()
            let silent = try await rig.udp(["--faults", "silent-after=0"])
            let small = try await rig.udp(["--slot-size", "16384"])
            let good2 = try await rig.serial("tty-good")
            let image = try DFUPackages.image(version: (1, 3, 0), size: 24 * 1024)
            let package = try DFUPackages.write(image.data, "app_update.bin", in: rig.directory)
            let devices = [good1.uri, silent.uri, small.uri, good2.uri]
            let deviceArguments = devices.flatMap { ["--device", $0] }
            let junit = rig.directory.path("dfu.xml")

            // Human output: the summary table on stdout, the failures on stderr.
            let human = try await Self.smp(["--timeout", "1", "dfu", package, "--junit", junit] + deviceArguments)
            // A timeout (75) and a device error (1) differ: exit 1.
            expectStatus(human, SMPExit.device)
            #expect(human.stderr.contains("error: 2 of 4 devices failed:"), "\(human)")
            let stderrLines = human.stderr.split(separator: "\n").map(String.init)
            let silentLine = try #require(stderrLines.first { $0.contains(silent.uri) }, "\(human)")
            #expect(silentLine.contains("timeout (exit 75)") && silentLine.contains("did not answer"), "\(silentLine)")
            let smallLine = try #require(stderrLines.first { $0.contains(small.uri) }, "\(human)")
            #expect(smallLine.contains("device (exit 1)") && smallLine.contains("larger than the slot"), "\(smallLine)")
            #expect(!stderrLines.contains { $0.contains(good1.uri) || $0.contains(good2.uri) }, "\(human)")
            let table = human.stdout.split(separator: "\n").map(String.init)
            for device in [good1.uri, good2.uri] {
                #expect(table.contains { $0.hasPrefix(device) && $0.contains(" ok ") }, "\(device): \(human.stdout)")
            }
            #expect(table.contains { $0.hasPrefix(silent.uri) && $0.contains("FAILED") && $0.contains("timeout:") })
            #expect(table.contains { $0.hasPrefix(small.uri) && $0.contains("FAILED") && $0.contains("device:") })
            #expect(table.contains("2 of 4 devices succeeded"))

            let report = try JUnitReport(path: junit)
            #expect(report.suites.first?["tests"] == "4" && report.suites.first?["failures"] == "2")
            #expect(report.cases.map { $0["name"] ?? "" } == devices)
            #expect(report.failures.map { $0["type"] ?? "" } == ["timeout", "device"])
            #expect(report.failures.first?["message"]?.contains("(exit 75)") == true)
            for testCase in report.cases { #expect(Double(testCase["time"] ?? "") != nil) }

            for session in [good1.session, good2.session] {
                let slots = try await session.imageList()
                #expect(slots.contains { $0.hash == hex(image.hash) && $0.active && $0.confirmed }, "\(slots)")
            }
            let refused = try await small.session.imageList()
            #expect(!refused.contains { $0.hash == hex(image.hash) }, "\(refused)")

            // The same run under --json: one result per device with the failure's kind and exit code.
            let json = try await Self.smp(["--json", "--timeout", "1", "dfu", package] + deviceArguments)
            expectStatus(json, SMPExit.device)
            #expect(json.stderr.isEmpty, "\(json)")
            let events = Self.lines(json)
            let results = Self.results(events)
            #expect(results[good1.uri]?["status"] as? String == "success")
            #expect(results[good2.uri]?["status"] as? String == "success")
            #expect(results[silent.uri]?["status"] as? String == "failed")
            #expect(results[silent.uri]?["kind"] as? String == "timeout")
            #expect(jsonInt(results[silent.uri]?["exit_code"]) == 75)
            #expect(results[small.uri]?["kind"] as? String == "device")
            #expect(jsonInt(results[small.uri]?["group_rc"]) == 30, "\(String(describing: results[small.uri]))")
            let summary = try #require(events.last)
            #expect(summary["failed_devices"] as? [String] == [silent.uri, small.uri])
            #expect(jsonInt(summary["exit_code"]) == 1)
        }
    }

    // MARK: Other commands

    @Test("os echo to many devices, from --device and a --devices file")
    func echoToManyDevices() async throws {
        try await Self.withRig { rig in
            let a = try await rig.udp()
            let b = try await rig.udp()
            let c = try await rig.serial("tty-echo")
            let list = rig.directory.path("devices.txt")
            try "# the rig's boards\n\(a.uri)\n\n   \(b.uri)   # second board\n".write(
                toFile: list, atomically: true, encoding: .utf8)

            let json = try await Self.smp(["--json", "--devices", list, "--device", c.uri, "os", "echo", "hello", "fleet"])
            expectSuccess(json)
            let results = Self.results(Self.lines(json))
            #expect(Set(results.keys) == [a.uri, b.uri, c.uri])
            for item in results.values { #expect(item["r"] as? String == "hello fleet", "\(item)") }

            let human = try await Self.smp(["--devices", list, "os", "echo", "hi"])
            expectSuccess(human)
            let lines = human.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.hasPrefix(a.uri) && $0.hasSuffix("hi") && $0.contains(" ok ") }, "\(human)")
            #expect(lines.contains("2 of 2 devices succeeded"), "\(human)")

            // One at a time: a device begins only after the one before it finished.
            let serial = try await Self.smp(["--json", "--max-parallel", "1", "--devices", list, "os", "echo", "x"])
            expectSuccess(serial)
            let events = Self.lines(serial)
            #expect(jsonInt(events.first?["max_parallel"]) == 1)
            let begins = events.enumerated().filter { $0.element["event"] as? String == "begin" }
            let ends = events.enumerated().filter { $0.element["event"] as? String == "finished" }
            #expect(begins.map { $0.element["device"] as? String } == [a.uri, b.uri])
            #expect(ends.map { $0.element["device"] as? String } == [a.uri, b.uri])
            if begins.count == 2, ends.count == 2 {
                #expect(begins[0].offset < ends[0].offset && ends[0].offset < begins[1].offset && begins[1].offset < ends[1].offset)
            }
        }
    }

    @Test("image upload to many devices")
    func imageUploadToManyDevices() async throws {
        try await Self.withRig { rig in
            let a = try await rig.udp()
            let b = try await rig.serial("tty-upload")
            let image = try DFUPackages.image(version: (1, 4, 0), size: 16 * 1024)
            let file = try DFUPackages.write(image.data, "app.bin", in: rig.directory)
            let result = try await Self.smp(["--json", "-d", a.uri, "-d", b.uri, "image", "upload", file])
            expectSuccess(result)
            let results = Self.results(Self.lines(result))
            for device in [a.uri, b.uri] {
                #expect(jsonInt(results[device]?["len"]) == image.data.count, "\(String(describing: results[device]))")
            }
            for session in [a.session, b.session] {
                let slots = try await session.imageList()
                #expect(slots.contains { $0.slot == 1 && $0.hash == hex(image.hash) }, "\(slots)")
            }
        }
    }

    @Test("devices that all fail alike give their exit code; usage errors before any device is touched")
    func exitRulesAndUsageErrors() async throws {
        // Two loopback ports with nothing behind them: both fail the same way.
        var fds: [Int32] = []
        var ports: [Int] = []
        for _ in 0..<2 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            fds.append(fd)
            ports.append(try #require(bindToLoopback(fd)))
        }
        defer { for fd in fds { close(fd) } }  // bound and never read: silent boards
        let silent = ports.map { "udp:127.0.0.1:\($0)" }
        let result = try await Self.smp(
            ["--json", "--timeout", "0.5"] + silent.flatMap { ["--device", $0] } + ["os", "echo", "hi"], timeout: 60)
        expectStatus(result, SMPExit.timeout)
        let results = Self.results(Self.lines(result))
        #expect(results.values.allSatisfy { $0["kind"] as? String == "timeout" })

        // A board that is gone fails alone, with its own exit code; the other answers.
        let gone = try await Self.smp(["--json", "-d", "serial:/dev/does-not-exist-fleet", "-d", "sim:", "os", "echo", "x"])
        expectStatus(gone, SMPExit.transport)
        let goneResults = Self.results(Self.lines(gone))
        #expect(goneResults["serial:/dev/does-not-exist-fleet"]?["kind"] as? String == "transport", "\(gone)")
        #expect(goneResults["sim:"]?["r"] as? String == "x", "\(gone)")

        // A single-device command given several devices names the commands that take many.
        let single = try await Self.smp(["--device", "sim:", "--device", "sim:?latency=1", "os", "params"])
        expectStatus(single, SMPExit.usage)
        #expect(single.stderr.contains("smp dfu, smp image upload, smp fs upload, smp os echo and smp os reset"), "\(single)")

        // The same device twice.
        let twice = try await Self.smp(["--device", silent[0], "--device", "udp://127.0.0.1:\(ports[0])", "os", "echo", "x"])
        expectStatus(twice, SMPExit.usage)
        #expect(twice.stderr.contains("are the same device"), "\(twice)")

        // A device list that is missing.
        let missing = try await Self.smp(["--devices", "/nonexistent/devices.txt", "os", "echo", "x"])
        expectStatus(missing, SMPExit.file)

        // The device list from standard input.
        let piped = try await ProcessRunner.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", "printf '# rig\\nsim:?latency=1\\n\\nsim:?latency=2\\n' | '\(TestEnvironment.smp.path)' --json --devices - os echo piped"],
            timeout: 30)
        expectSuccess(piped)
        let pipedResults = Self.results(Self.lines(piped))
        #expect(Set(pipedResults.keys) == ["sim:?latency=1", "sim:?latency=2"], "\(piped)")
        #expect(pipedResults.values.allSatisfy { $0["r"] as? String == "piped" })

        // One device: the output stays as it was (the echoed text alone); --junit still writes its report.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let one = try await Self.smp(["--device", "sim:", "os", "echo", "just", "one", "--junit", directory.path("one.xml")])
        expectSuccess(one)
        #expect(one.stdout == "just one\n")
        let oneReport = try JUnitReport(path: directory.path("one.xml"))
        #expect(oneReport.cases.map { $0["name"] ?? "" } == ["sim:"] && oneReport.failures.isEmpty)
        let oneSilent = try await Self.smp(
            ["--device", silent[0], "--timeout", "0.5", "os", "echo", "x", "--junit", directory.path("silent.xml")])
        expectStatus(oneSilent, SMPExit.timeout)
        #expect(oneSilent.stderr.hasPrefix("error: "), "\(oneSilent)")
        let silentReport = try JUnitReport(path: directory.path("silent.xml"))
        #expect(silentReport.failures.map { $0["type"] ?? "" } == ["timeout"])
    }
}

/// The elements of a JUnit report file, read with XMLParser (a real parser: malformed XML fails).
final class JUnitReport: NSObject, XMLParserDelegate {
    var suites: [[String: String]] = []
    var cases: [[String: String]] = []
    var failures: [[String: String]] = []

    init(path: String) throws {
        super.init()
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let parser = XMLParser(data: data)
        parser.delegate = self
        guard parser.parse() else {
            throw E2EError("\(path) is not XML (\(String(describing: parser.parserError))): \(String(decoding: data, as: UTF8.self))")
        }
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String]
    ) {
        switch elementName {
        case "testsuite": suites.append(attributes)
        case "testcase": cases.append(attributes)
        case "failure": failures.append(attributes)
        default: break
        }
    }
}
