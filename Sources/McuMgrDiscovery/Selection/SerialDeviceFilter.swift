import McuManager

/// A device given by what it is rather than where it is:
/// `auto` (the one SMP device present), `usb:1915` (vendor), `usb:1915:520f` (vendor and product),
/// `usb:serial=000683` (serial number), `usb:1915:520f?serial=...&interface=2`. Other query options
/// (`baud=`, `framing=`, ...) are kept for the serial URI the filter resolves to; `wait=SECONDS` waits
/// that long for a matching device to appear; `all` selects every matching port (`usb:2fe3?all`) for
/// commands that work on many devices at once.
public struct SerialDeviceFilter: Sendable, CustomStringConvertible {
    /// `auto`: any port (except those the board table marks as not speaking SMP).
    public var isAuto: Bool
    public var vendorID: UInt16?
    public var productID: UInt16?
    public var serialNumber: String?
    public var interfaceNumber: Int?
    /// A device node or one of its links (`/dev/ttyACM0`, `/dev/serial/by-id/...`).
    public var path: String?
    /// How long to wait for a matching device to appear (0: do not wait).
    public var wait: Duration
    /// Whether the filter selects every matching port (`all`) rather than exactly one.
    public var selectsAll: Bool
    /// Options for the serial URI (`baud`, `framing`, `line`, `mtu`, `flow`), in order.
    public var transportOptions: [(key: String, value: String)]
    /// The text as given.
    public var text: String

    public init(
        isAuto: Bool = false, vendorID: UInt16? = nil, productID: UInt16? = nil, serialNumber: String? = nil,
        interfaceNumber: Int? = nil, path: String? = nil, wait: Duration = .zero, selectsAll: Bool = false,
        transportOptions: [(key: String, value: String)] = [], text: String = ""
    ) {
        self.isAuto = isAuto
        self.vendorID = vendorID
        self.productID = productID
        self.serialNumber = serialNumber
        self.interfaceNumber = interfaceNumber
        self.path = path
        self.wait = wait
        self.selectsAll = selectsAll
        self.transportOptions = transportOptions
        self.text = text
    }

    public var description: String { text.isEmpty ? (isAuto ? "auto" : "usb:") : text }

    static let usage =
        "e.g. auto, usb:1915, usb:1915:520f, usb:serial=000683012345, usb:1366:1051?serial=...&interface=2 (add &baud=N for the serial port)"

    /// Whether `text` is a discovery filter (`auto...` or `usb:...`) rather than a device URI.
    public static func isFilter(_ text: String) -> Bool {
        let t = text.trimmingWhitespace().lowercased()
        return t == "auto" || t.hasPrefix("auto?") || t.hasPrefix("auto:") || t.hasPrefix("usb:")
    }

    /// Parses a filter.
    /// - Throws: `McuMgrError` of kind `.usage` saying what is wrong.
    public init(parsing input: String) throws {
        let text = input.trimmingWhitespace()
        self.init(text: text)
        var body: Substring
        let lower = text.lowercased()
        if lower == "auto" || lower.hasPrefix("auto?") || lower.hasPrefix("auto:") {
            isAuto = true
            body = Substring(text.dropFirst(4))
        } else if lower.hasPrefix("usb:") {
            body = Substring(text.dropFirst(4))
            if body.hasPrefix("//") { body = body.dropFirst(2) }
        } else {
            throw McuMgrError(.usage, "\"\(text)\" is not a device filter; \(Self.usage)")
        }
        var query: [Substring] = []
        if let q = body.firstIndex(of: "?") {
            query = body[body.index(after: q)...].split(separator: "&")
            body = body[..<q]
        }
        if isAuto, !body.isEmpty {
            throw McuMgrError(.usage, "unexpected \"\(body)\" after auto in \"\(text)\"; use auto or auto?baud=N")
        }
        if !body.isEmpty {
            if body.contains("=") {
                query = body.split(separator: "&") + query
            } else {
                let ids = body.split(separator: ":", omittingEmptySubsequences: false)
                guard ids.count <= 2, let vendor = Self.hexID(ids[0]) else {
                    throw McuMgrError(
                        .usage, "cannot read the USB IDs in \"\(text)\": give 4 hex digits each, as VID or VID:PID; \(Self.usage)")
                }
                vendorID = vendor
                if ids.count == 2 {
                    guard let product = Self.hexID(ids[1]) else {
                        throw McuMgrError(.usage, "cannot read the product ID \"\(ids[1])\" in \"\(text)\": give 4 hex digits, e.g. usb:1915:520f")
                    }
                    productID = product
                }
            }
        }
        for item in query where !item.isEmpty {
            let key: String
            let value: String
            if let eq = item.firstIndex(of: "=") {
                key = item[..<eq].lowercased()
                value = String(item[item.index(after: eq)...])
            } else {
                key = item.lowercased()
                value = ""
            }
            switch key {
            case "serial", "sn":
                guard !value.isEmpty else { throw McuMgrError(.usage, "serial= needs a value in \"\(text)\"") }
                serialNumber = value
            case "interface", "if":
                guard let n = Int(value), (0...255).contains(n) else {
                    throw McuMgrError(.usage, "interface=\(value) in \"\(text)\" must be a USB interface number 0-255 (see `smp devices`)")
                }
                interfaceNumber = n
            case "vid", "vendor":
                guard let v = Self.hexID(Substring(value)) else { throw McuMgrError(.usage, "vid=\(value) in \"\(text)\": give 4 hex digits") }
                vendorID = v
            case "pid", "product":
                guard let p = Self.hexID(Substring(value)) else { throw McuMgrError(.usage, "pid=\(value) in \"\(text)\": give 4 hex digits") }
                productID = p
            case "wait":
                guard let seconds = Double(value), seconds >= 0, seconds <= 3600 else {
                    throw McuMgrError(.usage, "wait=\(value) in \"\(text)\" must be a number of seconds (0-3600)")
                }
                wait = .milliseconds(Int64(seconds * 1000))
            case "all":
                guard ["", "1", "true", "yes", "on"].contains(value.lowercased()) else {
                    throw McuMgrError(.usage, "all=\(value) in \"\(text)\": write all alone to select every matching port")
                }
                selectsAll = true
            default:
                transportOptions.append((key, value))
            }
        }
    }

    private static func hexID(_ text: Substring) -> UInt16? {
        var t = text.lowercased()
        if t.hasPrefix("0x") { t.removeFirst(2) }
        guard (1...4).contains(t.count) else { return nil }
        return UInt16(t, radix: 16)
    }

    /// Whether `device` passes the filter.
    public func matches(_ device: SerialDevice) -> Bool {
        if let path, device.path != path && !device.links.contains(path) { return false }
        if isAuto && vendorID == nil && productID == nil && serialNumber == nil && interfaceNumber == nil {
            return device.board?.smp != .unlikely
        }
        guard let usb = device.usb else { return path != nil && vendorID == nil && serialNumber == nil }
        if let vendorID, vendorID != usb.vendorID { return false }
        if let productID, productID != usb.productID { return false }
        if let serialNumber, serialNumber.lowercased() != (usb.serialNumber ?? "").lowercased() { return false }
        if let interfaceNumber, interfaceNumber != usb.interfaceNumber { return false }
        return true
    }

    /// The serial URI for `device` with this filter's transport options.
    public func uri(for device: SerialDevice) -> McuMgrDeviceURI {
        McuMgrDeviceURI(scheme: .serial, target: device.path, options: transportOptions)
    }
}
