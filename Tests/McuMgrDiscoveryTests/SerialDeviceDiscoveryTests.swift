import Foundation
import McuManager
import Testing

@testable import McuMgrDiscovery

/// Building devices from udev snapshots: with udevd's database, and from sysfs attributes alone.
@Suite("Serial device discovery (snapshots)")
struct SerialDeviceDiscoveryTests {
    static let usbPath = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2"

    static func record(
        tty: String = "ttyACM0", interface: Int = 0, properties: [String: String] = [:],
        usbAttributes: [String: String] = ["idVendor": "1366", "idProduct": "1051", "serial": "000683123456", "manufacturer": "SEGGER", "product": "J-Link"],
        driver: String? = "cdc_acm"
    ) -> UdevTTYRecord {
        let interfacePath = "\(usbPath)/1-2:1.\(interface)"
        return UdevTTYRecord(
            sysPath: "\(interfacePath)/tty/\(tty)", sysName: tty, devNode: "/dev/\(tty)",
            properties: ["DEVNAME": "/dev/\(tty)", "SUBSYSTEM": "tty"].merging(properties) { $1 },
            parentSysPath: interfacePath, parentDriver: driver,
            usbDevice: .init(sysPath: usbPath, sysName: "1-2", attributes: usbAttributes, properties: [:], driver: "usb"),
            usbInterface: .init(
                sysPath: interfacePath, sysName: "1-2:1.\(interface)",
                attributes: ["bInterfaceNumber": String(format: "%02x", interface)], properties: [:], driver: driver))
    }

    @Test func sysfsAttributesAloneGiveTheWholePicture() {
        let discovery = SerialDeviceDiscovery()
        let devices = discovery.build([Self.record(), Self.record(tty: "ttyACM1", interface: 2)], linkIndex: .empty)
        #expect(devices.count == 2)
        let first = devices[0]
        #expect(first.path == "/dev/ttyACM0")
        #expect(first.usb?.vendorID == 0x1366)
        #expect(first.usb?.productID == 0x1051)
        #expect(first.usb?.serialNumber == "000683123456")
        #expect(first.usb?.vendorName == "SEGGER")
        #expect(first.usb?.productName == "J-Link")
        #expect(first.usb?.interfaceNumber == 0)
        #expect(first.usb?.interfaceCount == 2)
        #expect(first.usb?.portPath == "1-2")
        #expect(first.driver == "cdc_acm")
        #expect(first.board?.kind == .debugProbe)
        #expect(devices[1].usb?.interfaceNumber == 2)
        #expect(devices[1].suggestedFilter == "usb:1366:1051?serial=000683123456&interface=2")
        #expect(first.links.isEmpty)
    }

    @Test func udevPropertiesComeFirstAndLinksAreSortedByIDFirst() {
        let record = Self.record(
            properties: [
                "ID_VENDOR_ID": "1915", "ID_MODEL_ID": "520f", "ID_SERIAL_SHORT": "FROMUDEV", "ID_USB_INTERFACE_NUM": "00",
                "ID_VENDOR_ENC": "Nordic\\x20Semiconductor", "ID_MODEL": "USB_CDC", "ID_USB_DRIVER": "cdc_acm",
                "DEVLINKS": "/dev/serial/by-path/pci-0:1.0 /dev/serial/by-id/usb-Nordic-if00",
            ],
            usbAttributes: ["idVendor": "1915", "idProduct": "520f"])
        let device = SerialDeviceDiscovery().build([record], linkIndex: .empty)[0]
        #expect(device.usb?.serialNumber == "FROMUDEV")
        #expect(device.usb?.vendorName == "Nordic Semiconductor")
        #expect(device.usb?.productName == "USB CDC")
        #expect(device.links == ["/dev/serial/by-id/usb-Nordic-if00", "/dev/serial/by-path/pci-0:1.0"])
        #expect(device.byIDLink == "/dev/serial/by-id/usb-Nordic-if00")
        #expect(device.suggestedFilter == "usb:1915:520f?serial=FROMUDEV")
        #expect(device.board?.smp == .likely)
    }

    @Test func virtualAndNonUSBTTYsAreLeftOutUnlessAsked() {
        let virtual = UdevTTYRecord(
            sysPath: "/sys/devices/virtual/tty/tty1", sysName: "tty1", devNode: "/dev/tty1", properties: [:],
            parentSysPath: nil)
        let console = UdevTTYRecord(
            sysPath: "/sys/devices/virtual/tty/console", sysName: "console", devNode: "/dev/console", properties: [:],
            parentSysPath: "/sys/devices/virtual/tty")
        let uart = UdevTTYRecord(
            sysPath: "/sys/devices/platform/serial8250/tty/ttyS0", sysName: "ttyS0", devNode: "/dev/ttyS0",
            properties: [:], parentSysPath: "/sys/devices/platform/serial8250", parentDriver: "serial8250")
        #expect(SerialDeviceDiscovery().build([virtual, console, uart], linkIndex: .empty).isEmpty)
        let all = SerialDeviceDiscovery(includeNonUSB: true).build([virtual, console, uart], linkIndex: .empty)
        #expect(all.map(\.path) == ["/dev/ttyS0"])
        #expect(all[0].usb == nil)
        #expect(all[0].suggestedFilter == nil)
        #expect(all[0].identity.matches(all[0]))
    }

