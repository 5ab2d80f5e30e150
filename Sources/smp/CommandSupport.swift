import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrCore

/// Options every device command takes; accepted before or after the subcommand names.
struct GlobalOptions: ParsableArguments {
    @Option(
        name: [.short, .long],
        help: ArgumentHelp(
            "The device: serial:/dev/ttyACM0?baud=115200, udp:HOST[:PORT], udp:[::1]:1337, tcp://HOST:PORT, rfc2217://HOST:PORT?baud=115200 (a remote serial port, e.g. ser2net), ble:AA:BB:CC:DD:EE:FF, ble:name=NAME, sim: (default: $SMP_DEVICE). Repeat it to work on many devices at once (dfu, image upload, fs upload, os echo, os reset).",
            valueName: "uri"))
    var device: [String] = []

    @Option(
        name: .customLong("devices"),
        help: ArgumentHelp(
            "A file of devices, one URI or filter per line (blank lines and # comments left out; - reads standard input), for the commands that take many devices.",
            valueName: "file"))
    var devicesFile: String?

    @Flag(help: "Print the device's answer as JSON (protocol keys; byte strings as lowercase hex).")
    var json = false

    @Option(
        name: .customLong("timeout"),
        help: ArgumentHelp(
            "The longest wait for an answer to one request, in seconds (lost requests are resent within it); every other wait follows from it. Default 10. The first chunk of an image upload, which may erase a whole slot, gets 40 unless this is given; a download fails after 3 times this without data; a file hash, an erase and a board coming back after a reset get at least 60, 75 and 30.",
            valueName: "seconds"))
    var timeoutOption: Double?

    @Flag(
        help: "Bluetooth LE: pair with a device that asks for an encrypted link, answering its questions here (a passkey is read from standard input; see `smp ble pair`).")
    var pair = false

    @Flag(
        name: [.customShort("v"), .customLong("verbose")],
        help: "Show the device, the link's limits and every request and answer (-vv: with payloads) on stderr.")
    var verbosity: Int

    /// Seconds to wait for an answer (`--timeout`).
    var timeout: Double { timeoutOption ?? McuMgrTimeouts.defaultAnswer.seconds }
    /// Every wait, from `--timeout` (see `McuMgrTimeouts`).
    var timeouts: McuMgrTimeouts { McuMgrTimeouts(answer: timeoutOption.map { .milliseconds(Int64($0 * 1000)) }) }
    /// Whether to show protocol details.
    var verbose: Bool { verbosity > 0 }

    /// Chunk timeouts for uploads (`McuMgrTimeouts`: `--timeout` for every chunk when given; else 40 s
    /// for the first, an erase, and 10 s for the others).
    func uploadConfiguration(pipelineDepth: Int? = nil, byteAlignment: Int = 1, maximumChunkSize: Int? = nil) -> UploadConfiguration {
        UploadConfiguration(
            pipelineDepth: pipelineDepth, byteAlignment: byteAlignment, maximumChunkSize: maximumChunkSize,
            firstChunkTimeout: timeouts.firstChunk, chunkTimeout: timeouts.chunk)
    }

    func validate() throws {
        guard timeout > 0, timeout <= 3600 else {
            throw ValidationError("--timeout must be between 0 and 3600 seconds")
        }
    }
}

/// Exit codes that tell failures apart (sysexits-style).
enum ExitStatus {
    static let success: Int32 = 0
    /// The device answered with an error.
    static let deviceError: Int32 = 1
    /// Bad command line (EX_USAGE).
    static let usage: Int32 = 64
    /// A local file is missing or unusable (EX_NOINPUT).
    static let file: Int32 = 66
    /// The link could not be opened or failed (EX_UNAVAILABLE).
    static let transport: Int32 = 69
    /// The device did not answer in time (EX_TEMPFAIL).
    static let timeout: Int32 = 75
    /// The device's answer broke the protocol (EX_PROTOCOL).
    static let protocolError: Int32 = 76
    /// Interrupted.
    static let cancelled: Int32 = 130

    static func code(for kind: McuMgrError.Kind) -> Int32 {
        switch kind {
        case .device: return deviceError
        case .usage: return usage
        case .file: return file
        case .transport: return transport
        case .timeout: return timeout
        case .protocolViolation: return protocolError
        case .cancelled: return cancelled
        }
    }
}

/// What a device command works with.
struct CommandContext: Sendable {
    let client: McuMgrClient
    let options: GlobalOptions
    let uri: McuMgrDeviceURI

    var json: Bool { options.json }

    /// Sends `request` and prints the answer: under --json the device's own map (protocol keys, byte
    /// strings as hex), else `human` of the decoded response.
    func run<R: McuMgrRequest>(
        _ request: R, timeout: Duration? = nil, human: (R.Response) throws -> String
    ) async throws {
        let item = try await client.sendItem(request, timeout: timeout)
        if json {
            Terminal.print(JSONRendering.render(item))
        } else {
            let response = try McuMgrClient.decode(R.Response.self, from: item, operation: R.operationName)
            let text = try human(response)
            if !text.isEmpty { Terminal.print(text) }
        }
    }

