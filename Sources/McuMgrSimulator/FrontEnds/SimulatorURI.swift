import McuManager
import McuMgrCore

/// Builds an in-process simulated device from a `sim:` URI, e.g. `sim:?buf_size=512&buf_count=2&v1` or
/// `sim:?mode=direct-xip-revert&images=2&swap_time=0.5`.
public enum SimulatorURI {
    /// Options a `sim:` URI accepts.
    public static let options: Set<String> = [
        "buf_size", "buf_count", "v1", "indefinite", "images", "latency", "mode", "suit", "swap_time",
        "no_downgrade", "fs_blocks", "faults",
    ]

    /// One line per option, for help texts.
    public static let optionHelp: [(String, String)] = [
        ("buf_size=N", "SMP buffer size (buf_size), header included"),
        ("buf_count=N", "number of SMP buffers (buf_count)"),
        ("v1", "a server that predates SMP v2"),
        ("indefinite", "answers with indefinite-length CBOR maps"),
        ("images=N", "updatable images (2 = app core + net core)"),
        ("latency=MS", "delay every answer"),
        ("mode=NAME", "MCUboot mode: " + SimulatedBootloader.Mode.names.joined(separator: "|")),
        ("suit", "a SUIT device (group 66) instead of MCUboot"),
        ("swap_time=S", "seconds the device stays silent after a reset that swaps or installs"),
        ("no_downgrade", "bootloader info reports downgrade prevention"),
        ("fs_blocks=N", "4 KiB LittleFS blocks at /lfs1 (default 4: files up to 8188 bytes); 0 = unlimited"),
        ("faults=K=V,...", "seeded link faults, e.g. faults=loss=0.1,dup=0.02,reorder=0.02,seed=7 (as smp-sim --faults)"),
    ]

    public static func configuration(for uri: McuMgrDeviceURI) throws -> SimulatorConfiguration {
        for option in uri.options where !options.contains(option.key) {
            throw McuMgrError(
                .usage, "unknown option \"\(option.key)\" in \(uri); sim: takes \(options.sorted().joined(separator: ", "))")
        }
        var configuration = SimulatorConfiguration()
        if let v = try uri.intOption("buf_size", in: 64...65535) { configuration.bufferSize = v }
        if let v = try uri.intOption("buf_count", in: 1...64) { configuration.bufferCount = v }
        if let v = try uri.boolOption("v1") { configuration.v1Only = v }
        if let v = try uri.boolOption("indefinite") { configuration.indefiniteLengthMaps = v }
        if let v = try uri.intOption("images", in: 1...8) { configuration.imageCount = v }
        if let v = try uri.intOption("fs_blocks", in: 0...1_000_000) {
            guard v == 0 || v >= 3 else {
                throw McuMgrError(.usage, "option fs_blocks=\(v) in \(uri): use 0 (unlimited) or at least 3 blocks")
            }
            configuration.fileSystemBlockCount = v == 0 ? nil : v
        }
        if let name = uri.option("mode") {
            guard let mode = SimulatedBootloader.Mode(name: name) else {
                throw McuMgrError(
                    .usage,
                    "option mode=\(name) in \(uri) is not an MCUboot mode; use one of "
                        + SimulatedBootloader.Mode.names.joined(separator: ", "))
            }
            configuration.bootloader.mode = mode
        }
        if let v = try uri.boolOption("no_downgrade") { configuration.bootloader.noDowngrade = v }
        if try uri.boolOption("suit") == true { configuration.suit = SimulatedSUITConfiguration() }
        if let text = uri.option("swap_time") {
            guard let seconds = Double(text), seconds >= 0, seconds <= 3600 else {
                throw McuMgrError(.usage, "option swap_time=\(text) in \(uri) must be seconds in 0...3600, e.g. 0.5")
            }
            configuration.swapTime = .milliseconds(Int64((seconds * 1000).rounded()))
        }
        return configuration
    }

    /// A transport to a fresh in-process simulated device.
    public static func transport(for uri: McuMgrDeviceURI) throws -> any McuMgrTransport {
        let device = SimulatedDevice(configuration: try configuration(for: uri))
        let latency = try uri.intOption("latency", in: 0...60000) ?? 0
        var faults = FaultProfile()
        if let text = uri.option("faults") {
            do {
                faults = try FaultProfile(parsing: text)
            } catch {
                throw McuMgrError(.usage, "option faults=\(text) in \(uri): \(error)")
            }
        }
        return InMemorySimulatorTransport(
            device: device, options: .init(latency: .milliseconds(latency), faults: faults))
    }
}
