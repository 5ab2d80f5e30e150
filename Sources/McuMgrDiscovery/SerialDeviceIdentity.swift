import McuManager

/// Who a serial port is, independent of its tty name.
public struct SerialDeviceIdentity: Sendable, Hashable, CustomStringConvertible {
    public var vendorID: UInt16?
    public var productID: UInt16?
    public var serialNumber: String?
    public var interfaceNumber: Int?
    /// The physical USB port: used when the device has no serial number.
    public var usbPortPath: String?
    /// For ports that are not on USB: their path, which does not change.
    public var nonUSBPath: String?

    public init(
        vendorID: UInt16?, productID: UInt16?, serialNumber: String?, interfaceNumber: Int?, usbPortPath: String?,
        nonUSBPath: String? = nil
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.serialNumber = serialNumber
        self.interfaceNumber = interfaceNumber
        self.usbPortPath = usbPortPath
        self.nonUSBPath = nonUSBPath
    }

    /// Whether `device` is this one: same vendor, product and interface, and the same serial number (or,
    /// without one, the same physical USB port).
    public func matches(_ device: SerialDevice) -> Bool {
        guard let usb = device.usb else { return nonUSBPath != nil && nonUSBPath == device.path }
        guard nonUSBPath == nil, vendorID == usb.vendorID, productID == usb.productID else { return false }
        if let interfaceNumber, let other = usb.interfaceNumber, interfaceNumber != other { return false }
        if let serialNumber, !serialNumber.isEmpty { return serialNumber == usb.serialNumber }
        if let usbPortPath { return usbPortPath == usb.portPath }
        return true
    }

    public var description: String {
        if let nonUSBPath { return nonUSBPath }
        var text = "\(vendorID.map(hex4) ?? "?"):\(productID.map(hex4) ?? "?")"
        if let serialNumber { text += " serial \(serialNumber)" } else if let usbPortPath { text += " at USB port \(usbPortPath)" }
        if let interfaceNumber { text += " interface \(interfaceNumber)" }
        return text
    }
}
