@testable import McuMgrDBus
import Testing

/// The pure parts of the D-Bus layer: names, paths, signatures, match rules (no bus needed).
@Suite("D-Bus values and names")
struct DBusValueTests {
    @Test func objectPaths() {
        for valid in ["/", "/org", "/org/bluez/hci0", "/a_b/C9/_"] {
            #expect(DBusObjectPath.isValid(valid), "\(valid)")
        }
        for invalid in ["", "org", "/org/", "//", "/org//bluez", "/org/blu-ez", "/ä", "/org bluez"] {
            #expect(!DBusObjectPath.isValid(invalid), "\(invalid)")
            #expect(DBusObjectPath(validating: invalid) == nil)
        }
        let device: DBusObjectPath = "/org/bluez/hci0/dev_00_00_5E_00_53_01"
        #expect(device.isDescendant(of: "/org/bluez/hci0"))
        #expect(device.isDescendant(of: "/"))
        #expect(!DBusObjectPath("/org/bluez/hci01").isDescendant(of: "/org/bluez/hci0"))
        #expect(device.parent == "/org/bluez/hci0")
        #expect(DBusObjectPath("/org").parent == .root)
        #expect(DBusObjectPath.root.appending("app") == "/app")
    }

    @Test func signatures() {
        let value: DBusValue = .dictionary(
            key: "o", value: "a{sa{sv}}",
            [DBusDictionaryEntry(.objectPath("/"), .dictionary(key: "s", value: "a{sv}", []))])
        #expect(value.signature == "a{oa{sa{sv}}}")
        #expect(DBusValue.structure([.int32(1), .bytes([]), .variant(.string("x"))]).signature == "(iayv)")
        #expect(DBusValue.properties(["b": .boolean(true), "a": .uint16(1)]).signature == "a{sv}")
        for valid in ["y", "a{sv}", "a{oa{sa{sv}}}", "(ii)", "a(sv)", "aay", "v", "h"] {
            #expect(DBusMarshal.isSingleCompleteType(valid), "\(valid)")
        }
        for invalid in ["", "a", "a{vs}", "{sv}", "()", "(i", "ii", "z", "a{s}", "a{sv"] {
            #expect(!DBusMarshal.isSingleCompleteType(invalid), "\(invalid)")
        }
    }

    @Test func validationRefusesWhatLibdbusWouldAbortOn() {
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.array(element: "s", [.int32(1)])) }
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.array(element: "zz", [])) }
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.dictionary(key: "v", value: "s", [])) }
        #expect(throws: DBusError.self) {
            try DBusMarshal.validate(.dictionary(key: "s", value: "v", [DBusDictionaryEntry(.string("k"), .string("not a variant"))]))
        }
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.structure([])) }
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.string("nul\u{0}inside")) }
        #expect(throws: DBusError.self) { try DBusMarshal.validate(.signature("a{")) }
        #expect(throws: Never.self) { try DBusMarshal.validate(.properties(["Powered": .boolean(true)])) }
        #expect(throws: Never.self) { try DBusMarshal.validate(.array(element: "a{sv}", [.properties([:])])) }
    }

    @Test func names() {
        #expect(DBusMarshal.isValidInterfaceName("org.bluez.GattCharacteristic1"))
        #expect(!DBusMarshal.isValidInterfaceName("bluez"))
        #expect(!DBusMarshal.isValidInterfaceName("org..bluez"))
        #expect(!DBusMarshal.isValidInterfaceName("org.1bluez"))
        #expect(DBusMarshal.isValidBusName(":1.42"))
        #expect(DBusMarshal.isValidBusName("org.bluez"))
        #expect(DBusMarshal.isValidBusName("org.freedesktop.DBus"))
        #expect(!DBusMarshal.isValidBusName("org"))
        #expect(!DBusMarshal.isValidBusName("org bluez"))
        #expect(DBusMarshal.isValidMemberName("GetManagedObjects"))
        #expect(!DBusMarshal.isValidMemberName("Get.Managed"))
        #expect(!DBusMarshal.isValidMemberName("9Lives"))
    }

    @Test func matchRules() {
        let rule = DBusMatchRule.propertiesChanged(
            sender: "org.bluez", path: "/org/bluez/hci0/dev_00_00_5E_00_53_01", interface: "org.bluez.Device1")
        #expect(
            rule.description
                == "type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='/org/bluez/hci0/dev_00_00_5E_00_53_01',arg0='org.bluez.Device1'"
        )
        #expect(DBusMatchRule(arg0: "it's").description == "type='signal',arg0='it'\\''s'")
        var signal = DBusMessage.signal(
            path: "/org/bluez/hci0/dev_00_00_5E_00_53_01", interface: "org.freedesktop.DBus.Properties",
            member: "PropertiesChanged", body: [.string("org.bluez.Device1"), .properties([:]), .strings([])])
        signal.sender = ":1.5"
        #expect(rule.matches(signal, senderOwner: ":1.5"))
        #expect(!rule.matches(signal, senderOwner: ":1.6"))
        // A well-known sender that has no owner matches any sender.
        #expect(rule.matches(signal, senderOwner: nil))
        var other = signal
        other.body[0] = .string("org.bluez.GattCharacteristic1")
        #expect(!rule.matches(other, senderOwner: ":1.5"))
        let namespace = DBusMatchRule(pathNamespace: "/org/bluez/hci0")
        #expect(namespace.matches(signal, senderOwner: nil))
        #expect(!DBusMatchRule(pathNamespace: "/org/bluez/hci1").matches(signal, senderOwner: nil))
    }

    @Test func readingValues() {
        let properties = DBusValue.properties([
            "Name": .string("smp"), "RSSI": .int16(-60), "UUIDs": .strings(["a", "b"]), "Value": .bytes([1, 2]),
            "Device": .objectPath("/org/bluez/hci0/dev_X"), "Connected": .boolean(true),
        ])
        let dictionary = properties.stringKeyedDictionary!
        #expect(dictionary["Name"]?.string == "smp")
        #expect(dictionary["RSSI"]?.int == -60)
        #expect(dictionary["UUIDs"]?.strings == ["a", "b"])
        #expect(dictionary["Value"]?.bytes == [1, 2])
        #expect(dictionary["Device"]?.objectPath == "/org/bluez/hci0/dev_X")
        #expect(dictionary["Connected"]?.bool == true)
        #expect(DBusValue.array(element: "y", [.byte(3), .byte(4)]).bytes == [3, 4])
        #expect(DBusValue.variant(.variant(.uint16(5))).int == 5)
        #expect(DBusValue.uint64(UInt64.max).int == nil)
    }
}
