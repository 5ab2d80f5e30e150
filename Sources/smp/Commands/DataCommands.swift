import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

struct StatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat", abstract: "Statistics group (2): list groups, read counters.",
        subcommands: [List.self, Read.self])

    struct List: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the statistics groups.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(StatisticsListRequest()) { $0.names.joined(separator: "\n") }
        }
    }

    struct Read: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "read", abstract: "Read the counters of one statistics group.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The group's name (see `smp stat list`).") var name: String
        func run(context: CommandContext) async throws {
            try await context.run(StatisticsReadRequest(name: name)) { response in
                Table.render(response.fields.sorted { $0.key < $1.key }.map { [$0.key, String($0.value)] })
            }
        }
    }
}

struct SettingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings", abstract: "Settings group (3): read, write, delete, commit, load, save.",
        subcommands: [Read.self, Write.self, Delete.self, Commit.self, Load.self, Save.self])

    /// How a value is shown or given on the command line.
    enum ValueFormat: String, ExpressibleByArgument, CaseIterable {
        case text, hex
    }

    struct Read: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "read", abstract: "Read a setting's value.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The setting's name, e.g. bt/name.") var name: String
        @Option(help: "Largest value to return.") var maxSize: Int?
        @Option(help: "Show the value as text or hex (default: text when printable).") var format: ValueFormat?

        func run(context: CommandContext) async throws {
            try await context.run(SettingsReadRequest(name: name, maximumSize: maxSize)) { response in
                let bytes = Array(response.value)
                if format != .hex, let text = String(bytes: bytes, encoding: .utf8),
                    text.unicodeScalars.allSatisfy({ $0.value >= 0x20 || $0 == "\n" || $0 == "\t" })
                {
                    return text
                }
                if format == .text { return String(decoding: bytes, as: UTF8.self) }
                return JSONRendering.hex(bytes)
            }
        }
    }

    struct Write: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "write", abstract: "Write a setting's value.",
            discussion: """
                Zephyr sets the value in RAM through the subsystem that owns the key (e.g. bt/name) and \
                answers an error for a key no handler takes; `settings commit` applies written values, \
                `settings save` stores them in flash so that they survive a reset.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The setting's name.") var name: String
        @Argument(help: "The value (text, or hex with --format hex).") var value: String
        @Option(help: "How VALUE is given: text (UTF-8) or hex.") var format: ValueFormat = .text

        func run(context: CommandContext) async throws {
            let data = format == .hex ? try ImageCommand.parseHex(value) : Data(value.utf8)
            try await context.run(SettingsWriteRequest(name: name, value: data)) { _ in "" }
        }
    }

    struct Delete: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a setting.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The setting's name.") var name: String
        func run(context: CommandContext) async throws {
            try await context.run(SettingsDeleteRequest(name: name)) { _ in "" }
        }
    }

    struct Commit: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "commit", abstract: "Apply written settings.",
            discussion: "Calls every settings handler's commit, as the device does after loading at boot.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(SettingsCommitRequest()) { _ in "" }
        }
    }

    struct Load: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "load", abstract: "Load settings from persistent storage.",
            discussion: "Reads the stored settings back into RAM, replacing values written since they were saved.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(SettingsLoadRequest()) { _ in "" }
        }
    }

    struct Save: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "save", abstract: "Save settings (all, or a subtree) to persistent storage.",
            discussion: "Writes the values in RAM to the settings partition in flash; they survive resets and upgrades.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Subtree to save; omit for all.") var name: String?
        func run(context: CommandContext) async throws {
            try await context.run(SettingsSaveRequest(name: name)) { _ in "" }
        }
    }
}

struct ShellCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shell", abstract: "Shell group (9): run a shell command on the device.",
        subcommands: [Exec.self])

    struct Exec: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "exec",
            abstract: "Run a shell command, e.g. `smp shell exec -- kernel version`; exits with its return code.",
            discussion: """
                The device runs the command in its shell (Zephyr: CONFIG_MCUMGR_GRP_SHELL) and answers with what \
                it printed and its return code. stdout gets that output byte for byte (line ends, colours), \
                without the line break Zephyr's shell prints before every command's output; the exit code is \
                the command's (1...125; a negative errno such as -8, command not found, exits 1). --json prints \
                the device's answer: {"o": OUTPUT, "ret": CODE}. The request is sent once, never again for a \
                late answer (the device would run the copy too): give a command that runs long more --timeout.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(parsing: .captureForPassthrough, help: "The command and its arguments (after --).")
        var argv: [String] = []

        /// `smp shell exec --help` (before any `--`) shows this help; the device's own shell gets
        /// `smp shell exec -- help`.
        func validate() throws {
            if let first = argv.first, first == "--help" || first == "-h" { throw CleanExit.helpRequest(self) }
        }

        func run(context: CommandContext) async throws {
            let words = argv.first == "--" ? Array(argv.dropFirst()) : argv
            guard !words.isEmpty else {
                throw McuMgrError(.usage, "give the command to run, e.g. smp shell exec -- kernel version")
            }
            let request = ShellExecuteRequest(argv: words)
            let item = try await context.client.sendItem(request)
            let response = try McuMgrClient.decode(
                ShellExecuteRequest.Response.self, from: item, operation: ShellExecuteRequest.operationName)
            if context.json {
                Terminal.print(JSONRendering.render(item))
            } else {
                Terminal.write(ShellOutput.commandOutput(response.output))
            }
            let code = response.returnCode
            if code != 0 {
                throw ExitCode(Int32(truncatingIfNeeded: min(max(code, 1), 125)))
            }
        }
    }
}

