import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// McuMgrFleet against several in-memory simulated devices at once.
@Suite("McuMgrFleet")
struct McuMgrFleetTests {
    /// A simulated device of the fleet, with the device kept for checks.
    struct SimulatedMember {
        let name: String
        let device: SimulatedDevice
        let transport: InMemorySimulatorTransport

        init(
            _ name: String, options: InMemorySimulatorTransport.Options = .init(),
            _ configure: (inout SimulatorConfiguration) -> Void = { _ in }
        ) {
            var configuration = SimulatorConfiguration()
            configure(&configuration)
            self.name = name
            device = SimulatedDevice(configuration: configuration)
            transport = InMemorySimulatorTransport(device: device, options: options)
        }

        var fleetDevice: McuMgrFleet.Device { McuMgrFleet.Device(name: name, transport: transport) }
    }

    /// Collects a fleet's events.
    final class FleetEventRecorder: StreamRecorder<McuMgrFleetEvent>, @unchecked Sendable {
        init(_ fleet: McuMgrFleet, onEvent: (@Sendable (McuMgrFleetEvent) -> Void)? = nil) {
            super.init(fleet.events(), onEvent: onEvent)
        }

        func events(of device: String) -> [McuMgrFleetEvent] { events.filter { $0.device == device } }

        /// Waits until every one of `count` devices has finished (or 10 s passed).
        func waitForFinished(_ count: Int) async {
            await wait(untilAll: { events in
                events.filter({ if case .finished = $0.kind { true } else { false } }).count >= count
            })
        }
    }

    // MARK: Upgrades

    @Test func upgradesSeveralDevicesAtOnce() async throws {
        let members = (0..<4).map { SimulatedMember("sim-\($0)") }
        let image = DFUFixtures.image()
        let fleet = McuMgrFleet(devices: members.map(\.fleetDevice))
        let recorder = FleetEventRecorder(fleet)
        let results = await fleet.upgrade(
            images: [image], configuration: DFUFixtures.configuration(.confirmOnly), options: DFUFixtures.options)

        #expect(results.map(\.device) == members.map(\.name))
        #expect(results.map(\.index) == [0, 1, 2, 3])
        for (member, result) in zip(members, results) {
            #expect(result.succeeded, "\(member.name): \(String(describing: result.error))")
            #expect(result.value?.summary.uploadedImages == [0])
            #expect(result.bytesSent == image.size)
            let slot = try #require(member.device.slot(holding: image.hash))
            #expect(slot.slot == 0 && slot.active && slot.confirmed)
        }
        await recorder.waitForFinished(4)
        for member in members {
            let events = recorder.events(of: member.name)
            guard case .started = events.first?.kind else {
                Issue.record("\(member.name): first event \(String(describing: events.first?.kind))")
                continue
            }
            guard case .finished(let error, _) = events.last?.kind else {
                Issue.record("\(member.name): last event \(String(describing: events.last?.kind))")
                continue
            }
            #expect(error == nil)
            let completed = events.contains {
                if case .upgrade(.completed) = $0.kind { true } else { false }
            }
            #expect(completed, "\(member.name) has its own upgrade events")
        }
    }

