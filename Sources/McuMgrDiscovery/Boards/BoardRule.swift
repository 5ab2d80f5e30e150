/// One entry of the board table: which USB devices (vendor, optionally product, interface and serial-number
/// prefix) it names, and what is known about them.
public struct BoardRule: Sendable, Hashable {
    /// What sits behind the serial port.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The microcontroller's own USB (a CDC-ACM device in the firmware): it leaves the bus and comes back
        /// when the board resets.
        case board
        /// A debug probe's virtual COM port (J-Link, CMSIS-DAP, ST-LINK, ...): it stays when the target resets.
        case debugProbe = "debug-probe"
        /// A USB-to-UART bridge chip (FTDI, CP210x, CH34x, PL2303): it stays when the target resets.
        case usbSerialAdapter = "usb-serial-adapter"
    }

    /// How likely the port carries SMP.
    public enum SMPHint: String, Sendable, Hashable, CaseIterable {
        /// The port's usual firmware speaks SMP (e.g. an nRF Connect SDK CDC-ACM MCUmgr transport).
        case likely
        /// It may: it is a UART bridge or a probe's VCOM, and SMP depends on the target's firmware.
        case possible
        /// It normally does not (e.g. a bootloader that speaks another protocol): left out of `auto`.
        case unlikely
    }

    public var vendorID: UInt16
    /// Nil: any product of the vendor.
    public var productID: UInt16?
    /// Nil: any interface.
    public var interfaceNumber: Int?
    /// Nil: any serial number.
    public var serialPrefix: String?
    /// A friendly name, e.g. "nRF52840 Dongle".
    public var name: String
    public var kind: Kind
    public var smp: SMPHint
    /// What this interface is for, e.g. "VCOM0: the application UART on Nordic DKs".
    public var role: String?
    /// Whether the port disappears and comes back when the target resets; default: true for `.board`.
    public var followsResets: Bool
    /// Where the IDs were checked, or "unverified" for entries taken from general knowledge.
    public var source: String?

    public init(
        vendorID: UInt16, productID: UInt16? = nil, interfaceNumber: Int? = nil, serialPrefix: String? = nil,
        name: String, kind: Kind, smp: SMPHint = .possible, role: String? = nil, followsResets: Bool? = nil,
        source: String? = nil
    ) {
        self.vendorID = vendorID
        self.productID = productID
        self.interfaceNumber = interfaceNumber
        self.serialPrefix = serialPrefix
        self.name = name
        self.kind = kind
        self.smp = smp
        self.role = role
        self.followsResets = followsResets ?? (kind == .board)
        self.source = source
    }

    /// Whether the rule names this USB port.
    public func matches(_ usb: USBSerialInfo) -> Bool {
        guard usb.vendorID == vendorID else { return false }
        if let productID, productID != usb.productID { return false }
        if let interfaceNumber, interfaceNumber != usb.interfaceNumber { return false }
        if let serialPrefix, !(usb.serialNumber ?? "").hasPrefix(serialPrefix) { return false }
        return true
    }

    /// More specific rules win: a serial prefix, then a product, then an interface.
    var specificity: Int {
        (serialPrefix != nil ? 4 : 0) + (productID != nil ? 2 : 0) + (interfaceNumber != nil ? 1 : 0)
    }
}
