import Foundation
import McuManager
import McuMgrBLE
import McuMgrCore
import McuMgrDBus
import McuMgrSimulator
import TestSupport
import Testing

/// McuMgrBleTransport against SMPGattPeripheral through bluezoo (a fresh private bus and bluezoo per
/// test: bluezoo keeps stale device and GATT objects).
@Suite("BLE transport through BlueZ (bluezoo)", .enabled(if: BLERig.isAvailable, BLERig.skipReason), .serialized)
struct BLETransportTests {
    struct Link: Sendable, CustomTestStringConvertible {
        var attMTU: Int
        var acquire: Bool
        var testDescription: String { "ATT MTU \(attMTU), \(acquire ? "AcquireWrite/AcquireNotify sockets" : "WriteValue + PropertiesChanged")" }
    }

    static let links = [
        Link(attMTU: 23, acquire: false), Link(attMTU: 185, acquire: true), Link(attMTU: 247, acquire: false),
        Link(attMTU: 498, acquire: true),
    ]

    @Test(arguments: links)
    func echoImageListAndFileRoundTrip(_ link: Link) async throws {
        try await BLEHarness.with(attMTU: link.attMTU, acquire: link.acquire) { harness in
            let transport = try harness.transport()
            let client = McuMgrClient(transport: transport)
            let os = DefaultManager(client: client)
            #expect(try await os.echo("hello over BLE") == "hello over BLE")
            #expect(transport.attMTU == link.attMTU)
            #expect(transport.mtu == link.attMTU - 3)
            #expect(transport.deviceAddress == BluetoothAddress(BLERig.peripheralAddress))
            // A long echo spans many notifications at small MTUs.
            let long = String(repeating: "0123456789abcdef", count: 64)
            #expect(try await os.echo(long) == long)
            let images = try await ImageManager(client: client).list().images
            #expect(images.contains { $0.active && $0.confirmed })

            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ble-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let bytes = Data((0..<(link.attMTU == 23 ? 8192 : 65536)).map { _ in UInt8.random(in: 0...255) })
            let local = directory.appendingPathComponent("up.bin")
            try bytes.write(to: local)
            let fs = FileSystemManager(client: client)
            _ = try await fs.upload(local, to: "/lfs1/ble.bin")
            #expect(harness.device.file("/lfs1/ble.bin") == Array(bytes))
            let back = directory.appendingPathComponent("down.bin")
            _ = try await fs.download("/lfs1/ble.bin", to: back)
            #expect(try Data(contentsOf: back) == bytes)
            await client.close()
        }
    }

    @Test func withoutDeviceReassemblyEveryRequestFitsOneWrite() async throws {
        try await BLEHarness.with(attMTU: 185) { harness in
            let transport = try harness.transport("reassembly=off")
            let client = McuMgrClient(transport: transport)
            let os = DefaultManager(client: client)
            #expect(try await os.echo("short") == "short")
            #expect(transport.linkLimits.refined(deviceBufferSize: 2048).packetSize == 182)
            // Refused before it is sent, and only this request: the link stays up.
            await expectMcuMgrError(.usage, containing: ["414-byte request does not fit one 182-byte Bluetooth write", "reassembly=off"]) {
                _ = try await os.echo(String(repeating: "y", count: 400))
            }
            // Uploads size their chunks to one write.
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ble-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let bytes = Data((0..<6000).map { UInt8(truncatingIfNeeded: $0 * 7) })
            let local = directory.appendingPathComponent("up.bin")
            try bytes.write(to: local)
            _ = try await FileSystemManager(client: client).upload(local, to: "/lfs1/small.bin")
            #expect(harness.device.file("/lfs1/small.bin") == Array(bytes))
            await client.close()
        }
    }

