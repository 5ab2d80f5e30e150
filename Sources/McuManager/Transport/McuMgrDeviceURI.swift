/// A device address in the package's one syntax:
/// `serial:/dev/ttyACM0?baud=115200`, `udp:192.0.2.7:1337`, `udp:[::1]:1337`, `udp://host:port`,
/// `sim:` (an in-process simulated device), `ble:AA:BB:CC:DD:EE:FF`, and remote serial ports:
/// `tcp://host:port` (a raw TCP port server, e.g. ser2net) and `rfc2217://host:port?baud=115200`
/// (Telnet with RFC 2217 port control). A bare `/dev/...` path means serial.
public struct McuMgrDeviceURI: Sendable, Hashable, CustomStringConvertible {
    /// The transport a URI names.
    public enum Scheme: String, Sendable, Hashable, CaseIterable {
        case serial, udp, sim, ble
        /// A serial port behind a raw TCP port server (e.g. ser2net's `tcp` accepter).
        case tcp
        /// A serial port behind a Telnet RFC 2217 server (e.g. ser2net's `telnet(rfc2217)` accepter).
        case rfc2217

        /// Whether the scheme names a serial port (local or remote), taking the serial link options.
        public var isSerial: Bool { self == .serial || self == .tcp || self == .rfc2217 }
    }

    public var scheme: Scheme
    /// Serial: the port path. UDP, TCP, RFC 2217: the host (IPv6 without brackets). BLE: address or
    /// `name=...`. Sim: empty.
    public var target: String
    /// UDP port (default 1337); TCP and RFC 2217 port (required).
    public var port: Int?
    /// Query options (`?key=value&flag`), in order; keys lower-cased.
    public var options: [(key: String, value: String)]

    public static let defaultUDPPort = 1337

    public init(scheme: Scheme, target: String, port: Int? = nil, options: [(key: String, value: String)] = []) {
        self.scheme = scheme
        self.target = target
        self.port = port
        self.options = options
    }

    /// Parses a device URI.
    /// - Throws: `McuMgrError` of kind `.usage` saying what is wrong and showing valid forms.
    public init(parsing text: String) throws {
        let examples =
            "serial:/dev/ttyACM0?baud=115200, udp:192.0.2.7:1337, udp:[::1], tcp://host:2000, rfc2217://host:2001?baud=115200, ble:AA:BB:CC:DD:EE:FF, sim:"
        var rest = Substring(text.trimmingCharactersInWhitespace())
        guard !rest.isEmpty else {
            throw McuMgrError(.usage, "empty device URI; use one of: \(examples)")
        }
        if rest.hasPrefix("/") {
            rest = "serial:" + rest
        }
        guard let colon = rest.firstIndex(of: ":") else {
            throw McuMgrError(.usage, "device URI \"\(text)\" has no scheme; use one of: \(examples)")
        }
        let schemeText = rest[..<colon].lowercased()
        guard let scheme = Scheme(rawValue: schemeText) else {
            throw McuMgrError(
                .usage, "unknown device scheme \"\(schemeText)\" in \"\(text)\"; use one of: \(examples)")
        }
        var body = rest[rest.index(after: colon)...]
        if body.hasPrefix("//") { body = body.dropFirst(2) }
        var query: Substring = ""
        if let q = body.firstIndex(of: "?") {
            query = body[body.index(after: q)...]
            body = body[..<q]
        }
        var options: [(key: String, value: String)] = []
        for item in query.split(separator: "&") where !item.isEmpty {
            if let eq = item.firstIndex(of: "=") {
                options.append((item[..<eq].lowercased(), String(item[item.index(after: eq)...])))
            } else {
                options.append((item.lowercased(), ""))
            }
        }
        self.scheme = scheme
        self.options = options
        self.port = nil
        self.target = ""
        switch scheme {
        case .serial:
            guard !body.isEmpty else {
                throw McuMgrError(.usage, "serial URI \"\(text)\" names no port; e.g. serial:/dev/ttyACM0?baud=115200")
            }
            target = String(body)
        case .udp:
            let (host, port) = try Self.splitHostPort(body, text: text, scheme: "udp")
            target = host
            self.port = port ?? Self.defaultUDPPort
        case .tcp, .rfc2217:
            let (host, port) = try Self.splitHostPort(body, text: text, scheme: scheme.rawValue)
            guard let port else {
                throw McuMgrError(
                    .usage,
                    "\(scheme.rawValue) URI \"\(text)\" names no port; e.g. \(scheme.rawValue)://192.0.2.7:2000 or \(scheme.rawValue)://[2001:db8::1]:2000 (the port of the server's accepter, e.g. ser2net's)"
                )
            }
            target = host
            self.port = port
        case .sim:
            target = String(body)
        case .ble:
            guard !body.isEmpty else {
                throw McuMgrError(.usage, "BLE URI \"\(text)\" names no device; e.g. ble:AA:BB:CC:DD:EE:FF or ble:name=MyDevice")
            }
            target = String(body)
        }
    }

