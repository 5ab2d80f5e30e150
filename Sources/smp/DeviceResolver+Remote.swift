import Logging
import McuManager
import McuMgrSerial

// MARK: - Remote serial ports (tcp://, rfc2217://)

extension DeviceResolver {
    /// A serial port behind a port server: `tcp://HOST:PORT` (raw) or `rfc2217://HOST:PORT` (Telnet
    /// with RFC 2217, which also carries the baud rate, flow control and line settings to the server).
    static func remoteSerialTransport(for uri: McuMgrDeviceURI, logger: Logger) throws -> SerialTransport {
        let rfc2217 = uri.scheme == .rfc2217
        var allowed: Set<String> = ["framing", "line", "lines", "window", "gap", "mtu", "timeout"]
        if rfc2217 { allowed.formUnion(["baud", "flow", "databits", "parity", "stopbits"]) }
        if !rfc2217, uri.option("baud") != nil || uri.option("flow") != nil {
            throw McuMgrError(
                .usage,
                "\(uri): a raw tcp:// port server keeps its own baud rate and flow control (set them in its configuration, e.g. ser2net.yaml); use rfc2217:// to send them from here"
            )
        }
        try checkOptions(uri, allowed: allowed)
        guard let port = uri.port else { throw McuMgrError(.usage, "\(uri) names no port") }
        let endpoint: SerialTransport.Endpoint =
            rfc2217 ? .rfc2217(host: uri.target, port: port) : .tcp(host: uri.target, port: port)
        var configuration = SerialTransport.Configuration(endpoint: endpoint)
        try applySerialOptions(uri, to: &configuration)
        if let seconds = try uri.intOption("timeout", in: 1...300) { configuration.connectTimeout = .seconds(seconds) }
        if let bits = try uri.intOption("databits", in: 5...8) { configuration.dataBits = bits }
        if let parity = uri.option("parity") {
            let values: [String: RFC2217Codec.Parity] = [
                "none": .none, "n": .none, "odd": .odd, "o": .odd, "even": .even, "e": .even, "mark": .mark, "m": .mark,
                "space": .space, "s": .space,
            ]
            guard let value = values[parity.lowercased()] else {
                throw McuMgrError(.usage, "parity=\(parity) in \(uri): use none, odd, even, mark or space")
            }
            configuration.parity = value
        }
        if let stop = uri.option("stopbits") {
            let values: [String: RFC2217Codec.StopBits] = ["1": .one, "2": .two, "1.5": .onePointFive]
            guard let value = values[stop] else {
                throw McuMgrError(.usage, "stopbits=\(stop) in \(uri): use 1, 1.5 or 2")
            }
            configuration.stopBits = value
        }
        return SerialTransport(configuration: configuration, logger: logger)
    }
}
