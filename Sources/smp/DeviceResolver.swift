#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager
import McuMgrBLE
import McuMgrDiscovery
import McuMgrSerial
import McuMgrSimulator
import McuMgrUDP

/// Turns the --device option (or $SMP_DEVICE) into a transport.
enum DeviceResolver {
    static func uri(from option: String?) throws -> McuMgrDeviceURI {
        let text = option ?? ProcessInfo.processInfo.environment["SMP_DEVICE"]
        guard let text, !text.isEmpty else {
            throw McuMgrError(
                .usage,
                "no device given; pass --device URI or set SMP_DEVICE, e.g. serial:/dev/ttyACM0, udp:192.0.2.7, or sim: for the built-in simulated device"
            )
        }
        return try McuMgrDeviceURI(parsing: text)
    }

    /// - Parameter pair: Bluetooth LE devices that want pairing are paired, asking at the terminal.
    static func transport(for uri: McuMgrDeviceURI, logger: Logger, pair: Bool = false) throws -> any McuMgrTransport {
        switch uri.scheme {
        case .serial:
            try checkOptions(uri, allowed: ["baud", "framing", "line", "lines", "window", "gap", "mtu", "flow", "retransmit"])
            var configuration = SerialTransport.Configuration(path: uri.target)
            try applySerialOptions(uri, to: &configuration)
            if let ms = try uri.intOption("retransmit", in: 1...60000) { configuration.retransmitInterval = .milliseconds(ms) }
            return SerialTransport(configuration: configuration, logger: logger)
        case .udp:
            try checkOptions(uri, allowed: ["mtu", "retransmit"])
            var configuration = UDPTransport.Configuration(
                host: uri.target, port: uri.port ?? McuMgrDeviceURI.defaultUDPPort)
            if let mtu = try uri.intOption("mtu", in: 32...UDPTransport.largestDatagram) { configuration.mtu = mtu }
            if let ms = try uri.intOption("retransmit", in: 1...60000) { configuration.retransmitInterval = .milliseconds(ms) }
            return UDPTransport(configuration: configuration)
        case .sim:
            return try SimulatorURI.transport(for: uri)
        case .ble:
            return try McuMgrBleTransport(uri: uri, logger: logger, pairing: pair ? TerminalPairing() : nil)
        case .tcp, .rfc2217:
            return try remoteSerialTransport(for: uri, logger: logger)
        }
    }

    /// The client settings for a device at `uri`: requests time out after `timeout`; serial ports (local
    /// or remote) keep the device's buffers, unfinished uploads and console line limits between runs, UDP
    /// devices the first two and the measured round trip (Bluetooth LE keeps its own, `BLEDeviceMemory`;
    /// the simulator nothing).
    static func clientConfiguration(for uri: McuMgrDeviceURI, timeout: Duration) -> McuMgrClient.Configuration {
        switch uri.scheme {
        case .serial, .tcp, .rfc2217:
            return McuMgrClient.Configuration(timeout: timeout, parametersMemory: .standard, consoleLineMemory: .standard)
        case .udp:
            return McuMgrClient.Configuration(timeout: timeout, roundTripMemory: .standard, parametersMemory: .standard)
        case .sim, .ble:
            return McuMgrClient.Configuration(timeout: timeout)
        }
    }

    /// The options a serial port takes wherever it is (local, tcp://, rfc2217://): baud, framing, line,
    /// lines, window, gap, mtu, flow. The caller checked which ones the scheme allows.
    static func applySerialOptions(_ uri: McuMgrDeviceURI, to configuration: inout SerialTransport.Configuration) throws {
        if let baud = try uri.intOption("baud", in: 50...12_000_000) { configuration.baudRate = baud }
        if let framing = uri.option("framing") {
            guard let f = SerialTransport.Framing(rawValue: framing.lowercased()) else {
                throw McuMgrError(.usage, "framing=\(framing) in \(uri): use framing=console or framing=raw")
            }
            configuration.framing = f
        }
        if let line = try uri.intOption("line", in: 8...65536) { configuration.lineLength = line }
        if let lines = try uri.intOption("lines", in: 1...1024) { configuration.lines = lines }
        if let window = try uri.intOption("window", in: 1...64) { configuration.window = window }
        if let gap = try uri.intOption("gap", in: 0...10_000) { configuration.lineGap = .milliseconds(gap) }
        if let mtu = try uri.intOption("mtu", in: 32...65535) { configuration.mtu = mtu }
        if let flow = uri.option("flow") {
            switch flow.lowercased() {
            case "", "rtscts", "hw", "hardware", "1", "on", "true": configuration.flowControl = true
            case "none", "off", "0", "false": configuration.flowControl = false
            default: throw McuMgrError(.usage, "flow=\(flow) in \(uri): use flow=rtscts or flow=none")
            }
        }
    }

    static func checkOptions(_ uri: McuMgrDeviceURI, allowed: Set<String>) throws {
        for option in uri.options where !allowed.contains(option.key) {
            throw McuMgrError(
                .usage,
                "unknown option \"\(option.key)\" in \(uri); \(uri.scheme.rawValue) devices take: \(allowed.sorted().joined(separator: ", "))"
            )
        }
    }
}

// MARK: - Discovery filters (auto, usb:...)

extension DeviceResolver {
    /// The --device option (or $SMP_DEVICE) as a URI; discovery filters (`auto`, `usb:1915:520f`,
    /// `usb:serial=...`) are resolved to the serial port they select, keeping serial options such as `baud=`.
    static func resolvedURI(from option: String?, verbose: Bool) async throws -> McuMgrDeviceURI {
        let text = option ?? ProcessInfo.processInfo.environment["SMP_DEVICE"]
        guard let text, SerialDeviceFilter.isFilter(text) else { return try uri(from: option) }
        let filter = try SerialDeviceFilter(parsing: text)
        // Check the serial options before opening any port (a bad option would make every probe fail).
        _ = try transport(
            for: McuMgrDeviceURI(scheme: .serial, target: "PORT", options: filter.transportOptions), logger: Logger(label: "smp"))
        let logger = DiscoveryOptions.logger(verbose: verbose)
        let discovery = try DiscoveryOptions.discovery(logger: logger)
        let selector = SerialDeviceSelector(
            discovery: discovery, prober: DiscoveryOptions.prober(transportOptions: filter.transportOptions, logger: logger))
        let selection = try await selector.select(filter)
        _ = try McuMgrDeviceURI(parsing: selection.uri.description)  // options stay valid URI syntax
        DiscoveryOptions.resolved.set(selection)
        if verbose {
            Terminal.error("device: \(filter) -> \(selection.uri) (\(selection.device.summary); \(selection.reason))")
        }
        return selection.uri
    }
}
