import McuMgrCore

/// Shell group (9): runs a few built-in commands and returns their output (PROTOCOL.md 3.7).
extension DeviceState {
    mutating func handleShell(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        guard request.command.rawValue == 0 else { throw .notSupported }
        var argv: [String] = []
        // No `argv` at all: rc 3 (measured on the mps2_an385 app); an empty one: SHELL err 3 (native_sim).
        guard let items = try request.decodedFields().array("argv") else { throw .invalidValue }
        for item in items {
            guard case .text(let s) = item else { throw .invalidValue }
            argv.append(s)
        }
        guard !argv.isEmpty, !argv[0].isEmpty else { throw .group(.shell, 3) }  // EMPTY_COMMAND
        let (output, ret, busy) = runShell(argv)
        // The command runs before the answer, in the one thread that handles SMP (Zephyr's SMP work
        // queue): every request behind it waits too.
        busyTime += busy
        // Output is cut to what fits one response, as the shell backend's buffer cuts it.
        var text = output
        while encodedSize(.entries(["o": .text(text), "ret": .int(ret)])) > maximumPayload {
            text = String(text.utf8.prefix(max(0, text.utf8.count - 64))) ?? ""
        }
        return .ok(["o": .text(text), "ret": .int(ret)])
    }

    private func runShell(_ argv: [String]) -> (String, Int, Duration) {
        if argv[0] == "kernel", argv.count > 1, argv[1] == "sleep" {
            // As Zephyr 4.4's `kernel sleep ms` answers (its colours and leading line break left out).
            guard argv.count == 3 else { return ("sleep: wrong parameter count\nsleep - ms\n", -22, .zero) }
            guard let ms = UInt32(argv[2]) else { return ("Unable to parse input (err -22)\n", -22, .zero) }
            return ("", 0, .milliseconds(ms))
        }
        let (output, ret) = runCommand(argv)
        return (output, ret, .zero)
    }

    private func runCommand(_ argv: [String]) -> (String, Int) {
        let uptimeMs = uptime.nanosecondsClamped / 1_000_000
        switch argv[0] {
        case "help":
            return (
                "Available commands:\n  echo    : Echo the arguments\n  fs      : File system commands\n"
                    + "  help    : Prints the help message\n  kernel  : Kernel commands\n", 0
            )
        case "echo":
            return (argv.dropFirst().joined(separator: " ") + "\n", 0)
        case "kernel":
            switch argv.count > 1 ? argv[1] : "" {
            case "version": return ("Zephyr version \(configuration.kernelVersion)\n", 0)
            case "uptime": return ("Uptime: \(uptimeMs) ms\n", 0)
            default: return ("kernel - Kernel commands\nSubcommands:\n  sleep   uptime   version\n", argv.count > 1 ? -22 : 1)
            }
        case "fs":
            guard argv.count > 1, argv[1] == "ls" else {
                return ("fs - File system commands\nSubcommands:\n  ls\n", argv.count > 1 ? -22 : 1)
            }
            let directory = argv.count > 2 ? argv[2] : configuration.mountPoint
            guard files.kind(of: directory) == .directory else {
                return ("Unable to open \(directory) (err -2)\n", -2)
            }
            let lines = files.list(directory).map { entry in
                entry.size.map { "\(entry.name)" + String(repeating: " ", count: max(1, 24 - entry.name.count)) + "\($0)" }
                    ?? "\(entry.name)/"
            }
            return (lines.map { $0 + "\n" }.joined(), 0)
        default:
            return ("\(argv[0]): command not found\n", -8)
        }
    }
}
