import CUdev

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Every libudev call the package makes, each behind one thin wrapper that names the C call and turns
/// C strings and lists into Swift values. Nothing here keeps state; the owners below release what they
/// create.
enum LibUdev {
    // MARK: Context

    /// `udev_new`: nil when libudev cannot start (it then finds nothing; callers report "no devices").
    static func new() -> OpaquePointer? { udev_new() }
    /// `udev_unref`.
    static func unref(_ udev: OpaquePointer) { _ = udev_unref(udev) }

    // MARK: Enumeration

    /// `udev_enumerate_new` + `add_match_subsystem` + `scan_devices`; the syspaths found, in order.
    /// Empty when libudev finds nothing (no /sys, a container without devices).
    static func scanSysPaths(_ udev: OpaquePointer, subsystem: String) -> [String] {
        guard let enumerate = udev_enumerate_new(udev) else { return [] }
        defer { _ = udev_enumerate_unref(enumerate) }
        guard udev_enumerate_add_match_subsystem(enumerate, subsystem) >= 0,
            udev_enumerate_scan_devices(enumerate) >= 0
        else { return [] }
        return names(of: udev_enumerate_get_list_entry(enumerate))
    }

    // MARK: Devices

    /// `udev_device_new_from_syspath`: a referenced device or nil when it vanished.
    static func device(_ udev: OpaquePointer, sysPath: String) -> OpaquePointer? {
        udev_device_new_from_syspath(udev, sysPath)
    }
    /// `udev_device_unref`.
    static func unref(device: OpaquePointer) { _ = udev_device_unref(device) }
    /// `udev_device_get_syspath`.
    static func sysPath(_ device: OpaquePointer) -> String? { string(udev_device_get_syspath(device)) }
    /// `udev_device_get_sysname`.
    static func sysName(_ device: OpaquePointer) -> String? { string(udev_device_get_sysname(device)) }
    /// `udev_device_get_subsystem`.
    static func subsystem(_ device: OpaquePointer) -> String? { string(udev_device_get_subsystem(device)) }
    /// `udev_device_get_devtype`.
    static func devType(_ device: OpaquePointer) -> String? { string(udev_device_get_devtype(device)) }
    /// `udev_device_get_devnode`.
    static func devNode(_ device: OpaquePointer) -> String? { string(udev_device_get_devnode(device)) }
    /// `udev_device_get_driver`.
    static func driver(_ device: OpaquePointer) -> String? { string(udev_device_get_driver(device)) }
    /// `udev_device_get_action` (monitor events only).
    static func action(_ device: OpaquePointer) -> String? { string(udev_device_get_action(device)) }
    /// `udev_device_get_properties_list_entry`: all properties (udev database and uevent).
    static func properties(_ device: OpaquePointer) -> [String: String] {
        var result: [String: String] = [:]
        var entry = udev_device_get_properties_list_entry(device)
        while let e = entry {
            if let name = string(udev_list_entry_get_name(e)) {
                result[name] = string(udev_list_entry_get_value(e)) ?? ""
            }
            entry = udev_list_entry_get_next(e)
        }
        return result
    }
    /// `udev_device_get_devlinks_list_entry`: symlinks udevd made (empty without its database).
    static func devLinks(_ device: OpaquePointer) -> [String] {
        names(of: udev_device_get_devlinks_list_entry(device))
    }
    /// `udev_device_get_sysattr_value`: a sysfs attribute, trimmed; nil when absent or unreadable.
    static func sysAttribute(_ device: OpaquePointer, _ name: String) -> String? {
        guard let value = string(udev_device_get_sysattr_value(device, name)) else { return nil }
        let trimmed = value.trimmingWhitespace()
        return trimmed.isEmpty ? nil : trimmed
    }
    /// `udev_device_get_parent_with_subsystem_devtype`: borrowed from `device` (do not unref).
    static func parent(_ device: OpaquePointer, subsystem: String, devType: String?) -> OpaquePointer? {
        udev_device_get_parent_with_subsystem_devtype(device, subsystem, devType)
    }
    /// `udev_device_get_parent`: borrowed from `device` (do not unref).
    static func parent(_ device: OpaquePointer) -> OpaquePointer? { udev_device_get_parent(device) }

    // MARK: Monitor

    /// `udev_monitor_new_from_netlink`: `"udev"` (events after udevd processed them) or `"kernel"`.
    /// Nil when netlink is not available (sandboxes); callers then rescan instead.
    static func monitor(_ udev: OpaquePointer, source: String) -> OpaquePointer? {
        udev_monitor_new_from_netlink(udev, source)
    }
    /// `udev_monitor_filter_add_match_subsystem_devtype`.
    static func filter(_ monitor: OpaquePointer, subsystem: String) -> Bool {
        udev_monitor_filter_add_match_subsystem_devtype(monitor, subsystem, nil) >= 0
    }
    /// `udev_monitor_enable_receiving`.
    static func enableReceiving(_ monitor: OpaquePointer) -> Bool { udev_monitor_enable_receiving(monitor) >= 0 }
    /// `udev_monitor_get_fd`: non-blocking.
    static func fileDescriptor(_ monitor: OpaquePointer) -> Int32 { udev_monitor_get_fd(monitor) }
    /// `udev_monitor_receive_device`: the next event, nil when none is queued (never blocks).
    static func receive(_ monitor: OpaquePointer) -> OpaquePointer? { udev_monitor_receive_device(monitor) }
    /// `udev_monitor_unref`.
    static func unref(monitor: OpaquePointer) { _ = udev_monitor_unref(monitor) }

    // MARK: Helpers

    private static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        pointer.map { String(cString: $0) }
    }

    private static func names(of first: OpaquePointer?) -> [String] {
        var result: [String] = []
        var entry = first
        while let e = entry {
            if let name = string(udev_list_entry_get_name(e)) { result.append(name) }
            entry = udev_list_entry_get_next(e)
        }
        return result
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace || f == "\0" { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace || l == "\0" { s = s.dropLast() }
        return String(s)
    }
}
