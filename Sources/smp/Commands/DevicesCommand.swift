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

/// `smp devices`: the serial ports present (USB serial by default), what they are, the --device filter
/// that selects each, and with --probe which of them answer SMP.
struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List serial devices (USB serial ports, known boards and probes); --probe asks each for SMP.",
        discussion: """
            Each port shows its path, /dev/serial/by-id link, USB vendor and product (IDs and names), serial \
            number, interface, what the board table knows about it, and a --device filter that selects it \
            again even under another tty name (usb:VID:PID?serial=...&interface=N). --device with a filter \
            (auto, usb:1915, usb:1915:520f, usb:serial=...) lists only the matches; add ?wait=SECONDS to wait \
            for one to appear. Board rules of your own: $SMP_BOARDS or ~/.config/smp/boards.json (README, \
            "Board table").
            """)

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Send an SMP request (MCUmgr parameters) to every port at once and show which answer.")
    var probe = false

    @Option(help: ArgumentHelp("Seconds each probe waits for an answer.", valueName: "seconds"))
    var probeTimeout: Double = 1

    @Flag(help: "Also list serial ports that are not on USB (ttyS, ttyAMA, ...).")
    var all = false

    @Flag(help: "Keep running and print a line whenever a serial port appears or goes away (JSON lines with --json).")
    var watch = false

    func validate() throws {
        guard probeTimeout > 0, probeTimeout <= 60 else { throw ValidationError("--probe-timeout must be between 0 and 60 seconds") }
        if watch && probe { throw ValidationError("--watch and --probe cannot be combined; probe with `smp devices --probe`") }
    }

    func run() async throws {
        do {
            try await list()
        } catch let error as McuMgrError {
            CommandRunner.report(error, json: global.json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        }
    }

    private func list() async throws {
        let logger = DiscoveryOptions.logger(verbose: global.verbose)
        let discovery = try DiscoveryOptions.discovery(includeNonUSB: all, logger: logger)
        let filter = try deviceFilter()
        if watch { return try await watchEvents(discovery, filter: filter) }

        var devices = discovery.devices().filter { filter?.matches($0) ?? true }
        if devices.isEmpty, let filter, filter.wait > .zero {
            // Wait for one to appear (the selector's wait), then list the matches.
            let selector = SerialDeviceSelector(discovery: discovery, prober: DiscoveryOptions.prober(transportOptions: [], logger: logger))
            do {
                _ = try await selector.select(filter)
            } catch let error as McuMgrError where error.kind == .transport && error.message.contains("answered") {
                // Several appeared: list them all.
            }
            devices = discovery.devices().filter(filter.matches)
        }
        var probes: [String: SerialProbeResult] = [:]
        if probe, !devices.isEmpty {
            let prober = DiscoveryOptions.prober(
                transportOptions: filter?.transportOptions ?? [], timeout: .milliseconds(Int64(probeTimeout * 1000)),
                logger: logger)
            for result in await prober.probe(devices) { probes[result.device.path] = result }
        }
        var others: [(kind: String, devices: [ListedDevice])] = []
        for provider in DeviceListProviders.all where await provider.isAvailable() {
            do {
                others.append((provider.kind, try await provider.devices(timeout: .seconds(3), logger: logger)))
            } catch {
                Terminal.warning("\(provider.kind) devices: \(error)")
            }
        }

        if global.json {
            var entries: [CBORMapEntry] = [
                .init(key: "devices", value: .array(devices.map { Self.json($0, probe: probes[$0.path]) }))
            ]
            for other in others {
                entries.append(.init(key: .text(other.kind), value: .array(other.devices.map(Self.json))))
            }
            Terminal.print(JSONRendering.render(.map(entries)))
            return
        }
        if devices.isEmpty {
            Terminal.print(filter.map { "no serial devices match \($0)" } ?? "no serial devices found")
        }
        for (index, device) in devices.enumerated() {
            if index > 0 { Terminal.print("") }
            Terminal.print(Self.human(device, probe: probes[device.path]))
        }
        for other in others where !other.devices.isEmpty {
            Terminal.print("")
            Terminal.print("\(other.kind):")
            for device in other.devices {
                Terminal.print("\(device.uri)  \(device.name)")
                for detail in device.details { Terminal.print("  \(padded(detail.key, to: 10)) \(detail.value)") }
            }
        }
        if probe, !devices.isEmpty {
            let answering = probes.values.filter(\.answered).count
            Terminal.print("")
            Terminal.print("\(answering) of \(devices.count) answered SMP")
        }
    }

    /// --device as a filter: discovery filters as they are, a serial URI as a filter on its path.
    private func deviceFilter() throws -> SerialDeviceFilter? {
        guard global.devicesFile == nil, global.device.count <= 1 else {
            throw McuMgrError(.usage, "smp devices takes one --device filter (e.g. usb:1915:520f), not several")
        }
        guard let text = global.device.first, !text.isEmpty else { return nil }
        if SerialDeviceFilter.isFilter(text) { return try SerialDeviceFilter(parsing: text) }
        let uri = try McuMgrDeviceURI(parsing: text)
        guard uri.scheme == .serial else {
            throw McuMgrError(.usage, "smp devices lists serial ports; --device \(text) is not one (use auto, usb:VID[:PID] or serial:PATH)")
        }
        return SerialDeviceFilter(path: uri.target, text: text)
    }

    private func watchEvents(_ discovery: SerialDeviceDiscovery, filter: SerialDeviceFilter?) async throws {
        let monitor = SerialDeviceMonitor(discovery: discovery, rescanInterval: .seconds(1))
        for await event in monitor.events(includingPresent: true) where filter?.matches(event.device) ?? true {
            if global.json {
                Terminal.print(
                    JSONRendering.render(
                        .map([
                            .init(key: "event", value: .text(event.kind.rawValue)),
                            .init(key: "device", value: Self.json(event.device, probe: nil)),
                        ])))
            } else {
                Terminal.print("\(padded(event.kind.rawValue, to: 8)) \(event.device.summary)")
            }
        }
    }

    // MARK: Rendering

    static func human(_ device: SerialDevice, probe: SerialProbeResult?) -> String {
        var lines = ["\(device.path): \(device.board?.name ?? device.usb?.displayName ?? device.name)"]
        func add(_ key: String, _ value: String?) {
            guard let value, !value.isEmpty else { return }
            lines.append("  " + padded(key, to: 10) + " " + value)
        }
        if let usb = device.usb {
            var text = "\(hex(usb.vendorID)):\(hex(usb.productID))"
            let names = [usb.vendorName, usb.productName].compactMap { $0 }
            if !names.isEmpty { text += " " + names.joined(separator: " / ") }
            add("usb", text)
            add("serial", usb.serialNumber)
            if let interface = usb.interfaceNumber {
                add("interface", usb.interfaceCount > 1 ? "\(interface) (one of \(usb.interfaceCount) serial ports)" : "\(interface)")
            }
        }
        add("by-id", device.byIDLink)
        add("driver", device.driver)
        if let board = device.board {
            var text = "\(board.kind.rawValue), SMP \(board.smp.rawValue)"
            if board.fromUserRules { text += " (your rule)" }
            add("kind", text)
            add("role", board.role)
        }
        add("--device", device.suggestedFilter ?? device.uri.description)
        if let probe { add("probe", probe.summary) }
        return lines.joined(separator: "\n")
    }

    static func json(_ device: SerialDevice, probe: SerialProbeResult?) -> CBOR {
        var entries: [CBORMapEntry] = []
        func add(_ key: String, _ value: CBOR?) {
            if let value { entries.append(.init(key: .text(key), value: value)) }
        }
        func text(_ value: String?) -> CBOR? { value.map(CBOR.text) }
        add("path", .text(device.path))
        add("name", .text(device.name))
        add("uri", .text(device.uri.description))
        add("device", text(device.suggestedFilter ?? device.uri.description))
        add("by_id", device.byIDLink.map(CBOR.text) ?? .null)
        add("links", .array(device.links.map(CBOR.text)))
        add("sys_path", .text(device.sysPath))
        add("driver", text(device.driver) ?? .null)
        if let usb = device.usb {
            add("vendor_id", .text(hex(usb.vendorID)))
            add("product_id", .text(hex(usb.productID)))
            add("vendor", text(usb.vendorName) ?? .null)
            add("product", text(usb.productName) ?? .null)
            add("serial", text(usb.serialNumber) ?? .null)
            add("interface", usb.interfaceNumber.map { CBOR.int($0) } ?? .null)
            add("interface_count", .int(usb.interfaceCount))
            add("usb_port", text(usb.portPath) ?? .null)
        }
        if let board = device.board {
            var b: [CBORMapEntry] = [
                .init(key: "name", value: .text(board.name)),
                .init(key: "kind", value: .text(board.kind.rawValue)),
                .init(key: "smp", value: .text(board.smp.rawValue)),
                .init(key: "follows_resets", value: .bool(board.followsResets)),
                .init(key: "user_rule", value: .bool(board.fromUserRules)),
            ]
            if let role = board.role { b.append(.init(key: "role", value: .text(role))) }
            add("board", .map(b))
        } else {
            add("board", .null)
        }
        if let probe {
            var p: [CBORMapEntry] = [
                .init(key: "answered", value: .bool(probe.answered)),
                .init(key: "result", value: .text(probe.summary)),
                .init(key: "seconds", value: .double(probe.seconds)),
            ]
            if case .answered(let size, let count) = probe.outcome {
                p.append(.init(key: "buf_size", value: .int(size)))
                p.append(.init(key: "buf_count", value: .int(count)))
            }
            add("probe", .map(p))
        }
        return .map(entries)
    }

    static func json(_ device: ListedDevice) -> CBOR {
        var entries: [CBORMapEntry] = [
            .init(key: "uri", value: .text(device.uri)), .init(key: "name", value: .text(device.name)),
        ]
        for detail in device.details { entries.append(.init(key: .text(detail.key), value: .text(detail.value))) }
        return .map(entries)
    }

    static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