    @Test func linksFoundInDevSerialResolveLexically() {
        #expect(SerialLinkIndex.resolveLexically("../../ttyACM0", relativeTo: "/dev/serial/by-id") == "/dev/ttyACM0")
        #expect(SerialLinkIndex.resolveLexically("/dev/ttyUSB1", relativeTo: "/dev/serial/by-id") == "/dev/ttyUSB1")
        let index = SerialLinkIndex(targets: ["/dev/ttyACM0": ["/dev/serial/by-id/usb-X-if00"]])
        let device = SerialDeviceDiscovery().build([Self.record()], linkIndex: index)[0]
        #expect(device.byIDLink == "/dev/serial/by-id/usb-X-if00")
    }

    @Test func naturalOrder() {
        let records = ["ttyACM10", "ttyACM2", "ttyACM1"].enumerated().map { Self.record(tty: $1, interface: $0 * 2) }
        #expect(SerialDeviceDiscovery().build(records, linkIndex: .empty).map(\.name) == ["ttyACM1", "ttyACM2", "ttyACM10"])
    }

    @Test func udevEscapesDecode() {
        #expect(decodeUdevString("J-Link\\x20OB") == "J-Link OB")
        #expect(decodeUdevString("") == nil)
        #expect(decodeUdevString("\\x2") == "\\x2")
    }

    @Test func identityFollowsTheBoardUnderAnotherTTYName() {
        let before = SerialDeviceDiscovery().build([Self.record()], linkIndex: .empty)[0]
        let after = SerialDeviceDiscovery().build([Self.record(tty: "ttyACM3")], linkIndex: .empty)[0]
        #expect(before.identity.matches(after))
        let otherInterface = SerialDeviceDiscovery().build([Self.record(tty: "ttyACM4", interface: 2)], linkIndex: .empty)[0]
        #expect(!before.identity.matches(otherInterface))
        var noSerial = Self.record(usbAttributes: ["idVendor": "1a86", "idProduct": "7523"])
        noSerial.usbDevice?.sysName = "3-1.4"
        let ch340 = SerialDeviceDiscovery().build([noSerial], linkIndex: .empty)[0]
        #expect(ch340.identity.usbPortPath == "3-1.4")
        var elsewhere = noSerial
        elsewhere.usbDevice?.sysName = "3-2"
        #expect(!ch340.identity.matches(SerialDeviceDiscovery().build([elsewhere], linkIndex: .empty)[0]))
    }
}

@Suite("Discovery filters")
struct SerialDeviceFilterTests {
    @Test func forms() throws {
        #expect(SerialDeviceFilter.isFilter("auto"))
        #expect(SerialDeviceFilter.isFilter("USB:1915"))
        #expect(!SerialDeviceFilter.isFilter("serial:/dev/ttyACM0"))
        var f = try SerialDeviceFilter(parsing: "usb:1915:520f?serial=abc&interface=2&baud=1000000&wait=2.5")
        #expect(f.vendorID == 0x1915 && f.productID == 0x520f && f.serialNumber == "abc" && f.interfaceNumber == 2)
        #expect(f.wait == .milliseconds(2500))
        #expect(f.transportOptions.map(\.key) == ["baud"])
        f = try SerialDeviceFilter(parsing: "usb:serial=000683")
        #expect(f.vendorID == nil && f.serialNumber == "000683")
        f = try SerialDeviceFilter(parsing: "usb:0x1366")
        #expect(f.vendorID == 0x1366 && f.productID == nil)
        f = try SerialDeviceFilter(parsing: "auto?baud=115200")
        #expect(f.isAuto && f.transportOptions.count == 1 && !f.selectsAll)
        f = try SerialDeviceFilter(parsing: "usb:2fe3?all&baud=115200")
        #expect(f.selectsAll && f.vendorID == 0x2fe3 && f.transportOptions.map(\.key) == ["baud"])
        #expect(try SerialDeviceFilter(parsing: "auto?all").selectsAll)
        let device = SerialDevice(
            path: "/dev/ttyACM0", name: "ttyACM0", sysPath: "/sys/x",
            usb: USBSerialInfo(vendorID: 0x1915, productID: 0x520f, serialNumber: "ABC", interfaceNumber: 2))
        #expect(try SerialDeviceFilter(parsing: "usb:1915:520f?serial=abc&interface=2&baud=9600").uri(for: device).description
            == "serial:/dev/ttyACM0?baud=9600")
        #expect(try SerialDeviceFilter(parsing: "usb:1915:520f?serial=abc&interface=2").matches(device))
        #expect(try !SerialDeviceFilter(parsing: "usb:1915:520f?interface=0").matches(device))
        #expect(try !SerialDeviceFilter(parsing: "usb:1366").matches(device))
        #expect(try SerialDeviceFilter(parsing: "auto").matches(device))
    }

    @Test(arguments: [
        ("usb:xyz", "USB IDs"), ("usb:1915:52g0", "product ID"), ("usb:1:2:3", "USB IDs"),
        ("usb:1915?interface=x", "interface number"), ("usb:1915?wait=-1", "seconds"), ("auto:1915", "after auto"),
        ("usb:?serial=", "needs a value"), ("usb:2fe3?all=no", "write all alone"),
    ])
    func badFiltersSayWhatIsWrong(text: String, expected: String) {
        do {
            _ = try SerialDeviceFilter(parsing: text)
            Issue.record("accepted \(text)")
        } catch let error as McuMgrError {
            #expect(error.kind == .usage)
            #expect(error.message.contains(expected), "\(error.message)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
