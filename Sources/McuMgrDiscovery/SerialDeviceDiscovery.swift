#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// Finds serial ports with libudev: every tty with a hardware parent, the USB device and interface above
/// it, and what the board table says about it.
///
/// Properties come from udevd's database when it ran (ID_VENDOR_ID, ID_SERIAL_SHORT, DEVLINKS, ...), else
/// from the USB device's sysfs attributes (idVendor, idProduct, serial, manufacturer, product,
/// bInterfaceNumber). Where libudev finds nothing (no /sys, a container) the result is simply empty.
public struct SerialDeviceDiscovery: Sendable {
    public var table: BoardTable
    /// Include ports that are not on USB (ttyS, ttyAMA, ...); virtual ttys are always left out.
    public var includeNonUSB: Bool
    public var logger: Logger

    public init(table: BoardTable = BoardTable(), includeNonUSB: Bool = false, logger: Logger = Logger(label: "smp.discovery")) {
        self.table = table
        self.includeNonUSB = includeNonUSB
        self.logger = logger
    }

    /// The serial ports present now, sorted by path. Never blocks for long: it reads sysfs.
    public func devices() -> [SerialDevice] {
        build(UdevScanner.scanTTYs(logger: logger))
    }

    /// Builds devices from udev snapshots (pure but for the `/dev/serial` link scan).
    func build(_ records: [UdevTTYRecord], linkIndex: SerialLinkIndex = .scan()) -> [SerialDevice] {
        var interfaceCounts: [String: Int] = [:]
        for record in records {
            if let usb = record.usbDevice { interfaceCounts[usb.sysPath, default: 0] += 1 }
        }
        return records.compactMap { record in
            let count = record.usbDevice.map { interfaceCounts[$0.sysPath] ?? 1 } ?? 1
            return Self.device(from: record, interfaceCount: count, table: table, linkIndex: linkIndex,
                includeNonUSB: includeNonUSB)
        }.sorted { Self.naturalLess($0.path, $1.path) }
    }

    /// One device from one snapshot; nil for virtual ttys, nodes without a device file, and (unless asked
    /// for) ports that are not on USB.
    static func device(
        from record: UdevTTYRecord, interfaceCount: Int = 1, table: BoardTable, linkIndex: SerialLinkIndex,
        includeNonUSB: Bool
    ) -> SerialDevice? {
        guard let parent = record.parentSysPath, !parent.contains("/devices/virtual/") else { return nil }
        let path = record.devNode ?? record.properties["DEVNAME"].map { $0.hasPrefix("/") ? $0 : "/dev/" + $0 }
        guard let path else { return nil }
        let p = record.properties
        let driver = p["ID_USB_DRIVER"] ?? record.parentDriver ?? record.usbInterface?.driver
        var usb: USBSerialInfo?
        if let device = record.usbDevice {
            let a = device.attributes
            let vendor = p["ID_VENDOR_ID"].flatMap(parseHex16) ?? a["idVendor"].flatMap(parseHex16)
            let product = p["ID_MODEL_ID"].flatMap(parseHex16) ?? a["idProduct"].flatMap(parseHex16)
            if let vendor, let product {
                let interfaceText = p["ID_USB_INTERFACE_NUM"] ?? record.usbInterface?.attributes["bInterfaceNumber"]
                usb = USBSerialInfo(
                    vendorID: vendor, productID: product,
                    vendorName: nonEmpty(a["manufacturer"]) ?? decodeUdevString(p["ID_VENDOR_ENC"])
                        ?? nonEmpty(p["ID_VENDOR_FROM_DATABASE"]) ?? nonEmpty(p["ID_VENDOR"]).map(underscoresToSpaces),
                    productName: nonEmpty(a["product"]) ?? decodeUdevString(p["ID_MODEL_ENC"])
                        ?? nonEmpty(p["ID_MODEL_FROM_DATABASE"]) ?? nonEmpty(p["ID_MODEL"]).map(underscoresToSpaces),
                    serialNumber: nonEmpty(p["ID_SERIAL_SHORT"]) ?? nonEmpty(a["serial"]),
                    interfaceNumber: interfaceText.flatMap { Int($0, radix: 16) },
                    interfaceCount: interfaceCount,
                    portPath: device.sysName.isEmpty ? nil : device.sysName)
            }
        }
        if usb == nil && !includeNonUSB { return nil }
        var links: [String] = []
        for link in record.devLinks + (p["DEVLINKS"] ?? "").split(separator: " ").map(String.init)
            + linkIndex.links(to: path)
        where !link.isEmpty && !links.contains(link) {
            links.append(link)
        }
        links.sort { linkRank($0) < linkRank($1) || (linkRank($0) == linkRank($1) && $0 < $1) }
        return SerialDevice(
            path: path, name: record.sysName, sysPath: record.sysPath, links: links, driver: driver, usb: usb,
            board: usb.flatMap { table.match($0, driver: driver) })
    }

    private static func linkRank(_ link: String) -> Int {
        if link.hasPrefix("/dev/serial/by-id/") { return 0 }
        if link.hasPrefix("/dev/serial/by-path/") { return 1 }
        return 2
    }

