import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

struct OSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "os", abstract: "OS group (0): echo, reset, parameters, info, statistics, date-time.",
        subcommands: [
            Echo.self, ConsoleEcho.self, Tasks.self, Mempool.self, Datetime.self, Reset.self, Params.self, Info.self,
            Bootloader.self,
        ])

    struct Echo: FleetCommand {
        static let configuration = CommandConfiguration(
            commandName: "echo", abstract: "Send text; the device echoes it back.",
            discussion: "Takes many devices (--device repeated, --devices FILE): each one is asked at once; see `smp dfu --help`.")
        static let reportName = "smp os echo"
        @OptionGroup var global: GlobalOptions
        @OptionGroup var fleet: FleetOptions
        @Argument(help: "The text to echo.") var text: [String]

        func run() async throws { try await runOnDevices() }

        func run(context: CommandContext) async throws {
            try await context.run(EchoRequest(text: text.joined(separator: " "))) { $0.text }
        }

        func run(session: McuMgrFleet.Session, target: FleetTarget) async throws -> FleetOutcome {
            let item = try await session.client.sendItem(EchoRequest(text: text.joined(separator: " ")))
            let response = try McuMgrClient.decode(EchoRequest.Response.self, from: item, operation: EchoRequest.operationName)
            return FleetOutcome(summary: response.text, fields: item.mapEntries ?? [])
        }
    }

    struct ConsoleEcho: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "console-echo", abstract: "Turn the device's console echo on or off (Mynewt, MCUboot).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "on or off.") var state: String

        func validate() throws {
            guard ["on", "off"].contains(state) else { throw ValidationError("state must be on or off") }
        }

        func run(context: CommandContext) async throws {
            try await context.run(ConsoleEchoControlRequest(enabled: state == "on")) { _ in "console echo \(state)" }
        }
    }

    struct Tasks: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "tasks", abstract: "Show task (thread) statistics.")
        @OptionGroup var global: GlobalOptions

        func run(context: CommandContext) async throws {
            try await context.run(TaskStatisticsRequest()) { response in
                var rows = [["task", "prio", "tid", "state", "stack use", "stack size", "switches", "runtime"]]
                for (name, t) in response.tasks.sorted(by: { $0.key < $1.key }) {
                    rows.append([
                        name, t.priority.map(String.init) ?? "-", t.id.map(String.init) ?? "-",
                        t.state.map(String.init) ?? "-", t.stackUsed.map { "\($0 * 4)" } ?? "-",
                        t.stackSize.map { "\($0 * 4)" } ?? "-", t.contextSwitchCount.map(String.init) ?? "-",
                        t.runtime.map(String.init) ?? "-",
                    ])
                }
                return Table.render(rows)
            }
        }
    }

    struct Mempool: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "mempool", abstract: "Show memory pool statistics.")
        @OptionGroup var global: GlobalOptions

        func run(context: CommandContext) async throws {
            try await context.run(MemoryPoolStatisticsRequest()) { response in
                var rows = [["pool", "block size", "blocks", "free", "min free"]]
                for (name, p) in response.pools.sorted(by: { $0.key < $1.key }) {
                    rows.append([
                        name, p.blockSize.map(String.init) ?? "-", p.blockCount.map(String.init) ?? "-",
                        p.freeCount.map(String.init) ?? "-", p.minimumFree.map(String.init) ?? "-",
                    ])
                }
                return Table.render(rows)
            }
        }
    }

    struct Datetime: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "datetime",
            abstract: "Read the device's clock, or set it (--set: to now, in UTC, or to the given yyyy-MM-ddTHH:mm:ss).")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Set the clock instead of reading it.") var set = false
        @Argument(help: "The time to set (UTC, yyyy-MM-ddTHH:mm:ss); default now.") var value: String?

        func validate() throws {
            if value != nil, !set { throw ValidationError("give --set to set the clock") }
        }

        func run(context: CommandContext) async throws {
            if set {
                let request = value.map { DateTimeWriteRequest(dateTime: $0) } ?? DateTimeWriteRequest(date: Date())
                try await context.run(request) { _ in "set to \(request.dateTime)" }
            } else {
                try await context.run(DateTimeReadRequest()) { $0.dateTime }
            }
        }
    }

    struct Reset: FleetCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset", abstract: "Reset (reboot) the device.",
            discussion: """
                The device answers, then reboots about a second later: the link drops (a board's own USB \
                leaves the bus and may come back as another tty; with a usb: or auto device smp follows it), \
                and MCUboot installs an image marked with `image test` or `image confirm` before the \
                application starts again. An application may refuse (rc 10, busy) unless --force; \
                --boot-mode 1 restarts into MCUboot's serial recovery or the firmware loader where built in.

                Takes many devices (--device repeated, --devices FILE, usb:...?all): each is reset at once; \
                see `smp dfu --help`.
                """)
        static let reportName = "smp os reset"
        static let resetsDevices = true
        @OptionGroup var global: GlobalOptions
        @OptionGroup var fleet: FleetOptions
        @Flag(help: "Reset even if the application's reset hook objects.") var force = false
        @Option(help: "Boot mode after reset (0 normal, 1 bootloader / firmware loader).") var bootMode: Int?

        func run() async throws { try await runOnDevices() }

        func run(context: CommandContext) async throws {
            let follower = await ResetFollowing.prepare(context)
            try await context.run(ResetRequest(force: force, bootMode: bootMode)) { _ in "reset requested" }
            await ResetFollowing.finish(follower, context)
        }

        func run(session: McuMgrFleet.Session, target: FleetTarget) async throws -> FleetOutcome {
            let item = try await session.client.sendItem(ResetRequest(force: force, bootMode: bootMode))
            guard let follower = target.follower else {
                return FleetOutcome(summary: "reset requested", fields: item.mapEntries ?? [])
            }
            // A board's own USB leaves the bus: wait until it is back, so that the next command finds it.
            do {
                let device = try await follower.reconnected(within: global.timeouts.atLeast(McuMgrTimeouts.reconnectFloor))
                return FleetOutcome(
                    summary: "reset; back at serial:\(device.path)",
                    fields: (item.mapEntries ?? []) + [.init(key: "back_at", value: .text("serial:\(device.path)"))])
            } catch let error as McuMgrError {
                session.log("warning: \(error.message)", level: .warning)
                return FleetOutcome(summary: "reset requested; the board did not come back: \(error.message)", fields: item.mapEntries ?? [])
            }
        }
    }

    struct Params: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "params", abstract: "Show the device's SMP buffer size and count.")
        @OptionGroup var global: GlobalOptions

        func run(context: CommandContext) async throws {
            try await context.run(McuMgrParametersRequest()) {
                "buf_size \($0.bufferSize)\nbuf_count \($0.bufferCount)"
            }
        }
    }

    struct Info: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "info",
            abstract: "Show OS/application information (format letters: s n r v b m p i o, or a for all).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Format letters (default: a).") var format: String = "a"

        func run(context: CommandContext) async throws {
            try await context.run(ApplicationInfoRequest(format: format)) { $0.output }
        }
    }

    struct Bootloader: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "bootloader",
            abstract: "Show bootloader information: its name, or a query such as `mode`.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Query (e.g. mode, active_b0_slot); none asks for the bootloader's name.") var query: String?

        func run(context: CommandContext) async throws {
            try await context.run(BootloaderInfoRequest(query: query)) { response in
                var lines: [String] = []
                if let name = response.bootloader { lines.append("bootloader \(name)") }
                if let mode = response.mode { lines.append("mode \(mode.rawValue) (\(mode))") }
                if let noDowngrade = response.noDowngrade { lines.append("no-downgrade \(noDowngrade)") }
                if let active = response.activeSlot { lines.append("active \(active)") }
                return lines.joined(separator: "\n")
            }
        }
    }
}

/// Plain text tables.
enum Table {
    static func render(_ rows: [[String]]) -> String {
        guard let first = rows.first else { return "" }
        var widths = Array(repeating: 0, count: first.count)
        for row in rows { for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
