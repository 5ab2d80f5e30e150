#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrBLE
import McuMgrCore
import McuMgrDBus

/// Pairing questions answered at the terminal: passkeys typed on standard input (or given with
/// --passkey), numeric comparison confirmed there (or by --yes), Just Works accepted for the device
/// being paired. Prompts go to stderr, so that stdout stays the command's output.
struct TerminalPairing: BLEPairingDelegate {
    /// The passkey the device shows, known in advance (`--passkey`).
    var passkey: UInt32?
    /// Confirm numeric comparison without asking (`--yes`).
    var confirmWithoutAsking = false

    static var stdinIsTTY: Bool { isatty(STDIN_FILENO) == 1 }

    func passkey(for device: String) async -> UInt32? {
        if let passkey { return passkey }
        Terminal.error("\(device) asks for the passkey it shows; type it and press Enter:")
        guard let line = await Self.readLine() else {
            Terminal.error("no passkey on standard input; give it with --passkey NNNNNN")
            return nil
        }
        guard let value = UInt32(line.filter { !$0.isWhitespace }), value <= 999_999 else {
            Terminal.error("\"\(line)\" is not a passkey (six digits)")
            return nil
        }
        return value
    }

    func display(passkey: UInt32, entered: Int?, for device: String) {
        if let entered, entered > 0 { return }
        Terminal.error("type the passkey \(BLEPasskey.text(passkey)) on \(device)")
    }

    func confirm(passkey: UInt32, for device: String) async -> Bool {
        if confirmWithoutAsking {
            Terminal.error("\(device) shows the passkey \(BLEPasskey.text(passkey)) (confirmed by --yes)")
            return true
        }
        guard Self.stdinIsTTY else {
            Terminal.error(
                "\(device) asks to confirm the passkey \(BLEPasskey.text(passkey)), and there is no terminal to ask; run `smp ble pair \(device) --yes` to confirm it without asking")
            return false
        }
        Terminal.error("does \(device) show the passkey \(BLEPasskey.text(passkey))? [y/N]")
        let answer = await Self.readLine()?.filter { !$0.isWhitespace }.lowercased()
        return answer == "y" || answer == "yes"
    }

    func authorize(_ device: String) async -> Bool { true }

    /// One line of standard input, read off the cooperative threads (a person may take a while).
    static func readLine() async -> String? {
        await withCheckedContinuation { continuation in
            startDetachedThread(name: "stdin") { continuation.resume(returning: Swift.readLine()) }
        }
    }
}