    /// `ttyACM2` before `ttyACM10`.
    static func naturalLess(_ a: String, _ b: String) -> Bool {
        let x = Array(a.unicodeScalars)
        let y = Array(b.unicodeScalars)
        func isDigit(_ c: Unicode.Scalar) -> Bool { ("0"..."9").contains(c) }
        var i = 0
        var j = 0
        while i < x.count, j < y.count {
            guard isDigit(x[i]), isDigit(y[j]) else {
                if x[i] != y[j] { return x[i].value < y[j].value }
                i += 1
                j += 1
                continue
            }
            // Runs of digits compare by their values.
            let startX = i
            let startY = j
            while i < x.count, isDigit(x[i]) { i += 1 }
            while j < y.count, isDigit(y[j]) { j += 1 }
            let runX = x[startX..<i].drop { $0 == "0" }
            let runY = y[startY..<j].drop { $0 == "0" }
            if runX.count != runY.count { return runX.count < runY.count }
            if let (p, q) = zip(runX, runY).first(where: { $0 != $1 }) { return p.value < q.value }
        }
        return x.count - i < y.count - j
    }
}

/// Symlinks under `/dev/serial/by-id` and `/dev/serial/by-path`, read directly: the fallback for links
/// when udevd's database is absent but the links exist (or a test bed made them).
struct SerialLinkIndex: Sendable {
    /// Resolved target path → links.
    var targets: [String: [String]]

    static let empty = SerialLinkIndex(targets: [:])

    static func scan(directories: [String] = ["/dev/serial/by-id", "/dev/serial/by-path"]) -> SerialLinkIndex {
        var targets: [String: [String]] = [:]
        let fileManager = FileManager.default
        for directory in directories {
            guard let names = try? fileManager.contentsOfDirectory(atPath: directory) else { continue }
            for name in names.sorted() {
                let link = directory + "/" + name
                guard let destination = try? fileManager.destinationOfSymbolicLink(atPath: link) else { continue }
                let resolved = resolveLexically(destination, relativeTo: directory)
                targets[resolved, default: []].append(link)
            }
        }
        return SerialLinkIndex(targets: targets)
    }

    func links(to path: String) -> [String] { targets[path] ?? [] }

    /// `../../ttyACM0` relative to `/dev/serial/by-id` is `/dev/ttyACM0` (without following further links,
    /// so it works when /dev/ttyACM0 is itself a link, as in test beds).
    static func resolveLexically(_ destination: String, relativeTo directory: String) -> String {
        var parts = destination.hasPrefix("/") ? [] : directory.split(separator: "/").map(String.init)
        for part in destination.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(String(part))
            }
        }
        return "/" + parts.joined(separator: "/")
    }
}

/// Reads tty snapshots from libudev.
enum UdevScanner {
    static func scanTTYs(logger: Logger) -> [UdevTTYRecord] {
        guard let udev = LibUdev.new() else {
            logger.debug("libudev could not start (udev_new failed): no serial devices can be discovered")
            return []
        }
        defer { LibUdev.unref(udev) }
        var records: [UdevTTYRecord] = []
        for sysPath in LibUdev.scanSysPaths(udev, subsystem: "tty") {
            guard let device = LibUdev.device(udev, sysPath: sysPath) else { continue }
            defer { LibUdev.unref(device: device) }
            if let record = UdevTTYRecord.read(device) { records.append(record) }
        }
        logger.trace("udev: \(records.count) tty devices")
        return records
    }

    /// One tty by syspath (nil when gone).
    static func record(sysPath: String) -> UdevTTYRecord? {
        guard let udev = LibUdev.new() else { return nil }
        defer { LibUdev.unref(udev) }
        guard let device = LibUdev.device(udev, sysPath: sysPath) else { return nil }
        defer { LibUdev.unref(device: device) }
        return UdevTTYRecord.read(device)
    }
}

func parseHex16(_ text: String) -> UInt16? { UInt16(text.trimmingWhitespace(), radix: 16) }

private func nonEmpty(_ text: String?) -> String? {
    guard let text, !text.trimmingWhitespace().isEmpty else { return nil }
    return text.trimmingWhitespace()
}

private func underscoresToSpaces(_ text: String) -> String { text.replacing("_", with: " ") }

/// udev's `\x20`-style escapes (ID_VENDOR_ENC, ID_MODEL_ENC) decoded.
func decodeUdevString(_ text: String?) -> String? {
    guard let text, !text.isEmpty else { return nil }
    var bytes: [UInt8] = []
    let utf8 = Array(text.utf8)
    var index = 0
    while index < utf8.count {
        if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count, utf8[index + 1] == UInt8(ascii: "x"),
            let value = UInt8(String(decoding: utf8[(index + 2)...(index + 3)], as: UTF8.self), radix: 16)
        {
            bytes.append(value)
            index += 4
        } else {
            bytes.append(utf8[index])
            index += 1
        }
    }
    let decoded = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
    return decoded.isEmpty ? nil : decoded
}