    @Test func aSilentDeviceAndARefusingDeviceFailOnTheirOwnWhileTheOthersFinish() async throws {
        let good = [SimulatedMember("good-0"), SimulatedMember("good-1")]
        let silent = SimulatedMember("silent", options: .init(silent: true))
        // A slot smaller than the image: the device refuses the upload (IMG error 30).
        let small = SimulatedMember("small-slot") { $0.imageSlotSize = 8 * 1024 }
        let image = DFUFixtures.image(size: 24 * 1024)
        // Only the device that never answers gets a short timeout: the others keep the default ones,
        // which a loaded machine meets (with 300 ms for every device, one that answers failed once
        // under load in flake-check).
        var quick = silent.fleetDevice
        quick.client = .init(timeout: .milliseconds(300))
        let fleet = McuMgrFleet(devices: [good[0].fleetDevice, quick, small.fleetDevice, good[1].fleetDevice])
        let results = await fleet.upgrade(
            images: [image], configuration: DFUFixtures.configuration(.confirmOnly),
            options: FirmwareUpgradeManager.Options(progressInterval: .zero))
        #expect(results.map(\.device) == ["good-0", "silent", "small-slot", "good-1"])
        #expect(results[0].succeeded && results[3].succeeded)
        for member in good { #expect(member.device.slot(holding: image.hash)?.active == true) }
        let silentError = try #require(results[1].error)
        #expect(silentError.kind == .timeout, "\(silentError)")
        let refusal = try #require(results[2].error)
        #expect(refusal.kind == .device, "\(refusal)")
        #expect(refusal.groupError?.rc == 30, "\(refusal)")
        #expect(small.device.slot(holding: image.hash) == nil)
    }

    @Test func cancellingStopsEveryDeviceAndStartsNoMore() async throws {
        // Slow links: the upload takes seconds, so cancelling mid-upload is certain.
        let members = (0..<4).map { SimulatedMember("slow-\($0)", options: .init(latency: .milliseconds(40))) }
        let image = DFUFixtures.image(size: 200 * 1024)
        let fleet = McuMgrFleet(devices: members.map(\.fleetDevice), configuration: .init(maximumParallel: 2))
        let progressed = ManagerTestBox(0)
        let recorder = FleetEventRecorder(fleet) { event in
            if case .upgrade(.uploadProgress) = event.kind {
                if progressed.withValue({ $0 += 1; return $0 }) == 3 { fleet.cancel() }
            }
        }
        let results = await fleet.upgrade(
            images: [image], configuration: DFUFixtures.configuration(.confirmOnly), options: DFUFixtures.options)

        #expect(results.count == 4)
        for result in results {
            #expect(result.error?.kind == .cancelled, "\(result.device): \(String(describing: result.result))")
        }
        // The two devices waiting for a place never started.
        await recorder.waitForFinished(4)
        let started = Set(recorder.events.compactMap { if case .started = $0.kind { $0.device } else { nil } })
        #expect(started == ["slow-0", "slow-1"])
        for member in members { #expect(member.device.slot(holding: image.hash) == nil) }
    }

    @Test func cancellingTheCallingTaskCancelsTheRun() async throws {
        let members = (0..<3).map { SimulatedMember("slow-\($0)", options: .init(latency: .milliseconds(40))) }
        let image = DFUFixtures.image(size: 200 * 1024)
        let fleet = McuMgrFleet(devices: members.map(\.fleetDevice))
        let events = fleet.events()
        let task = Task {
            await fleet.upgrade(
                images: [image], configuration: DFUFixtures.configuration(.confirmOnly), options: DFUFixtures.options)
        }
        for await event in events {
            if case .upgrade(.uploadProgress) = event.kind { break }
        }
        task.cancel()
        let results = await task.value
        #expect(results.allSatisfy { $0.error?.kind == .cancelled })
    }

    // MARK: Bounds

    /// Counts the operations inside their critical part and holds them there until opened.
    actor Gate {
        private(set) var running = 0
        private(set) var maximum = 0
        private(set) var entered = 0
        private var open = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func pass() async {
            running += 1
            entered += 1
            maximum = max(maximum, running)
            if !open { await withCheckedContinuation { waiting.append($0) } }
            running -= 1
        }

        func openAll() {
            open = true
            for continuation in waiting { continuation.resume() }
            waiting = []
        }

        /// Waits until `count` operations entered (bounded: only a hang reaches the deadline).
        nonisolated func waitUntilEntered(_ count: Int) async {
            await waitUntil { await self.entered >= count }
        }
    }

    @Test(arguments: [1, 2, 3, 7])
    func maximumParallelBoundsHowManyDevicesRunAtOnce(limit: Int) async throws {
        let members = (0..<7).map { SimulatedMember("sim-\($0)") }
        let fleet = McuMgrFleet(devices: members.map(\.fleetDevice), configuration: .init(maximumParallel: limit))
        #expect(fleet.parallelism == limit)
        let gate = Gate()
        let run = Task {
            await fleet.run { session in
                await gate.pass()
                return try await DefaultManager(client: session.client).echo(session.device)
            }
        }
        await gate.waitUntilEntered(limit)
        // Give wrongly started devices every chance to show up, then count. An absence, checked over a
        // window: the fleet has no event for "no further device will start now" to wait for. A correct
        // fleet passes however slow the machine is (nothing can enter until the gate opens); the window
        // only gives a wrong one the time to show itself, and `maximum` below checks the whole run.
        for _ in 0..<50 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(100))
        #expect(await gate.entered == limit)
        #expect(await gate.running == limit)
        await gate.openAll()
        let results = await run.value
        #expect(await gate.maximum == limit)
        #expect(await gate.entered == 7)
        #expect(results.map { $0.value } == members.map(\.name))
    }

    @Test func aDeviceOverItsTimeLimitFailsWithATimeoutAtTheLimit() async throws {
        // In virtual time: the limit, the durations and the clients run on the fleet's clock.
        let clock = ManualClock()
        let members = [SimulatedMember("quick"), SimulatedMember("stuck")]
        let fleet = McuMgrFleet(
            devices: members.map(\.fleetDevice), configuration: .init(deviceTimeLimit: .seconds(30)), clock: McuMgrClock(clock))
        let stuckWasCancelled = ManagerTestBox(false)
        let events = fleet.events()
        let run = Task {
            await fleet.run { session in
                if session.device == "stuck" {
                    // A device that never answers (the scenario): only the time limit ends it, by cancelling.
                    do {
                        try await clock.sleep(for: .seconds(3600))
                    } catch {
                        stuckWasCancelled.withValue { $0 = Task.isCancelled }
                        throw error
                    }
                }
                return try await DefaultManager(client: session.client).echo(session.device)
            }
        }
        // The quick device is done, without any time passing, and the stuck one sleeps under its limit.
        for await event in events {
            if event.device == "quick", case .finished = event.kind { break }
        }
        await clock.waitForSleepers { $0.contains(.seconds(30)) && $0.contains(.seconds(3600)) }
        clock.advance(to: .seconds(30) - .nanoseconds(1))
        #expect(!stuckWasCancelled.current)
        #expect(clock.pendingDeadlines.contains(.seconds(30)))
        clock.advance(to: .seconds(30))
        let results = await run.value
        #expect(results[0].value == "quick")
        #expect(results[0].duration == .zero)
        let error = try #require(results[1].error)
        #expect(error.kind == .timeout)
        #expect(error.message.contains("stuck") && error.message.contains("30 s"), "\(error.message)")
        // Ended by the limit, which cancelled the operation, exactly when it ran out.
        #expect(stuckWasCancelled.current)
        #expect(results[1].duration == .seconds(30))
    }

    @Test func devicesFromSimURIsEachGetTheirOwnSession() async throws {
        let uris = ["sim:", "sim:?latency=5", "sim:?faults=silent-after=0", "sim:?v1"]
        // A short timeout for the device that falls silent only (see above).
        let fleet = McuMgrFleet(
            devices: uris.map { text in
                McuMgrFleet.Device(name: text, client: text.contains("silent") ? .init(timeout: .milliseconds(400)) : nil) {
                    try SimulatorURI.transport(for: McuMgrDeviceURI(parsing: text))
                }
            })
        let results = await fleet.run { session in
            try await DefaultManager(client: session.client).echo("from \(session.device)")
        }
        #expect(results.map(\.device) == uris)
        #expect(results[0].value == "from sim:")
        #expect(results[1].value == "from sim:?latency=5")
        #expect(results[2].error?.kind == .timeout)
        #expect(results[3].value == "from sim:?v1")
    }

    @Test func aTransportThatCannotBeMadeFailsOnlyItsDevice() async throws {
        let good = SimulatedMember("good")
        let fleet = McuMgrFleet(devices: [
            good.fleetDevice,
            McuMgrFleet.Device(name: "gone") { throw McuMgrError(.transport, "/dev/ttyACM9 is not there") },
        ])
        let results = await fleet.run { session in try await DefaultManager(client: session.client).echo("hi") }
        #expect(results[0].value == "hi")
        #expect(results[1].error?.kind == .transport)
        #expect(results[1].error?.message == "/dev/ttyACM9 is not there")
    }

    @Test func progressAndLogLinesBecomeEventsOfTheirDevice() async throws {
        let members = [SimulatedMember("a"), SimulatedMember("b")]
        let fleet = McuMgrFleet(devices: members.map(\.fleetDevice))
        let recorder = FleetEventRecorder(fleet)
        let image = DFUFixtures.image(size: 8000)
        let results = await fleet.run { session in
            session.log("sending")
            return try await ImageManager(client: session.client).upload(data: image.data) {
                session.reportProgress(bytes: $0.bytesTransferred, total: $0.totalBytes)
            }
        }
        #expect(results.allSatisfy { $0.succeeded })
        #expect(results.map(\.bytesSent) == [image.size, image.size])
        #expect(results.map { $0.value?.totalBytes } == [image.size, image.size])
        await recorder.waitForFinished(2)
        for member in members {
            let kinds = recorder.events(of: member.name).map(\.kind)
            let logs = kinds.compactMap { if case .log(let entry) = $0 { entry.message } else { nil } }
            let progress = kinds.compactMap { if case .progress(let bytes, let total) = $0 { (bytes, total) } else { nil } }
            #expect(logs == ["sending"])
            #expect(progress.last?.0 == image.size && progress.last?.1 == image.size)
        }
    }

    @Test func manyDevicesFinishingAtOnceAllKeepTheirRoundTrips() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-rtt-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = RoundTripMemory(file: directory.appendingPathComponent("round-trips.json"))
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<64 {
                group.addTask {
                    memory.remember(
                        SMPRoundTrip(smoothed: .milliseconds(index + 1), variation: .milliseconds(1)), for: "udp:10.0.0.\(index)")
                }
            }
        }
        for index in 0..<64 {
            #expect(memory.recall("udp:10.0.0.\(index)")?.smoothed == .milliseconds(index + 1), "device \(index)")
        }
    }

    // MARK: Report

    @Test func theJUnitReportHasOneTestCasePerDeviceAndEscapesMessages() throws {
        let report = McuMgrFleetReport(
            name: "smp dfu",
            entries: [
                .init(device: "udp:127.0.0.1:1337", duration: .milliseconds(1234), detail: "uploaded image 0"),
                .init(
                    device: "serial:/dev/ttyACM0", error: McuMgrError(.timeout, "no answer <in 10 s> & \"gone\"\u{1}"),
                    duration: .seconds(10)),
            ],
            duration: .milliseconds(10_500), timestamp: Date(timeIntervalSince1970: 1_800_000_000))
        let xml = report.junitXML()
        let parsed = try JUnitParse(xml)
        #expect(parsed.suites == [["name": "smp dfu", "tests": "2", "failures": "1", "errors": "0", "skipped": "0",
                                   "time": "10.500", "timestamp": "2027-01-15T08:00:00"]])
        #expect(parsed.cases.map { $0["name"] } == ["udp:127.0.0.1:1337", "serial:/dev/ttyACM0"])
        #expect(parsed.cases.map { $0["time"] } == ["1.234", "10.000"])
        #expect(parsed.failures.count == 1)
        #expect(parsed.failures.first?["type"] == "timeout")
        #expect(parsed.failures.first?["message"] == "no answer <in 10 s> & \"gone\"\u{FFFD}")
        #expect(parsed.systemOut == ["uploaded image 0"])
    }
}

/// The elements of a JUnit report, read with XMLParser (a real parser: malformed XML fails).
final class JUnitParse: NSObject, XMLParserDelegate {
    var suites: [[String: String]] = []
    var cases: [[String: String]] = []
    var failures: [[String: String]] = []
    var systemOut: [String] = []
    private var text = ""

    init(_ xml: String) throws {
        super.init()
        let parser = XMLParser(data: Data(xml.utf8))
        parser.delegate = self
        guard parser.parse() else {
            throw McuMgrError(.protocolViolation, "not XML: \(String(describing: parser.parserError)): \(xml)")
        }
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String]
    ) {
        text = ""
        switch elementName {
        case "testsuite": suites.append(attributes)
        case "testcase": cases.append(attributes)
        case "failure": failures.append(attributes)
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        if elementName == "system-out" { systemOut.append(text) }
    }
}