extension BLECommand {
    /// `smp ble pair ADDRESS`.
    struct Pair: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pair",
            abstract: "Pair with a device and keep the bond (for devices that require an encrypted or authenticated link).",
            discussion: """
                DEVICE is an address, name=NAME, or a ble: URI (its adapter= and timeout= options count). BlueZ \
                asks this command as its pairing agent: a passkey the device shows is read from standard input \
                (or --passkey); a passkey to compare is confirmed at the terminal (or by --yes); a passkey to \
                type on the device is printed. Zephyr's SMP service asks for an authenticated link by default \
                (CONFIG_MCUMGR_TRANSPORT_BT_PERM_RW_AUTHEN): such devices need a passkey or a comparison. \
                A connection made for pairing is closed at the end. Exits 0 when paired (or paired already).
                """)

        @Argument(help: "The device: AA:BB:CC:DD:EE:FF, name=NAME, or ble:...")
        var device: String

        @Option(help: ArgumentHelp("The adapter to pair from (default: the first powered one).", valueName: "hciN"))
        var adapter: String?

        @Option(help: ArgumentHelp("The six-digit passkey the device shows, when known in advance.", valueName: "digits"))
        var passkey: UInt32?

        @Flag(help: "Confirm a passkey comparison without asking.")
        var yes = false

        @Option(help: ArgumentHelp("How long pairing may take, passkey typing included.", valueName: "seconds"))
        var timeout: Double = 90

        @Flag(help: "Print JSON.")
        var json = false

        func validate() throws {
            if let passkey, passkey > 999_999 { throw ValidationError("--passkey takes six digits (000000...999999)") }
            guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        }

        func run() async throws {
            do {
                var configuration = try McuMgrBleTransport.Configuration(uri: try BLECommand.uri(device))
                if let adapter { configuration.adapter = adapter }
                let result = try await BLEBonds.pair(
                    configuration, delegate: TerminalPairing(passkey: passkey, confirmWithoutAsking: yes),
                    timeout: .milliseconds(Int64(timeout * 1000)))
                let address = result.device.address?.rawValue ?? device
                if json {
                    Terminal.print(
                        JSONRendering.render(
                            .textMap([
                                "address": .text(address), "name": result.device.displayName.map(CBOR.text) ?? .null,
                                "paired": .bool(true), "already_paired": .bool(result.alreadyPaired),
                            ])))
                } else {
                    Terminal.print(
                        result.alreadyPaired
                            ? "\(result.device.label) is paired already (`smp ble forget \(address)` removes the bond)"
                            : "paired with \(result.device.label)")
                }
            } catch let error as McuMgrError {
                CommandRunner.report(error, json: json)
                throw ExitCode(ExitStatus.code(for: error.kind))
            }
        }
    }

    /// `smp ble bonds`.
    struct Bonds: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bonds",
            abstract: "List the devices this computer is paired with.",
            discussion: """
                --json prints {"adapter": ..., "devices": [{"address", "name", "bonded", "connected", "smp"}]} \
                ("bonded" is null where BlueZ does not say, before BlueZ 5.67).
                """)

        @Option(help: ArgumentHelp("The adapter (default: the first powered one).", valueName: "hciN"))
        var adapter: String?

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            do {
                let (adapter, devices) = try await BLEBonds.bonds(adapter: adapter)
                if json {
                    let entries: [CBOR] = devices.map { device in
                        .textMap([
                            "address": .text(device.address?.rawValue ?? ""), "name": device.displayName.map(CBOR.text) ?? .null,
                            "bonded": device.bonded.map(CBOR.bool) ?? .null, "connected": .bool(device.connected),
                            "smp": .bool(device.advertisesSMP),
                        ])
                    }
                    Terminal.print(JSONRendering.render(.textMap(["adapter": .text(adapter.name), "devices": .array(entries)])))
                    return
                }
                if devices.isEmpty {
                    Terminal.print("\(adapter.label) is paired with no device")
                    return
                }
                for device in devices {
                    var line = "\(device.address?.rawValue ?? device.path.rawValue)  \(device.displayName ?? "(no name)")"
                    if device.bonded == false { line += "  (paired for this connection only, no bond)" }
                    if device.connected { line += "  (connected)" }
                    Terminal.print(line)
                }
            } catch let error as McuMgrError {
                CommandRunner.report(error, json: json)
                throw ExitCode(ExitStatus.code(for: error.kind))
            }
        }
    }

    /// `smp ble forget ADDRESS`.
    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "forget",
            abstract: "Remove a device and its bond from this computer (after the device erased its bonds, or to pair afresh).",
            discussion: """
                Exits 0 when the device's bond was removed, 1 when the adapter held no bond for it (what BlueZ \
                knew of an unpaired device, e.g. its services, is removed all the same: the next connection \
                reads them afresh).
                """)

        @Argument(help: "The device's address (AA:BB:CC:DD:EE:FF).")
        var device: String

        @Option(help: ArgumentHelp("The adapter (default: the first powered one).", valueName: "hciN"))
        var adapter: String?

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            let text = device.hasPrefix("ble:") ? String(device.dropFirst(4)) : device
            guard let address = BluetoothAddress(text) else {
                throw ValidationError("\(device) is not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
            }
            do {
                // BlueZ re-creates an advertising device's object whenever a discovery (any program's) sees it,
                // so a device is often known without a bond: only a removed bond counts as forgotten.
                let paired = try await BLEBonds.bonds(adapter: adapter).1.contains { $0.address == address }
                let removed = try await BLEBonds.forget(address, adapter: adapter)
                if json {
                    Terminal.print(JSONRendering.render(.textMap([
                        "address": .text(address.rawValue), "removed": .bool(removed), "bond": .bool(removed && paired),
                    ])))
                } else if removed && paired {
                    Terminal.print("removed \(address) and its bond")
                } else if removed {
                    Terminal.print("\(address) was not paired with this adapter: removed what BlueZ knew of it (the next connection reads its services afresh)")
                } else {
                    Terminal.print("\(address) is not known to this adapter")
                }
                if !(removed && paired) { throw ExitCode(1) }
            } catch let error as McuMgrError {
                CommandRunner.report(error, json: json)
                throw ExitCode(ExitStatus.code(for: error.kind))
            }
        }
    }

    /// A device argument as a `ble:` URI: an address, `name=NAME`, or a URI already.
    static func uri(_ text: String) throws -> McuMgrDeviceURI {
        try McuMgrDeviceURI(parsing: text.hasPrefix("ble:") ? text : "ble:\(text)")
    }
}
