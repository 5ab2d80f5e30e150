import McuManager
import Testing

@Suite struct McuMgrDeviceURITests {
    @Test func serialWithOptions() throws {
        let uri = try McuMgrDeviceURI(parsing: "serial:/dev/ttyACM0?baud=1000000&framing=raw&line=127")
        #expect(uri.scheme == .serial)
        #expect(uri.target == "/dev/ttyACM0")
        #expect(try uri.intOption("baud") == 1_000_000)
        #expect(uri.option("framing") == "raw")
        #expect(uri.description == "serial:/dev/ttyACM0?baud=1000000&framing=raw&line=127")
    }

    @Test func barePathIsSerial() throws {
        let uri = try McuMgrDeviceURI(parsing: "/dev/ttyUSB3")
        #expect(uri.scheme == .serial)
        #expect(uri.target == "/dev/ttyUSB3")
    }

    @Test(arguments: [
        ("udp:192.0.2.7:1337", "192.0.2.7", 1337),
        ("udp:192.0.2.7", "192.0.2.7", 1337),
        ("udp://192.0.2.7:9000", "192.0.2.7", 9000),
        ("udp:[::1]:1337", "::1", 1337),
        ("udp:[::1]", "::1", 1337),
        ("udp:[2001:db8::7]:42", "2001:db8::7", 42),
        ("udp:fe80::1", "fe80::1", 1337),
        ("UDP:localhost:5683", "localhost", 5683),
    ])
    func udpForms(text: String, host: String, port: Int) throws {
        let uri = try McuMgrDeviceURI(parsing: text)
        #expect(uri.scheme == .udp)
        #expect(uri.target == host)
        #expect(uri.port == port)
    }

    @Test func simAndBLE() throws {
        #expect(try McuMgrDeviceURI(parsing: "sim:").scheme == .sim)
        let sim = try McuMgrDeviceURI(parsing: "sim:?buf_size=512&v1")
        #expect(try sim.intOption("buf_size") == 512)
        #expect(try sim.boolOption("v1") == true)
        let ble = try McuMgrDeviceURI(parsing: "ble:AA:BB:CC:DD:EE:FF?adapter=hci1")
        #expect(ble.scheme == .ble)
        #expect(ble.target == "AA:BB:CC:DD:EE:FF")
        #expect(ble.option("adapter") == "hci1")
    }

    @Test(arguments: ["", "ttyACM0", "tcp:1.2.3.4", "udp:", "udp:1.2.3.4:0", "udp:1.2.3.4:99999", "udp:[::1", "serial:", "udp:host:abc"])
    func invalidURIsAreUsageErrorsThatShowValidForms(text: String) {
        do {
            _ = try McuMgrDeviceURI(parsing: text)
            Issue.record("\(text) should not parse")
        } catch let error as McuMgrError {
            #expect(error.kind == .usage)
            #expect(!error.message.isEmpty)
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func badOptionValues() throws {
        let uri = try McuMgrDeviceURI(parsing: "serial:/dev/x?baud=fast&flow=maybe")
        #expect(throws: McuMgrError.self) { try uri.intOption("baud") }
        #expect(throws: McuMgrError.self) { try uri.boolOption("flow") }
    }
}
