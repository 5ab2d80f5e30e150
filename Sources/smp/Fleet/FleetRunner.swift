import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrCore
import McuMgrDiscovery
import NIOConcurrencyHelpers

/// Options of the commands that work on many devices at once.
struct FleetOptions: ParsableArguments {
    @Option(
        name: .customLong("max-parallel"),
        help: ArgumentHelp(
            "With several devices: how many to work on at once (default: all of them, at most \(FleetOptions.defaultLimit)).",
            valueName: "n"))
    var maxParallel: Int?

    @Option(
        name: .customLong("junit"),
        help: ArgumentHelp("Write a JUnit XML report to FILE: one test case per device (a single device too).", valueName: "file"))
    var junit: String?

    /// The most devices worked on at once unless --max-parallel says otherwise.
    static let defaultLimit = 64

    func validate() throws {
        if let maxParallel, !(1...1024).contains(maxParallel) {
            throw ValidationError("--max-parallel must be 1...1024")
        }
        if let junit, junit.isEmpty { throw ValidationError("--junit needs a file name") }
    }
}

/// A command that works on one device, or on many at once when several are given.
protocol FleetCommand: DeviceCommand, Sendable {
    var fleet: FleetOptions { get }
    /// The command's name in reports, e.g. "smp os echo".
    static var reportName: String { get }
    /// Whether the command resets the devices (boards found by a filter are then followed to their new tty).
    static var resetsDevices: Bool { get }
    /// Checks done once before any device is touched (local files, images).
    func prepareFleet() throws
    /// What the command does on one device of a multi-device run.
    func run(session: McuMgrFleet.Session, target: FleetTarget) async throws -> FleetOutcome
}

extension FleetCommand {
    static var resetsDevices: Bool { false }
    func prepareFleet() throws {}

    /// Runs on the one device given (the single-device behaviour and output), or on all of them.
    func runOnDevices() async throws {
        let texts = try DeviceList.textsOrExit(global)
        if DeviceList.isFleet(global, texts: texts) {
            try await FleetRunner.run(
                command: Self.reportName, global: global, options: fleet, resets: Self.resetsDevices,
                prepare: prepareFleet,
                work: { fleet, targets in
                    await fleet.run { session in try await run(session: session, target: targets[session.index]) }
                },
                outcome: { $0 })
        } else {
            try await FleetRunner.runSingle(command: Self.reportName, global: global, options: fleet) { context in
                try await run(context: context)
            }
        }
    }
}

/// What a command did on one device: a line for the summary table and the fields of its JSON result.
struct FleetOutcome: Sendable {
    var summary: String
    var fields: [CBORMapEntry]
}

/// One device of a multi-device run.
struct FleetTarget: Sendable {
    /// As the command line named it (a filter's matches by their serial URI).
    var name: String
    var uri: McuMgrDeviceURI
    /// The discovery selection, for a device a `usb:`/`auto` filter found.
    var selection: SerialDeviceSelection?
    /// Follows a board that re-enumerates on reset (a board's own USB, selected by a filter).
    var follower: DeviceFollower?
}

