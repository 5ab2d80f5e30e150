import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrBLE
import McuMgrCore
import McuMgrDBus

/// `smp ble ...`: Bluetooth LE helpers.
struct BLECommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ble",
        abstract: "Bluetooth LE: find devices that advertise the SMP service; pair, list bonds, forget.",
        discussion: """
            Devices are reached through BlueZ on the system bus ($DBUS_SYSTEM_BUS_ADDRESS for another bus). \
            Use a device as --device ble:AA:BB:CC:DD:EE:FF or --device ble:name=NAME, with options \
            adapter=hci1, timeout=S (scan), connect-timeout=S, mtu=N (ATT MTU when BlueZ reports none), \
            reassembly=off (every request in one write), acquire=off (no AcquireWrite/AcquireNotify).
            """,
        subcommands: [Scan.self, Pair.self, Bonds.self, Forget.self])

    struct Scan: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "scan",
            abstract: "List devices advertising the SMP service, with address, name and signal strength.",
            discussion: """
                Scans for --timeout seconds. Devices BlueZ already knows are listed when they are present \
                (the scan saw them) or connected; a signal strength the controller could not measure shows as \
                "-" (null in JSON). Exits 69 when no device was seen. --json prints {"adapter": ..., "devices": [{"address", \
                "name", "rssi", "uri", "connected"}]}.
                """)

        @Option(help: ArgumentHelp("Seconds to scan (the default outlasts the kernel's restart of discovery after about 10.4 s, a device's second chance to be seen).", valueName: "seconds"))
        var timeout: Double = 12

        @Option(help: ArgumentHelp("The adapter to scan with (default: the first powered one).", valueName: "hciN"))
        var adapter: String?

        @Flag(help: "List every LE device seen, not only those advertising SMP.")
        var all = false

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(name: [.short, .long], help: "Show details on stderr.")
        var verbose = false

        func validate() throws {
            guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        }

        func run() async throws {
            do {
                let (adapter, devices) = try await BLEScanner.discover(
                    adapter: adapter, timeout: .milliseconds(Int64(timeout * 1000)), onlySMP: !all)
                if json {
                    let entries: [CBOR] = devices.map { device in
                        var fields: [CBORMapEntry] = [
                            .init(key: "address", value: .text(device.address?.rawValue ?? "")),
                            .init(key: "name", value: device.displayName.map(CBOR.text) ?? .null),
                            .init(key: "rssi", value: device.rssi.map { .int($0) } ?? .null),
                            .init(key: "uri", value: .text(Self.uri(of: device, adapter: adapter, explicit: self.adapter != nil))),
                            .init(key: "connected", value: .bool(device.connected)),
                        ]
                        if all { fields.append(.init(key: "smp", value: .bool(device.advertisesSMP))) }
                        return .map(fields)
                    }
                    Terminal.print(
                        JSONRendering.render(
                            .map([.init(key: "adapter", value: .text(adapter.name)), .init(key: "devices", value: .array(entries))])))
                    if devices.isEmpty { throw ExitCode(ExitStatus.transport) }
                    return
                }
                if devices.isEmpty {
                    // A scan that found nothing fails, so that scripts can tell.
                    Terminal.error(
                        "no device \(all ? "" : "advertising the SMP service ")seen on \(adapter.label) within \(timeout) s; check that it advertises (not connected elsewhere) and is in range, or scan longer with --timeout")
                    throw ExitCode(ExitStatus.transport)
                }
                for device in devices {
                    let rssi = device.rssi.map { "\($0) dBm" } ?? "-"
                    var line = "\(device.address?.rawValue ?? device.path.rawValue)  \(padded(rssi, to: 8))"
                    line += "  \(device.displayName ?? "(no name)")"
                    if all, device.advertisesSMP { line += "  [SMP]" }
                    if device.connected { line += "  (connected)" }
                    line += "  --device \(Self.uri(of: device, adapter: adapter, explicit: self.adapter != nil))"
                    Terminal.print(line)
                }
            } catch let error as McuMgrError {
                CommandRunner.report(error, json: json)
                throw ExitCode(ExitStatus.code(for: error.kind))
            }
        }

        static func uri(of device: BlueZDeviceInfo, adapter: BlueZAdapterInfo, explicit: Bool) -> String {
            "ble:\(device.address?.rawValue ?? "?")" + (explicit ? "?adapter=\(adapter.name)" : "")
        }
    }
}

/// Bluetooth LE devices for `smp devices`: those advertising SMP, when BlueZ and a powered adapter exist.
struct BLEDeviceListProvider: DeviceListProvider {
    var kind: String { "ble" }

    func isAvailable() async -> Bool {
        guard let client = try? await BlueZClient.connect() else { return false }
        defer { client.connection.close() }
        guard let objects = try? await client.objects() else { return false }
        return objects.adapters.contains(where: \.powered)
    }

    func devices(timeout: Duration, logger: Logger) async throws -> [ListedDevice] {
        let (adapter, devices) = try await BLEScanner.discover(timeout: timeout)
        return devices.map { device in
            var details: [(key: String, value: String)] = [("adapter", adapter.name)]
            if let rssi = device.rssi { details.append(("rssi", "\(rssi) dBm")) }
            if device.connected { details.append(("connected", "yes")) }
            return ListedDevice(
                uri: "ble:\(device.address?.rawValue ?? "?")", name: device.displayName ?? "(no name)", details: details)
        }
    }
}
