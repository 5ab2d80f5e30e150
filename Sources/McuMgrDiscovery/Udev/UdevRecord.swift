/// What udev reports about one tty device and the USB device and interface above it, read at once: a
/// snapshot, so that everything after reading (names, fallbacks, board matching) is pure and testable.
struct UdevTTYRecord: Sendable, Hashable {
    /// A device above the tty (the USB device or interface).
    struct Ancestor: Sendable, Hashable {
        var sysPath: String
        var sysName: String
        /// The sysfs attributes discovery reads (only those present).
        var attributes: [String: String]
        var properties: [String: String]
        var driver: String?
    }

    var sysPath: String
    var sysName: String
    var devNode: String?
    /// Properties of the tty: the kernel's (DEVNAME, MAJOR, ...) and, when udevd ran, its database
    /// (ID_VENDOR_ID, ID_SERIAL_SHORT, DEVLINKS, ...).
    var properties: [String: String]
    /// Symlinks from udevd's database.
    var devLinks: [String] = []
    /// The syspath of the tty's parent device; nil for virtual ttys (console, pty, vt).
    var parentSysPath: String?
    /// The driver of the tty's parent (cdc_acm, ftdi_sio, cp210x, ch341, pl2303, serial8250, ...).
    var parentDriver: String?
    var usbDevice: Ancestor?
    var usbInterface: Ancestor?

    /// USB device attributes discovery reads (the fallback when udevd's database is absent).
    static let usbDeviceAttributes = [
        "idVendor", "idProduct", "serial", "manufacturer", "product", "busnum", "devnum", "bcdDevice",
    ]
    /// USB interface attributes discovery reads.
    static let usbInterfaceAttributes = ["bInterfaceNumber", "bInterfaceClass", "interface"]
}

extension UdevTTYRecord {
    /// Reads a tty device from libudev; nil when it has no device node.
    static func read(_ device: OpaquePointer) -> UdevTTYRecord? {
        guard let sysPath = LibUdev.sysPath(device) else { return nil }
        let sysName = LibUdev.sysName(device) ?? String(sysPath.split(separator: "/").last ?? "")
        var record = UdevTTYRecord(
            sysPath: sysPath, sysName: sysName, devNode: LibUdev.devNode(device),
            properties: LibUdev.properties(device), devLinks: LibUdev.devLinks(device))
        if let parent = LibUdev.parent(device) {
            record.parentSysPath = LibUdev.sysPath(parent)
            record.parentDriver = LibUdev.driver(parent)
        }
        if let usb = LibUdev.parent(device, subsystem: "usb", devType: "usb_device") {
            record.usbDevice = ancestor(usb, attributes: usbDeviceAttributes)
        }
        if let interface = LibUdev.parent(device, subsystem: "usb", devType: "usb_interface") {
            record.usbInterface = ancestor(interface, attributes: usbInterfaceAttributes)
        }
        return record
    }

    private static func ancestor(_ device: OpaquePointer, attributes names: [String]) -> Ancestor {
        var attributes: [String: String] = [:]
        for name in names {
            if let value = LibUdev.sysAttribute(device, name) { attributes[name] = value }
        }
        return Ancestor(
            sysPath: LibUdev.sysPath(device) ?? "", sysName: LibUdev.sysName(device) ?? "",
            attributes: attributes, properties: LibUdev.properties(device), driver: LibUdev.driver(device))
    }
}
