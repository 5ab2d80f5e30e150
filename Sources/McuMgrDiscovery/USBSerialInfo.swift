import McuManager

/// The USB side of a serial port.
public struct USBSerialInfo: Sendable, Hashable {
    public var vendorID: UInt16
    public var productID: UInt16
    /// The manufacturer string the device reports, or the USB ID database's vendor name.
    public var vendorName: String?
    /// The product string the device reports, or the USB ID database's model name.
    public var productName: String?
    /// The device's serial number string (`ID_SERIAL_SHORT` or the `serial` attribute).
    public var serialNumber: String?
    /// The USB interface the port belongs to (`ID_USB_INTERFACE_NUM` or `bInterfaceNumber`).
    public var interfaceNumber: Int?
    /// How many serial ports the same USB device has (a J-Link OB has two or three).
    public var interfaceCount: Int
    /// The physical port path, e.g. `1-1.2`: stable while the board stays in the same socket.
    public var portPath: String?

    public init(
        vendorID: UInt16, productID: UInt16, vendorName: String? = nil, productName: String? = nil,
        serialNumber: String? = nil, interfaceNumber: Int? = nil, interfaceCount: Int = 1, portPath: String? = nil
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.vendorName = vendorName
        self.productName = productName
        self.serialNumber = serialNumber
        self.interfaceNumber = interfaceNumber
        self.interfaceCount = interfaceCount
        self.portPath = portPath
    }

    /// Vendor and product names joined, or the IDs when neither is known.
    public var displayName: String {
        let names = [vendorName, productName].compactMap { $0 }.filter { !$0.isEmpty }
        return names.isEmpty ? "\(hex4(vendorID)):\(hex4(productID))" : names.joined(separator: " ")
    }
}
