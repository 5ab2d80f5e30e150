import McuManager

extension McuMgrBleTransport {
    /// Which device to talk to and how.
    public struct Configuration: Sendable, Hashable {
        /// A device by address or by advertised name.
        public enum Target: Sendable, Hashable, CustomStringConvertible {
            case address(BluetoothAddress)
            case name(String)

            public var description: String {
                switch self {
                case .address(let address): return address.rawValue
                case .name(let name): return "name=\(name)"
                }
            }
        }

        public var target: Target
        /// The adapter (`hci0`, or its address); nil takes the first powered one.
        public var adapter: String?
        /// How long to scan for a device BlueZ does not already know, and how long to keep retrying
        /// while a device that just reset comes back. The default, 15 s, outlasts the kernel's restart
        /// of discovery (about 10.4 s), which is a device's second chance when the kernel dropped its
        /// first advertisement.
        public static let defaultScanTimeout = Duration.seconds(15)
        public var scanTimeout: Duration
        /// How long `Connect` and the service discovery after it may take.
        public var connectTimeout: Duration
        /// The ATT MTU to assume when BlueZ reports none (older BlueZ without AcquireWrite or the MTU
        /// property); nil = 23, the LE minimum. Also caps what BlueZ reports.
        public var attMTU: Int?
        /// Whether the device reassembles SMP packets split over several writes
        /// (`CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY`): then packets may be as large as its `buf_size`;
        /// without it every request must fit one write.
        public var deviceReassembly: Bool
        /// Use AcquireWrite / AcquireNotify sockets when BlueZ offers them (else WriteValue and
        /// notifications as PropertiesChanged signals).
        public var acquire: Bool
        /// Disconnect on close when this transport made the connection.
        public var disconnectOnClose: Bool
        /// The D-Bus address of the bus BlueZ is on; nil = the system bus (`DBUS_SYSTEM_BUS_ADDRESS`).
        public var busAddress: String?

        public init(
            target: Target, adapter: String? = nil, scanTimeout: Duration = defaultScanTimeout,
            connectTimeout: Duration = .seconds(20), attMTU: Int? = nil, deviceReassembly: Bool = true,
            acquire: Bool = true, disconnectOnClose: Bool = true, busAddress: String? = nil
        ) {
            self.target = target
            self.adapter = adapter
            self.scanTimeout = scanTimeout
            self.connectTimeout = connectTimeout
            self.attMTU = attMTU
            self.deviceReassembly = deviceReassembly
            self.acquire = acquire
            self.disconnectOnClose = disconnectOnClose
            self.busAddress = busAddress
        }

        /// The options a `ble:` URI takes.
        public static let uriOptions: Set<String> = ["adapter", "timeout", "connect-timeout", "mtu", "reassembly", "acquire"]

        /// Reads a `ble:` URI: `ble:AA:BB:CC:DD:EE:FF` or `ble:name=NAME` (percent-escapes allowed),
        /// options `adapter=hci1`, `timeout=S` (scan), `connect-timeout=S`, `mtu=N` (ATT MTU),
        /// `reassembly=on|off`, `acquire=on|off`.
        /// - Throws: `.usage` saying what is wrong.
        public init(uri: McuMgrDeviceURI) throws {
            guard uri.scheme == .ble else {
                throw McuMgrError(.usage, "\(uri) is not a Bluetooth LE device; use ble:AA:BB:CC:DD:EE:FF or ble:name=NAME")
            }
            for option in uri.options where !Self.uriOptions.contains(option.key) {
                throw McuMgrError(
                    .usage,
                    "unknown option \"\(option.key)\" in \(uri); ble devices take: \(Self.uriOptions.sorted().joined(separator: ", "))")
            }
            let target: Target
            if uri.target.lowercased().hasPrefix("name=") {
                let name = Self.percentDecoded(String(uri.target.dropFirst(5)))
                guard !name.isEmpty else {
                    throw McuMgrError(.usage, "\(uri) names no device; use ble:name=NAME (the advertised name)")
                }
                target = .name(name)
            } else if let address = BluetoothAddress(uri.target) {
                target = .address(address)
            } else {
                throw McuMgrError(
                    .usage,
                    "\"\(uri.target)\" in \(uri) is not a Bluetooth address; use ble:AA:BB:CC:DD:EE:FF, or ble:name=NAME for a device by its advertised name (`smp ble scan` lists them)"
                )
            }
            self.init(target: target)
            if let adapter = uri.option("adapter") {
                guard !adapter.isEmpty else { throw McuMgrError(.usage, "adapter= in \(uri) needs a name, e.g. adapter=hci0") }
                self.adapter = adapter
            }
            if let seconds = try Self.seconds(uri, "timeout") { scanTimeout = seconds }
            if let seconds = try Self.seconds(uri, "connect-timeout") { connectTimeout = seconds }
            if let mtu = try uri.intOption("mtu", in: 23...517) { attMTU = mtu }
            if let reassembly = try uri.boolOption("reassembly") { deviceReassembly = reassembly }
            if let acquire = try uri.boolOption("acquire") { self.acquire = acquire }
        }

        private static func seconds(_ uri: McuMgrDeviceURI, _ key: String) throws -> Duration? {
            guard let text = uri.option(key) else { return nil }
            guard let value = Double(text), value > 0, value <= 3600 else {
                throw McuMgrError(.usage, "\(key)=\(text) in \(uri) must be a number of seconds between 0 and 3600")
            }
            return .milliseconds(Int64(value * 1000))
        }

        private static func percentDecoded(_ text: String) -> String {
            var bytes: [UInt8] = []
            var utf8 = Array(text.utf8)[...]
            while let byte = utf8.popFirst() {
                if byte == UInt8(ascii: "%"), utf8.count >= 2,
                    let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                    utf8 = utf8.dropFirst(2)
                } else {
                    bytes.append(byte)
                }
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// The URI that names this configuration (to recreate the transport, e.g. after a reset).
        public var uri: McuMgrDeviceURI {
            var options: [(key: String, value: String)] = []
            if let adapter { options.append(("adapter", adapter)) }
            if scanTimeout != Self.defaultScanTimeout { options.append(("timeout", "\(Double(scanTimeout.components.seconds) + Double(scanTimeout.components.attoseconds) / 1e18)")) }
            if let attMTU { options.append(("mtu", "\(attMTU)")) }
            if !deviceReassembly { options.append(("reassembly", "off")) }
            if !acquire { options.append(("acquire", "off")) }
            return McuMgrDeviceURI(scheme: .ble, target: target.description, options: options)
        }
    }
}
