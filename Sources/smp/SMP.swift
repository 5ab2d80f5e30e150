import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager

/// `smp`: manage microcontrollers over SMP (mcumgr) from the command line.
struct SMP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smp",
        abstract: "Manage microcontrollers over SMP (mcumgr): Zephyr, nRF Connect SDK, MCUboot, Mynewt.",
        discussion: """
            USAGE: smp [--device URI] [--json] [--timeout S] [-v] GROUP COMMAND ...

            Devices: serial:/dev/ttyACM0?baud=115200 (options framing=console|raw, flow=rtscts; the link's \
            limits are learned from the device, starting from Zephyr's 2 receive lines of 128 bytes; fix them \
            with line=BYTES (longest line), lines=N (lines the device holds), window=N (frames in flight), \
            gap=MS (pause between bursts of lines), mtu=N); udp:HOST[:PORT] or udp:[IPv6][:PORT] (default port 1337); sim: (a built-in \
            simulated device). $SMP_DEVICE sets the default device.

            Remote serial ports (ser2net): tcp://HOST:PORT (a raw accepter) or rfc2217://HOST:PORT?baud=115200 \
            (a telnet(rfc2217) accepter; also flow=rtscts, databits=, parity=, stopbits=, sent to the server); \
            both take the serial options above and timeout=S (to connect, default 5).

            Bluetooth LE (through BlueZ): ble:AA:BB:CC:DD:EE:FF or ble:name=NAME (options adapter=hci1, \
            timeout=S, mtu=N, reassembly=off, acquire=off); `smp ble scan` lists devices advertising SMP.

            Discovery (see `smp devices`): auto (the one SMP device present), usb:VID[:PID], \
            usb:serial=SN, usb:VID:PID?serial=SN&interface=N (add &baud=N, &wait=SECONDS).

            Many devices at once (dfu, image upload, fs upload, os echo, os reset): --device repeated, \
            --devices FILE (one per line), or a filter with all (usb:2fe3?all); --max-parallel N, \
            --junit FILE. See `smp dfu --help`.

            Exit codes: 0 success, 1 the device answered with an error, 64 usage error, 66 local file \
            error, 69 transport failure, 75 timeout, 76 protocol error, 130 interrupted (SIGINT/Ctrl-C or \
            SIGTERM: the command stops cleanly, removes a partial download, and an interrupted upload \
            resumes when run again).
            """,
        version: "0.1.0",
        subcommands: [
            OSCommand.self, ImageCommand.self, StatCommand.self, SettingsCommand.self, FSCommand.self,
            ShellCommand.self, EnumCommand.self, BasicCommand.self, LogCommand.self, CrashCommand.self,
            RunCommand.self,
            DFUCommand.self, DemoCommand.self, DevicesCommand.self,
            BLECommand.self,
        ]
    )
}

@main
enum SMPMain {
    static func main() async {
        let arguments = GlobalOptionPlacement.reorder(Array(CommandLine.arguments.dropFirst()))
        await Interruption.run {
            do {
                var command = try SMP.parseAsRoot(arguments)
                if var command = command as? AsyncParsableCommand {
                    try await command.run()
                } else {
                    try command.run()
                }
                // Ended here, on the command's thread: returning would first hop back to the main thread, and
                // the runtime starts a thread for that (about 1 ms of every command). A command that stopped
                // on the signal without an error (e.g. a watch loop) exits as interrupted.
                exit(Interruption.happened ? ExitStatus.cancelled : 0)
            } catch {
                if Interruption.happened, !(error is ExitCode) {
                    CommandRunner.report(McuMgrError(.cancelled, "interrupted"), json: Terminal.jsonRequested)
                    exit(ExitStatus.cancelled)
                }
                FailureExit.exit(with: error, arguments: arguments)
            }
        }
    }
}

/// Lets the global options (--device, --json, --timeout, -v, --pair) come before the subcommand names, as in
/// `smp --device udp:10.0.0.2 os echo hi`, by moving them behind the group and command names where the
/// argument parser expects them.
enum GlobalOptionPlacement {
    // Arrays, not sets: a handful of names, and a Set's first use costs the process a scan of the
    // runtime's protocol conformances (Hashable) before anything else can run.
    static let flags = ["--json", "-v", "-vv", "-vvv", "--verbose", "--pair"]
    static let valued = ["--device", "-d", "--timeout", "--devices", "--max-parallel", "--junit"]

    static func reorder(_ arguments: [String]) -> [String] {
        var moved: [String] = []
        var rest: [String] = []
        var positionals = 0
        var insertAt: Int?
        var index = 0
        while index < arguments.count {
            let token = arguments[index]
            if token == "--" {
                rest.append(contentsOf: arguments[index...])
                break
            }
            let name = token.split(separator: "=", maxSplits: 1).first.map(String.init) ?? token
            if insertAt == nil, flags.contains(token) {
                moved.append(token)
            } else if insertAt == nil, valued.contains(name) {
                moved.append(token)
                if !token.contains("="), index + 1 < arguments.count {
                    index += 1
                    moved.append(arguments[index])
                }
            } else {
                rest.append(token)
                if !token.hasPrefix("-"), insertAt == nil {
                    positionals += 1
                    if positionals == 2 { insertAt = rest.count }
                }
            }
            index += 1
        }
        guard !moved.isEmpty else { return arguments }
        let at = insertAt ?? (rest.firstIndex(of: "--") ?? rest.count)
        rest.insert(contentsOf: moved, at: at)
        return rest
    }
}
