import Foundation
import McuManager
import Testing

@testable import McuMgrDiscovery

@Suite("Board table")
struct BoardTableTests {
    func usb(_ vendor: UInt16, _ product: UInt16, interface: Int? = 0, serial: String? = nil) -> USBSerialInfo {
        USBSerialInfo(vendorID: vendor, productID: product, serialNumber: serial, interfaceNumber: interface)
    }

    @Test func mostSpecificBuiltInRuleWins() {
        let table = BoardTable()
        #expect(table.match(usb(0x1915, 0x520f), driver: "cdc_acm")?.name == "Nordic USB CDC-ACM (nRF Connect SDK)")
        #expect(table.match(usb(0x1915, 0x1234), driver: "cdc_acm")?.name == "Nordic Semiconductor USB device")
        let vcom1 = table.match(usb(0x1366, 0x1051, interface: 2), driver: "cdc_acm")
        #expect(vcom1?.role?.hasPrefix("VCOM1") == true)
        #expect(vcom1?.kind == .debugProbe)
        #expect(vcom1?.followsResets == false)
        #expect(table.match(usb(0x0403, 0x6001), driver: "ftdi_sio")?.kind == .usbSerialAdapter)
        #expect(table.match(usb(0x1915, 0x521f), driver: "cdc_acm")?.smp == .unlikely)
    }

    @Test func unknownCDCACMIsAGenericBoardAndUnknownVendorSerialIsNothing() {
        let table = BoardTable()
        let generic = table.match(usb(0xabcd, 0x0001), driver: "cdc_acm")
        #expect(generic?.name == "USB CDC-ACM device")
        #expect(generic?.followsResets == true)
        #expect(table.match(usb(0xabcd, 0x0001), driver: "pl2303") == nil)
    }

    @Test func userRulesWinOverBuiltInOnes() throws {
        let json = #"{"boards": [{"usb": "1366", "name": "Rig probe", "kind": "debug-probe", "smp": "likely"}, {"usb": "1915:520f", "serial_prefix": "LAB", "name": "Lab gateway", "follows_resets": false}]}"#
        let rules = try BoardRulesFile.parse(Data(json.utf8), source: "test.json")
        let table = BoardTable(userRules: rules)
        let probe = table.match(usb(0x1366, 0x1051, interface: 0), driver: "cdc_acm")
        #expect(probe?.name == "Rig probe")
        #expect(probe?.fromUserRules == true)
        #expect(probe?.smp == .likely)
        #expect(table.match(usb(0x1915, 0x520f, serial: "LAB-7"), driver: "cdc_acm")?.name == "Lab gateway")
        #expect(table.match(usb(0x1915, 0x520f, serial: "LAB-7"), driver: "cdc_acm")?.followsResets == false)
        #expect(table.match(usb(0x1915, 0x520f, serial: "X"), driver: "cdc_acm")?.fromUserRules == false)
    }

    @Test(arguments: [
        (#"{"boards": [{"name": "x"}]}"#, "needs \"usb\""),
        (#"{"boards": [{"usb": "zz", "name": "x"}]}"#, "not VID or VID:PID"),
        (#"{"boards": [{"usb": "1915", "name": "x", "knd": "board"}]}"#, "unknown key \"knd\""),
        (#"{"boards": [{"usb": "1915", "name": "x", "smp": "maybe"}]}"#, "likely, possible, unlikely"),
        (#"{"boards": [{"usb": "1915", "name": "x", "interface": 300}]}"#, "0-255"),
        (#"[1]"#, "entry 1 is not an object"),
        ("not json", "not valid JSON"),
    ])
    func badRulesFilesSayWhatIsWrong(text: String, expected: String) {
        do {
            _ = try BoardRulesFile.parse(Data(text.utf8), source: "boards.json")
            Issue.record("accepted \(text)")
        } catch let error as McuMgrError {
            #expect(error.kind == .file)
            #expect(error.message.contains(expected), "\(error.message)")
            #expect(error.message.contains("boards.json"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func rulesFileLocation() throws {
        #expect(BoardRulesFile.defaultPath(environment: ["HOME": "/home/u"]).path == "/home/u/.config/smp/boards.json")
        #expect(BoardRulesFile.defaultPath(environment: ["XDG_CONFIG_HOME": "/cfg", "HOME": "/h"]).path == "/cfg/smp/boards.json")
        #expect(BoardRulesFile.defaultPath(environment: ["SMP_BOARDS": "/x.json"]) == ("/x.json", true))
        #expect(try BoardRulesFile.loadDefault(environment: ["XDG_CONFIG_HOME": "/nonexistent-smp-test"]).isEmpty)
        #expect(throws: McuMgrError.self) { try BoardRulesFile.loadDefault(environment: ["SMP_BOARDS": "/nonexistent-smp-test.json"]) }
    }
}
