import McuManager

/// A serial port found by discovery, with what udev (or sysfs) says about the USB device behind it.
public struct SerialDevice: Sendable, Hashable {
    /// The device node, e.g. `/dev/ttyACM0`.
    public var path: String
    /// The kernel's name for it, e.g. `ttyACM0`.
    public var name: String
    /// Its sysfs path, e.g. `/sys/devices/pci0000:00/.../1-1:1.0/tty/ttyACM0`.
    public var sysPath: String
    /// Stable symlinks to the node (`/dev/serial/by-id/...`, `/dev/serial/by-path/...`), by-id first.
    public var links: [String]
    /// The driver behind the port: `cdc_acm`, `ftdi_sio`, `cp210x`, `ch341`, `pl2303`, ...
    public var driver: String?
    /// The USB device and interface, nil for ports that are not on USB (e.g. `ttyS0`, `ttyAMA0`).
    public var usb: USBSerialInfo?
    /// What the board table (built in, plus the user's rules) says this port is.
    public var board: BoardMatch?

    public init(
        path: String, name: String, sysPath: String, links: [String] = [], driver: String? = nil,
        usb: USBSerialInfo? = nil, board: BoardMatch? = nil
    ) {
        self.path = path
        self.name = name
        self.sysPath = sysPath
        self.links = links
        self.driver = driver
        self.usb = usb
        self.board = board
    }

    /// The `/dev/serial/by-id/...` link, when udev made one.
    public var byIDLink: String? { links.first { $0.hasPrefix("/dev/serial/by-id/") } }

    /// The serial device URI for this port (its node, not a link, so that it names exactly what was found).
    public var uri: McuMgrDeviceURI { McuMgrDeviceURI(scheme: .serial, target: path) }

    /// A discovery filter that selects this port again, even under another tty name after a reset:
    /// `usb:VID:PID?serial=...&interface=N` (serial and interface only when known).
    public var suggestedFilter: String? {
        guard let usb else { return nil }
        var text = "usb:\(hex4(usb.vendorID)):\(hex4(usb.productID))"
        var query: [String] = []
        if let serial = usb.serialNumber, !serial.isEmpty { query.append("serial=\(serial)") }
        if let interface = usb.interfaceNumber, usb.interfaceCount > 1 { query.append("interface=\(interface)") }
        if !query.isEmpty { text += "?" + query.joined(separator: "&") }
        return text
    }

    /// Who this port is, independent of its tty name: what a follower matches after a reset.
    public var identity: SerialDeviceIdentity {
        SerialDeviceIdentity(
            vendorID: usb?.vendorID, productID: usb?.productID, serialNumber: usb?.serialNumber,
            interfaceNumber: usb?.interfaceNumber, usbPortPath: usb?.portPath,
            nonUSBPath: usb == nil ? path : nil)
    }

    /// One line for people: `/dev/ttyACM0  1915:520f  Nordic Semiconductor nRF52840 Dongle  SN 0123`.
    public var summary: String {
        var parts = [path]
        if let usb { parts.append("\(hex4(usb.vendorID)):\(hex4(usb.productID))") }
        if let name = board?.name { parts.append(name) } else if let usb { parts.append(usb.displayName) }
        if let serial = usb?.serialNumber { parts.append("serial \(serial)") }
        if let interface = usb?.interfaceNumber, (usb?.interfaceCount ?? 1) > 1 { parts.append("interface \(interface)") }
        return parts.joined(separator: "  ")
    }
}

/// Four lowercase hex digits, as udev and lsusb print USB IDs.
func hex4(_ value: UInt16) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