/// Runs a command on many devices with `McuMgrFleet`: resolves the devices, shows their progress, prints
/// the results (a summary table, or JSON lines), writes the JUnit report, and exits with the rule in
/// ``FleetExit``.
enum FleetRunner {
    static func run<Value: Sendable>(
        command: String, global: GlobalOptions, options: FleetOptions, resets: Bool = false,
        prepare: () throws -> Void = {}, before: () -> Void = {},
        work: (McuMgrFleet, [FleetTarget]) async -> [McuMgrFleetResult<Value>],
        outcome: (Value) -> FleetOutcome
    ) async throws {
        let timestamp = Date()
        let clock = ContinuousClock()
        let start = clock.now
        let targets: [FleetTarget]
        let fleet: McuMgrFleet
        do {
            try prepare()
            targets = try await resolveTargets(global, followingResets: resets)
            fleet = try makeFleet(targets, global: global, options: options)
        } catch let error as McuMgrError {
            CommandRunner.report(error, json: global.json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        }
        before()
        let view = FleetView(names: targets.map(\.name), json: global.json, verbose: global.verbose)
        view.begin(parallel: fleet.parallelism)
        let events = fleet.events()
        let shower = Task {
            var finished = 0
            for await event in events {
                view.show(event)
                if case .finished = event.kind {
                    finished += 1
                    if finished == targets.count { return }
                }
            }
        }
        for follower in targets.compactMap(\.follower) { await follower.start() }
        let results = await work(fleet, targets)
        await shower.value
        for follower in targets.compactMap(\.follower) { await follower.stop() }
        view.end()
        let duration = clock.now - start

        let interrupted = Interruption.happened
        let code = FleetExit.code(failures: results.compactMap { $0.error.map { ExitStatus.code(for: $0.kind) } }, interrupted: interrupted)
        let outcomes = results.map { $0.value.map(outcome) }
        if global.json {
            for (result, outcome) in zip(results, outcomes) { Terminal.print(JSONRendering.render(resultItem(result, outcome))) }
            Terminal.print(JSONRendering.render(summaryItem(command: command, results: results, code: code, duration: duration)))
        } else {
            Terminal.print(summaryTable(results, outcomes))
            let failed = results.filter { !$0.succeeded }
            if !failed.isEmpty {
                Terminal.error("error: \(failed.count) of \(results.count) devices failed\(interrupted ? " (interrupted)" : ""):")
                for result in failed {
                    let error = result.error!
                    Terminal.error("  \(result.device): \(error.kind.rawValue) (exit \(ExitStatus.code(for: error.kind))): \(error.message)")
                }
            }
        }
        if let junit = options.junit {
            let entries = zip(results, outcomes).map { result, outcome in
                McuMgrFleetReport.Entry(
                    device: result.device, error: result.error.map(withExitCode), duration: result.duration,
                    detail: outcome?.summary ?? "")
            }
            try writeJUnit(
                McuMgrFleetReport(name: command, entries: entries, duration: duration, timestamp: timestamp), to: junit,
                json: global.json)
        }
        if code != ExitStatus.success { throw ExitCode(code) }
    }

    /// The single-device path: the command's own output, plus the JUnit report when asked for.
    static func runSingle(
        command: String, global: GlobalOptions, options: FleetOptions, _ body: (CommandContext) async throws -> Void
    ) async throws {
        guard let junit = options.junit else {
            try await CommandRunner.run(global, body)
            return
        }
        let timestamp = Date()
        let clock = ContinuousClock()
        let start = clock.now
        let failure = LockedBox<McuMgrError?>(nil)
        var thrown: (any Error)?
        do {
            try await CommandRunner.run(global, failed: { error in failure.set(error) }, body)
        } catch {
            thrown = error
        }
        let name = (try? DeviceList.texts(global).first) ?? nil
        let entry = McuMgrFleetReport.Entry(
            device: name ?? "device", error: failure.value.map(withExitCode), duration: clock.now - start)
        try writeJUnit(
            McuMgrFleetReport(name: command, entries: [entry], duration: clock.now - start, timestamp: timestamp), to: junit,
            json: global.json)
        if let thrown { throw thrown }
    }

    // MARK: Devices

    /// The devices named on the command line, filters with `all` expanded to every board they match;
    /// `followingResets`: boards found by a filter that leave the bus on reset get a follower.
    /// - Throws: `McuMgrError`: `.usage` for a bad URI, a duplicate or no device; `.file` for an unreadable
    ///   list; `.transport` when a filter matches nothing.
    static func resolveTargets(_ global: GlobalOptions, followingResets: Bool) async throws -> [FleetTarget] {
        let texts = try DeviceList.texts(global)
        guard !texts.isEmpty else {
            throw McuMgrError(
                .usage,
                global.devicesFile != nil
                    ? "the device list \(global.devicesFile!) names no device; write one URI per line, e.g. udp:192.0.2.7"
                    : "no device given; pass --device URI (repeatable) or --devices FILE")
        }
        var targets: [FleetTarget] = []
        for text in texts {
            if SerialDeviceFilter.isFilter(text), DeviceList.selectsAll(text) {
                let filter = try SerialDeviceFilter(parsing: text)
                let logger = DiscoveryOptions.logger(verbose: global.verbose)
                let selector = SerialDeviceSelector(
                    discovery: try DiscoveryOptions.discovery(logger: logger),
                    prober: DiscoveryOptions.prober(transportOptions: filter.transportOptions, logger: logger))
                for selection in try await selector.selectAll(filter) {
                    if global.verbose {
                        Terminal.error("device: \(filter) -> \(selection.uri) (\(selection.device.summary); \(selection.reason))")
                    }
                    targets.append(
                        FleetTarget(
                            name: selection.uri.description, uri: selection.uri, selection: selection,
                            follower: followingResets ? follower(for: selection, verbose: global.verbose) : nil))
                }
            } else if SerialDeviceFilter.isFilter(text) {
                let uri = try await DeviceResolver.resolvedURI(from: text, verbose: global.verbose)
                let selection = DiscoveryOptions.resolved.selection
                targets.append(
                    FleetTarget(
                        name: text, uri: uri, selection: selection,
                        follower: followingResets ? selection.flatMap { follower(for: $0, verbose: global.verbose) } : nil))
            } else {
                targets.append(FleetTarget(name: text, uri: try McuMgrDeviceURI(parsing: text)))
            }
        }
        // A port discovery found is told apart by its path (discovery lists each once); a URI by where it
        // leads (a /dev/serial/by-id link and its tty are one device).
        let keys = targets.map { target in
            target.selection.map { "serial:" + $0.device.path } ?? DeviceList.identity(target.uri)
        }
        if let (first, second) = DeviceList.duplicate(in: Array(zip(targets.map(\.name), keys))) {
            let how = first == second ? "\(first) is given twice" : "\(first) and \(second) are the same device"
            throw McuMgrError(.usage, "\(how); give each device once (every device gets its own session)")
        }
        return targets
    }

    /// A follower for a board that leaves the bus on reset (its own USB); nil for a probe's or adapter's
    /// port, which stays.
    private static func follower(for selection: SerialDeviceSelection, verbose: Bool) -> DeviceFollower? {
        guard selection.device.board?.followsResets ?? true else { return nil }
        let logger = DiscoveryOptions.logger(verbose: verbose)
        let monitor = SerialDeviceMonitor(discovery: SerialDeviceDiscovery(logger: logger), rescanInterval: .milliseconds(250))
        return DeviceFollower(device: selection.device, monitor: monitor, logger: logger)
    }

    /// The fleet: every device's transport made now, so that a bad option fails before any device is
    /// touched; boards found by a filter are followed across their resets.
    static func makeFleet(_ targets: [FleetTarget], global: GlobalOptions, options: FleetOptions) throws -> McuMgrFleet {
        var logger = Logger(label: "smp")
        logger.logLevel = global.verbosity >= 2 ? .trace : global.verbose ? .debug : Terminal.quietLogLevel
        var devices: [McuMgrFleet.Device] = []
        for target in targets {
            let transport = try DeviceResolver.transport(for: target.uri, logger: logger, pair: global.pair)
            var reconnection = DFUCommand.reconnection(for: target.uri)
            if let follower = target.follower {
                let options = target.uri.options
                let discoveryLogger = DiscoveryOptions.logger(verbose: global.verbose)
                reconnection = .factory {
                    let device = try await follower.reconnected(within: .seconds(60))
                    return try DeviceResolver.transport(
                        for: McuMgrDeviceURI(scheme: .serial, target: device.path, options: options), logger: discoveryLogger)
                }
            }
            devices.append(
                McuMgrFleet.Device(
                    name: target.name, transport: transport, reconnection: reconnection,
                    client: DeviceResolver.clientConfiguration(for: target.uri, timeout: global.timeouts.answer)))
        }
        return McuMgrFleet(
            devices: devices,
            configuration: .init(
                maximumParallel: options.maxParallel ?? FleetOptions.defaultLimit,
                client: .init(timeout: global.timeouts.answer)),
            logger: logger)
    }

    // MARK: Output

    static func resultItem<Value>(_ result: McuMgrFleetResult<Value>, _ outcome: FleetOutcome?) -> CBOR {
        var entries: [CBORMapEntry] = [
            .init(key: "event", value: "result"), .init(key: "device", value: .text(result.device)),
        ]
        if let error = result.error {
            entries.append(.init(key: "status", value: .text(error.kind == .cancelled ? "cancelled" : "failed")))
            entries += CommandRunner.errorEntries(error)
        } else {
            entries.append(.init(key: "status", value: "success"))
            entries += outcome?.fields ?? []
        }
        entries.append(.init(key: "bytes", value: .int(result.bytesSent)))
        entries.append(.init(key: "device_seconds", value: .double(rounded(result.duration.seconds))))
        return .map(entries)
    }

    static func summaryItem<Value>(
        command: String, results: [McuMgrFleetResult<Value>], code: Int32, duration: Duration
    ) -> CBOR {
        let failed = results.filter { !$0.succeeded }
        return .textMap([
            "event": "summary", "command": .text(command), "devices": .int(results.count),
            "succeeded": .int(results.count - failed.count), "failed": .int(failed.count),
            "failed_devices": .array(failed.map { .text($0.device) }),
            "exit_code": .int(Int(code)), "seconds": .double(rounded(duration.seconds)),
        ])
    }

    static func summaryTable<Value>(_ results: [McuMgrFleetResult<Value>], _ outcomes: [FleetOutcome?]) -> String {
        var rows = [["device", "result", "time", "detail"]]
        for (result, outcome) in zip(results, outcomes) {
            let time = String(cFormat: "%.1f s", result.duration.seconds)
            if let error = result.error {
                rows.append([
                    result.device, error.kind == .cancelled ? "cancelled" : "FAILED", time,
                    "\(error.kind.rawValue): \(error.message)",
                ])
            } else {
                rows.append([result.device, "ok", time, outcome?.summary ?? ""])
            }
        }
        let failed = results.filter { !$0.succeeded }.count
        return Table.render(rows) + "\n\(results.count - failed) of \(results.count) devices succeeded"
    }

    private static func rounded(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }

    /// The error with its exit code in the message, for the JUnit report.
    private static func withExitCode(_ error: McuMgrError) -> McuMgrError {
        var copy = error
        copy.message += " (exit \(ExitStatus.code(for: error.kind)))"
        return copy
    }

    private static func writeJUnit(_ report: McuMgrFleetReport, to path: String, json: Bool) throws {
        do {
            try Data(report.junitXML().utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            let failure = McuMgrError(.file, "cannot write the JUnit report \(path): \(describeFileError(error))")
            CommandRunner.report(failure, json: json)
            throw ExitCode(ExitStatus.file)
        }
    }
}

/// The exit status of a multi-device run: 0 when every device succeeded; else the exit code of the
/// failures when they all share one (all timed out: 75); else 1. Interrupted (Ctrl-C): 130.
enum FleetExit {
    static func code(failures: [Int32], interrupted: Bool) -> Int32 {
        if interrupted { return ExitStatus.cancelled }
        guard let first = failures.first else { return ExitStatus.success }
        return failures.allSatisfy { $0 == first } ? first : ExitStatus.deviceError
    }
}

/// A value behind a lock.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NIOLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func set(_ value: Value) { lock.withLock { stored = value } }
}