struct EnumCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enum", abstract: "Enumeration group (10): which groups the device supports.",
        subcommands: [Count.self, List.self, Single.self, Details.self])

    struct Count: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "count", abstract: "Count the supported groups.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(EnumerationCountRequest()) { String($0.count) }
        }
    }

    struct List: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the supported group ids.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(EnumerationListRequest()) { response in
                response.groups.map { g in "\(g.rawValue)" + (g.name.map { "  \($0)" } ?? "") }.joined(separator: "\n")
            }
        }
    }

    struct Single: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "single", abstract: "Show the supported group at an index.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "0-based index.") var index: Int = 0
        func run(context: CommandContext) async throws {
            try await context.run(EnumerationSingleRequest(index: index)) { r in
                "\(r.groupID)" + (r.isLast ? " (last)" : "")
            }
        }
    }

    struct Details: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "details", abstract: "Show names and handler counts of groups.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Group ids; omit for all.") var groups: [UInt16] = []
        func run(context: CommandContext) async throws {
            let request = EnumerationDetailsRequest(groups: groups.isEmpty ? nil : groups.map(McuMgrGroup.init(rawValue:)))
            try await context.run(request) { r in
                Table.render(
                    [["group", "name", "handlers"]]
                        + r.groups.map { ["\($0.groupID)", $0.name ?? "-", $0.handlers.map(String.init) ?? "-"] })
            }
        }
    }
}

struct BasicCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "basic", abstract: "Zephyr basic group (63): erase the storage partition.",
        subcommands: [EraseStorage.self])

    struct EraseStorage: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "erase-storage", abstract: "Erase the settings/storage partition.",
            discussion: """
                Zephyr erases the whole storage_partition: settings, and any file system or NVS data kept \
                there. Subsystems that hold it open (LittleFS, settings) break until the next reset; reset \
                the device afterwards.
                """)
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(EraseStorageRequest(), timeout: global.timeouts.atLeast(McuMgrTimeouts.storageEraseFloor)) { _ in
                "storage erased"
            }
        }
    }
}

struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log", abstract: "Log group (4, Mynewt): show and clear logs.",
        subcommands: [Show.self, Clear.self, Modules.self, Levels.self, List.self])

    struct Show: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show log entries.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Only this log.") var name: String?
        @Option(help: "Start at this entry index.") var index: Int?
        func run(context: CommandContext) async throws {
            try await context.run(LogShowRequest(logName: name, index: index)) { r in
                var lines: [String] = []
                for log in r.logs ?? [] {
                    lines.append("log \(log.name ?? "?")")
                    for e in log.entries ?? [] {
                        lines.append("  [\(e.index.map(String.init) ?? "-")] \(e.timestamp.map(String.init) ?? "-") level \(e.level.map(String.init) ?? "-"): \(e.text ?? e.message.map { JSONRendering.hex(Array($0)) } ?? "")")
                    }
                }
                if let next = r.nextIndex { lines.append("next index \(next)") }
                return lines.joined(separator: "\n")
            }
        }
    }

    struct Clear: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear", abstract: "Clear the logs.",
            discussion: "Mynewt's log group: deletes every entry of every log on the device; it cannot be undone.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws { try await context.run(LogClearRequest()) { _ in "" } }
    }

    struct Modules: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "modules", abstract: "List log modules.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(LogModuleListRequest()) { r in
                (r.modules ?? [:]).sorted { $0.value < $1.value }.map { "\($0.value)  \($0.key)" }.joined(separator: "\n")
            }
        }
    }

    struct Levels: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "levels", abstract: "List log levels.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(LogLevelListRequest()) { r in
                (r.levels ?? [:]).sorted { $0.value < $1.value }.map { "\($0.value)  \($0.key)" }.joined(separator: "\n")
            }
        }
    }

    struct List: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the logs.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(LogListRequest()) { $0.names.joined(separator: "\n") }
        }
    }
}

struct CrashCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crash", abstract: "Crash group (5, Mynewt): trigger a test crash.", subcommands: [Test.self])

    struct Test: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "test", abstract: "Crash the device on purpose: div0, jump0, ref0, assert, wdog.",
            discussion: """
                Mynewt's crash group: the device faults as asked and reboots, usually without answering, so \
                smp may report a timeout or a lost link; its crash log shows the fault afterwards. The \
                request is sent once: a copy would crash the device again once it is back.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Crash type.") var type: String
        func validate() throws {
            guard ["div0", "jump0", "ref0", "assert", "wdog"].contains(type) else {
                throw ValidationError("crash type must be div0, jump0, ref0, assert or wdog")
            }
        }
        func run(context: CommandContext) async throws {
            do {
                try await context.run(CrashTestRequest(type: CrashTest(rawValue: type))) { _ in "crash \(type) triggered" }
            } catch var error as McuMgrError where error.kind == .timeout {
                error.message =
                    "no answer to crash test \(type), as from a device that faults before it can answer; the request "
                    + "was not sent again (a copy would crash the device again once it is back). Once it is back, "
                    + "its crash log shows whether it crashed: smp log show"
                throw error
            }
        }
    }
}

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run-test group (7, Mynewt): list and run tests.", subcommands: [List.self, Test.self])

    struct List: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the device's tests.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(RunTestListRequest()) { $0.names.joined(separator: "\n") }
        }
    }

    struct Test: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Run a test (or all).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Test name; omit for all.") var name: String?
        @Option(help: "Token echoed in the test's log.") var token: String?
        func run(context: CommandContext) async throws {
            try await context.run(RunTestRequest(testName: name, token: token)) { _ in "test started" }
        }
    }
}