    @Test func pipelinedRequestsAllGetTheirAnswers() async throws {
        try await BLEHarness.with(attMTU: 185) { harness in
            let client = McuMgrClient(
                transport: try harness.transport(), configuration: .init(session: SMPSessionConfiguration(window: 4)))
            let os = DefaultManager(client: client)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let text = "request \(index) " + String(repeating: "x", count: index * 7)
                        let reply = try await os.echo(text)
                        #expect(reply == text)
                    }
                }
                try await group.waitForAll()
            }
            await client.close()
        }
    }

    @Test func connectsByAdvertisedNameAndScansForTheSMPService() async throws {
        try await BLEHarness.with { harness in
            var configuration = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:name=smp-sim?adapter=hci0"))
            configuration.busAddress = harness.rig.address
            let client = McuMgrClient(transport: McuMgrBleTransport(configuration: configuration))
            #expect(try await DefaultManager(client: client).echo("by name") == "by name")
            await client.close()

            let bluez = try await BlueZClient.connect(busAddress: harness.rig.address)
            defer { bluez.connection.close() }
            let objects = try await bluez.objects()
            let adapter = try bluez.adapter(named: "hci0", in: objects)
            let seen = try await BLEScanner(client: bluez, adapter: adapter)
                .scan(serviceUUIDs: [SMPGattUUID.service], timeout: .seconds(2), known: objects)
            let sim = try #require(seen.first { $0.address == BluetoothAddress(BLERig.peripheralAddress) })
            #expect(sim.name == "smp-sim")
            #expect(sim.advertisesSMP)
            #expect(sim.rssi != nil)
        }
    }

    @Test(arguments: [true, false])
    func reconnectsAfterTheDeviceResets(acquire: Bool) async throws {
        try await BLEHarness.with(acquire: acquire) { harness in
            let client = McuMgrClient(transport: try harness.transport(), configuration: .init(timeout: .seconds(5)))
            let os = DefaultManager(client: client)
            #expect(try await os.echo("before") == "before")
            try await os.reset()
            // The device reboots 250 ms after answering and is back 50 ms later (later under load).
            try await harness.waitUntilRebooted()
            #expect(try await os.echo("after") == "after")
            #expect(harness.device.resetCount == 1)
            await client.close()
        }
    }

    @Test func linkLossFailsEveryRequestInFlightAtOnce() async throws {
        // The device never answers echoes of "hold": they stay in flight until the link drops.
        let hold = Array("hold".utf8)
        try await BLEHarness.with(drop: { request in
            request.count >= hold.count && (0...(request.count - hold.count)).contains { Array(request[$0..<($0 + hold.count)]) == hold }
        }) { harness in
            let client = McuMgrClient(
                transport: try harness.transport(),
                configuration: .init(timeout: .seconds(30), session: SMPSessionConfiguration(window: 4)))
            let os = DefaultManager(client: client)
            #expect(try await os.echo("warm up") == "warm up")
            let started = ContinuousClock.now
            let results = try await withThrowingTaskGroup(of: McuMgrError?.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        do {
                            _ = try await os.echo("hold \(index)")
                            return nil
                        } catch let error as McuMgrError {
                            return error
                        }
                    }
                }
                group.addTask {
                    // Once the device has taken all three, they are in flight: the device drops the link.
                    await waitUntil { harness.ignoredRequests >= 3 }
                    await harness.peripheral.suspend()
                    return nil
                }
                var errors: [McuMgrError] = []
                for try await result in group { if let result { errors.append(result) } }
                return errors
            }
            #expect(results.count == 3)
            for error in results {
                #expect(error.kind == .transport)
                #expect(error.message.contains("lost"), "\(error.message)")
            }
            // Well inside the 30 s request timeout (a loaded machine stalls for seconds): they failed with the link.
            #expect(ContinuousClock.now - started < .seconds(20), "the requests must fail with the link, not time out")
            await client.close()
        }
    }

    @Test func unknownDeviceListsWhatWasSeen() async throws {
        try await BLEHarness.with { harness in
            var configuration = try McuMgrBleTransport.Configuration(
                uri: McuMgrDeviceURI(parsing: "ble:00:00:5E:00:53:99?timeout=1.5"))
            configuration.busAddress = harness.rig.address
            let transport = McuMgrBleTransport(configuration: configuration)
            await expectMcuMgrError(.transport, containing: ["00:00:5E:00:53:99", "seen:", "smp-sim", BLERig.peripheralAddress]) {
                try await transport.open { _ in }
            }
        }
    }

    @Test func missingAdapterAndPoweredOffAdapterSayWhatToDo() async throws {
        try await BLEHarness.with { harness in
            let missing = try harness.transport("adapter=hci7")
            await expectMcuMgrError(.transport, containing: ["no Bluetooth adapter hci7", "hci0", "hci1"]) {
                try await missing.open { _ in }
            }
            let bus = try await DBusConnection.connect(address: harness.rig.address)
            defer { bus.close() }
            try await bus.setProperty(
                destination: BlueZ.service, path: "/org/bluez/hci0", interface: BlueZ.adapterInterface, name: "Powered",
                value: .boolean(false))
            let off = try harness.transport("adapter=hci0")
            await expectMcuMgrError(.transport, containing: ["powered off", "bluetoothctl power on"]) {
                try await off.open { _ in }
            }
        }
    }

    @Test func noBlueZOnTheBus() async throws {
        try await BLERig.with(bluez: false) { rig in
            var configuration = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:00:00:5E:00:53:01"))
            configuration.busAddress = rig.address
            await expectMcuMgrError(.transport, containing: ["BlueZ (org.bluez) is not on the system bus"]) {
                try await McuMgrBleTransport(configuration: configuration).open { _ in }
            }
        }
    }

    @Test func deviceWithoutTheSMPService() async throws {
        try await BLERig.with { rig in
            // A peripheral with only a heart-rate service.
            let bus = try await DBusConnection.connect(address: rig.address)
            defer { bus.close() }
            let app: DBusObjectPath = "/org/example/hrm"
            try bus.exportObjectManager(at: app)
            try bus.export(
                StaticObject([BlueZ.gattServiceInterface: ["UUID": .string("0000180d-0000-1000-8000-00805f9b34fb"), "Primary": .boolean(true)]]),
                at: app.appending("service0"))
            try bus.export(
                StaticObject([
                    BlueZ.gattCharacteristicInterface: [
                        "UUID": .string("00002a37-0000-1000-8000-00805f9b34fb"), "Service": .objectPath(app.appending("service0")),
                        "Flags": .strings(["notify"]),
                    ]
                ]), at: app.appending("service0").appending("char0"))
            try bus.export(
                StaticObject([
                    BlueZ.advertisementInterface: [
                        "Type": .string("peripheral"), "LocalName": .string("heart"), "Discoverable": .boolean(true),
                        "ServiceUUIDs": .strings(["0000180d-0000-1000-8000-00805f9b34fb"]),
                    ]
                ]), at: app.appending("advertisement0"))
            _ = try await bus.call(
                destination: BlueZ.service, path: "/org/bluez/hci1", interface: BlueZ.gattManagerInterface,
                member: "RegisterApplication", [.objectPath(app), .properties([:])])
            _ = try await bus.call(
                destination: BlueZ.service, path: "/org/bluez/hci1", interface: BlueZ.advertisingManagerInterface,
                member: "RegisterAdvertisement", [.objectPath(app.appending("advertisement0")), .properties([:])])
            var configuration = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:name=heart?timeout=3"))
            configuration.busAddress = rig.address
            await expectMcuMgrError(.transport, containing: ["has no SMP service", "0000180d-0000-1000-8000-00805f9b34fb", "CONFIG_MCUMGR_TRANSPORT_BT"]) {
                try await McuMgrBleTransport(configuration: configuration).open { _ in }
            }
        }
    }
}