    /// Prints a result the tool composed itself (not a single device answer).
    func emit(item: CBOR, human: () -> String) {
        if json {
            Terminal.print(JSONRendering.render(item))
        } else {
            let text = human()
            if !text.isEmpty { Terminal.print(text) }
        }
    }

    func progressBar(_ label: String) -> ProgressBar {
        ProgressBar(label: label, enabled: Terminal.stdoutIsTTY && !json)
    }
}

/// A subcommand that talks to a device.
protocol DeviceCommand: AsyncParsableCommand {
    var global: GlobalOptions { get }
    func run(context: CommandContext) async throws
}

extension DeviceCommand {
    func run() async throws {
        try await CommandRunner.run(global) { context in try await run(context: context) }
    }
}

enum CommandRunner {
    /// Connects to the device named by the options, runs `body`, and turns errors into messages and
    /// exit codes.
    /// - Parameter failed: told of the failure before it is reported (for the JUnit report).
    static func run(
        _ options: GlobalOptions, failed: ((McuMgrError) -> Void)? = nil, _ body: (CommandContext) async throws -> Void
    ) async throws {
        var client: McuMgrClient?
        do {
            let uri = try await DeviceResolver.resolvedURI(from: try DeviceList.single(options), verbose: options.verbose)
            if options.verbose { Terminal.error("device: \(uri)") }
            var logger = Logger(label: "smp")
            logger.logLevel = options.verbosity >= 2 ? .trace : options.verbose ? .debug : Terminal.quietLogLevel
            let transport = try DeviceResolver.transport(for: uri, logger: logger, pair: options.pair)
            if options.verbose { Terminal.error("link: \(transport.linkLimits) to start with") }
            let c = McuMgrClient(
                transport: transport,
                configuration: DeviceResolver.clientConfiguration(for: uri, timeout: options.timeouts.answer),
                logger: logger)
            client = c
            try await body(CommandContext(client: c, options: options, uri: uri))
            await c.close()
        } catch let error as McuMgrError {
            await client?.close()
            failed?(error)
            report(error, json: options.json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        } catch is CancellationError {
            await client?.close()
            let error = McuMgrError(.cancelled, "interrupted")
            failed?(error)
            report(error, json: options.json)
            throw ExitCode(ExitStatus.cancelled)
        } catch let error as CBORError {
            await client?.close()
            let error = McuMgrError(.protocolViolation, "unexpected answer from the device: \(error)", cause: error)
            failed?(error)
            report(error, json: options.json)
            throw ExitCode(ExitStatus.protocolError)
        }
    }

    /// Reports a failure: under `--json` one error object on stdout and nothing on stderr (the schema is
    /// in the README's "JSON output"), else `error: MESSAGE` on stderr.
    static func report(_ error: McuMgrError, json: Bool) {
        report(
            kind: error.kind.rawValue, message: error.message, exitCode: ExitStatus.code(for: error.kind), json: json,
            details: detailEntries(error))
    }

    /// `kind`, `message`, `exit_code` and the device's code of an error, as in the JSON error object.
    static func errorEntries(_ error: McuMgrError) -> [CBORMapEntry] {
        [
            .init(key: "kind", value: .text(error.kind.rawValue)),
            .init(key: "message", value: .text(error.message)),
            .init(key: "exit_code", value: .int(Int(ExitStatus.code(for: error.kind)))),
        ] + detailEntries(error)
    }

    /// The device's return code or group error of an error.
    static func detailEntries(_ error: McuMgrError) -> [CBORMapEntry] {
        var entries: [CBORMapEntry] = []
        if let rc = error.returnCode {
            entries.append(.init(key: "rc", value: .int(rc.rawValue)))
            entries.append(.init(key: "name", value: .text(rc.name)))
        }
        if let g = error.groupError {
            entries.append(.init(key: "group", value: .int(Int(g.group.rawValue))))
            entries.append(.init(key: "group_rc", value: .int(g.rc)))
            entries.append(.init(key: "name", value: .text(g.name)))
        }
        return entries
    }

    static func report(kind: String, message: String, exitCode: Int32, json: Bool, details: [CBORMapEntry] = []) {
        guard json else {
            Terminal.error("error: \(message)")
            return
        }
        let entries: [CBORMapEntry] = [
            .init(key: "kind", value: .text(kind)),
            .init(key: "message", value: .text(message)),
            .init(key: "exit_code", value: .int(Int(exitCode))),
        ] + details
        Terminal.print(JSONRendering.render(.map([.init(key: "error", value: .map(entries))])))
    }
}
