import McuManager
import McuMgrCore

/// Builds an in-process simulated device from a `sim:` URI, e.g. `sim:?buf_size=512&buf_count=2&v1`.
public enum SimulatorURI {
    /// Options a `sim:` URI accepts.
    public static let options: Set<String> = ["buf_size", "buf_count", "v1", "indefinite", "images", "latency"]

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
        return configuration
    }

    /// A transport to a fresh in-process simulated device.
    public static func transport(for uri: McuMgrDeviceURI) throws -> any McuMgrTransport {
        let device = SimulatedDevice(configuration: try configuration(for: uri))
        let latency = try uri.intOption("latency", in: 0...60000) ?? 0
        return InMemorySimulatorTransport(device: device, options: .init(latency: .milliseconds(latency)))
    }
}