/// An exported object with fixed properties.
final class StaticObject: DBusExportedObject {
    let interfaceProperties: [String: [String: DBusValue]]
    init(_ properties: [String: [String: DBusValue]]) { interfaceProperties = properties }
    func handle(_ call: DBusMethodCall) throws -> [DBusValue] {
        if call.member == "Release" || call.member == "StartNotify" || call.member == "StopNotify" { return [] }
        throw DBusError.unknownMethod(call)
    }
}

/// `ble:` URIs and their options (no bus needed).
@Suite("BLE device URIs")
struct BLEConfigurationTests {
    @Test func addressesAndNames() throws {
        let byAddress = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:aa-bb-cc-dd-ee-0f?adapter=hci1&timeout=2.5&mtu=247&reassembly=off&acquire=no"))
        #expect(byAddress.target == .address(BluetoothAddress("AA:BB:CC:DD:EE:0F")!))
        #expect(byAddress.adapter == "hci1")
        #expect(byAddress.scanTimeout == .milliseconds(2500))
        #expect(byAddress.attMTU == 247)
        #expect(!byAddress.deviceReassembly)
        #expect(!byAddress.acquire)
        #expect(byAddress.uri.description == "ble:AA:BB:CC:DD:EE:0F?adapter=hci1&timeout=2.5&mtu=247&reassembly=off&acquire=off")
        let roundTrip = try McuMgrBleTransport.Configuration(uri: byAddress.uri)
        #expect(roundTrip == byAddress)

        let byName = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:name=My%20Board%3F"))
        #expect(byName.target == .name("My Board?"))
        #expect(try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble://name=plain")).target == .name("plain"))
        #expect(BluetoothAddress("00:00:5e:00:53:01")?.pathElement == "dev_00_00_5E_00_53_01")
        #expect(BluetoothAddress("00:00:5E:00:53") == nil)
        #expect(BluetoothAddress("00:00:5E:00:53:0G") == nil)
    }

    @Test func badURIsAreUsageErrors() throws {
        for text in [
            "ble:not-an-address", "ble:name=", "ble:AA:BB:CC:DD:EE:FF?bogus=1", "ble:AA:BB:CC:DD:EE:FF?timeout=0",
            "ble:AA:BB:CC:DD:EE:FF?mtu=5", "ble:AA:BB:CC:DD:EE:FF?acquire=maybe", "ble:AA:BB:CC:DD:EE:FF?adapter=",
        ] {
            #expect(throws: McuMgrError.self, "\(text)") {
                _ = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: text))
            }
            do {
                _ = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: text))
            } catch let error as McuMgrError {
                #expect(error.kind == .usage, "\(text): \(error.message)")
            }
        }
    }

    @Test func packetSizesFollowReassembly() throws {
        let with = McuMgrBleTransport(configuration: .init(target: .name("x"), attMTU: 247))
        #expect(with.mtu == 244)
        #expect(with.linkLimits.refined(deviceBufferSize: 2048).packetSize == 2048)
        let without = McuMgrBleTransport(configuration: .init(target: .name("x"), attMTU: 247, deviceReassembly: false))
        #expect(without.linkLimits.refined(deviceBufferSize: 2048).packetSize == 244)
        #expect(without.linkLimits.session.retransmitInterval == nil)
        #expect(without.linkLimits.refined(deviceBufferCount: 4).window == 3)
    }
}
