import McuManager
import McuMgrSerial
import Testing

/// `tcp://HOST:PORT` and `rfc2217://HOST:PORT`: remote serial ports (ser2net), port required.
@Suite struct RemoteSerialURITests {
    @Test(arguments: [
        ("tcp://127.0.0.1:2000", McuMgrDeviceURI.Scheme.tcp, "127.0.0.1", 2000, "tcp://127.0.0.1:2000"),
        ("tcp:127.0.0.1:2000", .tcp, "127.0.0.1", 2000, "tcp://127.0.0.1:2000"),
        ("TCP://lab-pi.local:3001", .tcp, "lab-pi.local", 3001, "tcp://lab-pi.local:3001"),
        ("rfc2217://192.0.2.9:2001", .rfc2217, "192.0.2.9", 2001, "rfc2217://192.0.2.9:2001"),
        ("rfc2217:[2001:db8::9]:2001", .rfc2217, "2001:db8::9", 2001, "rfc2217://[2001:db8::9]:2001"),
        ("rfc2217://[::1]:65535", .rfc2217, "::1", 65535, "rfc2217://[::1]:65535"),
    ])
    func forms(text: String, scheme: McuMgrDeviceURI.Scheme, host: String, port: Int, canonical: String) throws {
        let uri = try McuMgrDeviceURI(parsing: text)
        #expect(uri.scheme == scheme)
        #expect(uri.target == host)
        #expect(uri.port == port)
        #expect(uri.description == canonical)
        #expect(try McuMgrDeviceURI(parsing: uri.description) == uri)
        #expect(scheme.isSerial)
    }

    @Test func optionsAreKept() throws {
        let uri = try McuMgrDeviceURI(parsing: "rfc2217://host:2001?baud=921600&flow=rtscts&framing=raw")
        #expect(try uri.intOption("baud") == 921_600)
        #expect(uri.option("flow") == "rtscts")
        #expect(uri.description == "rfc2217://host:2001?baud=921600&flow=rtscts&framing=raw")
    }

    @Test(arguments: [
        "tcp://127.0.0.1", "tcp:host", "rfc2217://host", "rfc2217://[::1]", "rfc2217://::1", "tcp://", "tcp://:2000",
        "tcp://host:0", "tcp://host:70000", "rfc2217://host:port", "rfc2217://[::1:2000",
    ])
    func invalidFormsAreUsageErrors(text: String) {
        do {
            _ = try McuMgrDeviceURI(parsing: text)
            Issue.record("\(text) should not parse")
        } catch let error as McuMgrError {
            #expect(error.kind == .usage)
            let message = error.message.lowercased()
            #expect(message.contains("tcp") || message.contains("rfc 2217") || message.contains("rfc2217"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func aMissingPortSaysSo() {
        #expect(throws: McuMgrError.self) { try McuMgrDeviceURI(parsing: "rfc2217://lab-pi") }
        do {
            _ = try McuMgrDeviceURI(parsing: "rfc2217://lab-pi")
        } catch let error as McuMgrError {
            #expect(error.message.contains("names no port"))
        } catch {}
    }

    @Test func transportNamesAndEndpoints() {
        let tcp = SerialTransport(configuration: .init(endpoint: .tcp(host: "::1", port: 2000)))
        #expect(tcp.name == "tcp://[::1]:2000")
        #expect(tcp.linkLimits.bitsPerSecond == nil, "a raw port server keeps its own speed")
        let rfc = SerialTransport(configuration: .init(endpoint: .rfc2217(host: "h", port: 7), baudRate: 9600))
        #expect(rfc.name == "rfc2217://h:7")
        #expect(rfc.linkLimits.bitsPerSecond == 9600)
        var local = SerialTransport.Configuration(path: "/dev/ttyACM0")
        #expect(local.endpoint == .device(path: "/dev/ttyACM0"))
        #expect(SerialTransport(configuration: local).name == "serial:/dev/ttyACM0")
        local.path = "/dev/ttyACM1"
        #expect(local.endpoint == .device(path: "/dev/ttyACM1"))
    }
}