    private static func splitHostPort(_ body: Substring, text: String, scheme: String) throws -> (String, Int?) {
        let example = scheme == "udp" ? 1337 : 2000
        let usage = "e.g. \(scheme):192.0.2.7:\(example) or \(scheme):[2001:db8::1]:\(example)"
        let kind = scheme == "rfc2217" ? "RFC 2217" : scheme.uppercased()
        guard !body.isEmpty else { throw McuMgrError(.usage, "\(kind) URI \"\(text)\" names no host; \(usage)") }
        var host: Substring
        var portText: Substring?
        if body.hasPrefix("[") {
            guard let close = body.firstIndex(of: "]") else {
                throw McuMgrError(.usage, "unclosed [ in \"\(text)\"; \(usage)")
            }
            host = body[body.index(after: body.startIndex)..<close]
            let after = body[body.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw McuMgrError(.usage, "unexpected \"\(after)\" in \"\(text)\"; \(usage)") }
                portText = after.dropFirst()
            }
        } else if body.filter({ $0 == ":" }).count > 1 {
            // A bare IPv6 literal without a port.
            host = body
        } else if let colon = body.lastIndex(of: ":") {
            host = body[..<colon]
            portText = body[body.index(after: colon)...]
        } else {
            host = body
        }
        guard !host.isEmpty else { throw McuMgrError(.usage, "\(kind) URI \"\(text)\" names no host; \(usage)") }
        var port: Int?
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else {
                throw McuMgrError(.usage, "invalid \(kind) port \"\(portText)\" in \"\(text)\"; use 1-65535")
            }
            port = p
        }
        return (String(host), port)
    }

    /// The value of an option, nil when absent.
    public func option(_ key: String) -> String? {
        options.last { $0.key == key.lowercased() }?.value
    }

    /// An integer option, nil when absent.
    /// - Throws: `.usage` when present but not an integer in `range`.
    public func intOption(_ key: String, in range: ClosedRange<Int> = Int.min...Int.max) throws -> Int? {
        guard let text = option(key) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw McuMgrError(.usage, "option \(key)=\(text) in \(self) must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// A boolean option: present without value, or 1/true/yes/on vs 0/false/no/off.
    public func boolOption(_ key: String) throws -> Bool? {
        guard let text = option(key) else { return nil }
        switch text.lowercased() {
        case "", "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw McuMgrError(.usage, "option \(key)=\(text) in \(self) must be true or false")
        }
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.scheme == b.scheme && a.target == b.target && a.port == b.port
            && a.options.map { "\($0.key)=\($0.value)" } == b.options.map { "\($0.key)=\($0.value)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(scheme)
        hasher.combine(target)
        hasher.combine(port)
    }

    public var description: String {
        var s = "\(scheme.rawValue):"
        switch scheme {
        case .udp:
            s += target.contains(":") ? "[\(target)]" : target
            if let port { s += ":\(port)" }
        case .tcp, .rfc2217:
            s += "//" + (target.contains(":") ? "[\(target)]" : target)
            if let port { s += ":\(port)" }
        default:
            s += target
        }
        if !options.isEmpty {
            s += "?" + options.map { $0.value.isEmpty ? $0.key : "\($0.key)=\($0.value)" }.joined(separator: "&")
        }
        return s
    }
}

extension String {
    func trimmingCharactersInWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
