#if canImport(Glibc)
import Glibc
#endif
import Foundation
import McuManager
import McuMgrDBus
import TestSupport
import Testing

/// An exported object for the tests: echoes its arguments, answers a few fixed methods, keeps
/// properties that peers may set.
final class TestObject: DBusExportedObject, @unchecked Sendable {
    static let interface = "org.example.Test1"
    private let lock = NSLock()
    private var properties: [String: DBusValue]
    private(set) var received: [[DBusValue]] = []
    /// Descriptors received by `Take`.
    private(set) var receivedDescriptors: [Int32] = []
    /// Our ends of the socket pairs handed out by `Open`.
    private(set) var openedEnds: [Int32] = []
    /// Lets a pending `Hold` call answer.
    let released = DispatchSemaphore(value: 0)
    private var holding = 0
    /// How many `Hold` calls have arrived.
    var holdsArrived: Int {
        lock.lock()
        defer { lock.unlock() }
        return holding
    }

    init(properties: [String: DBusValue] = ["Name": .string("test"), "Count": .uint32(7), "Writable": .boolean(false)]) {
        self.properties = properties
    }

    var interfaceProperties: [String: [String: DBusValue]] {
        lock.lock()
        defer { lock.unlock() }
        return [Self.interface: properties]
    }

    func handle(_ call: DBusMethodCall) throws -> [DBusValue] {
        guard call.interface == nil || call.interface == Self.interface else { throw DBusError.unknownMethod(call) }
        switch call.member {
        case "Echo":
            lock.lock()
            received.append(call.arguments)
            lock.unlock()
            return call.arguments
        case "Fail":
            throw DBusError(name: "org.example.Error.Custom", message: "asked to fail")
        case "Hold":
            // Answers only when the test lets it (or after 30 s), so a caller's timeout is the only
            // way its call can end first, however slow the machine.
            lock.lock()
            holding += 1
            lock.unlock()
            _ = released.wait(timeout: .now() + 30)
            return []
        case "Open":
            var fds: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                throw DBusError(name: DBusError.failed, message: "socketpair failed")
            }
            lock.lock()
            openedEnds.append(fds[0])
            lock.unlock()
            // libdbus duplicates the descriptor; ours can close after the reply is built.
            let theirs = DBusUnixFD(owning: fds[1])
            return [.unixFD(theirs), .uint16(247)]
        case "Take":
            try call.expectSignature("h")
            let fd = call.arguments[0].fileDescriptor!.take()
            lock.lock()
            receivedDescriptors.append(fd)
            lock.unlock()
            return []
        default:
            throw DBusError.unknownMethod(call)
        }
    }

    func setProperty(_ name: String, interface: String, value: DBusValue) throws {
        lock.lock()
        defer { lock.unlock() }
        guard name == "Writable" else {
            throw DBusError(name: DBusError.propertyReadOnly, message: "\(name) is read-only")
        }
        guard case .boolean = value else { throw DBusError(name: DBusError.invalidArgs, message: "Writable is a boolean") }
        properties[name] = value
    }
}

/// The D-Bus layer against a real dbus-daemon (a private one per suite, no BlueZ).
@Suite("D-Bus connection (private dbus-daemon)", .enabled(if: BLERig.isAvailable, BLERig.skipReason), .serialized)
final class DBusConnectionTests {
    let rig: BLERig

    init() throws {
        rig = try BLERig.start(bluez: false)
    }

    deinit { rig.stop() }

    /// A server connection with a TestObject at /org/example/obj and a client connection.
    func pair() async throws -> (server: DBusConnection, client: DBusConnection, object: TestObject) {
        let server = try await DBusConnection.connect(address: rig.address)
        let client = try await DBusConnection.connect(address: rig.address)
        let object = TestObject()
        try server.export(object, at: "/org/example/obj")
        return (server, client, object)
    }

    @Test func connectsAndTalksToTheBus() async throws {
        let connection = try await DBusConnection.connect(address: rig.address)
        defer { connection.close() }
        #expect(connection.uniqueName.hasPrefix(":"))
        #expect(connection.canPassFileDescriptors)
        let names = try await connection.call(
            destination: DBusConnection.busName, path: DBusConnection.busPath, interface: DBusConnection.busName,
            member: "ListNames")
        #expect(names.first?.strings?.contains(connection.uniqueName) == true)
        #expect(try await connection.requestName("org.example.Owner") == true)
        #expect(try await connection.nameOwner("org.example.Owner") == connection.uniqueName)
        #expect(try await connection.nameOwner("org.example.Nobody") == nil)
    }

    @Test func systemBusHonoursTheEnvironment() async throws {
        // DBUS_SYSTEM_BUS_ADDRESS is what `system()` reads; the rig's bus stands in for it.
        let saved = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"]
        setenv("DBUS_SYSTEM_BUS_ADDRESS", rig.address, 1)
        defer {
            if let saved { setenv("DBUS_SYSTEM_BUS_ADDRESS", saved, 1) } else { unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        }
        #expect(DBusConnection.systemBusAddress == rig.address)
        let connection = try await DBusConnection.system()
        defer { connection.close() }
        #expect(connection.address == rig.address)
    }

    @Test func everyTypeRoundTripsThroughAPeer() async throws {
        let (server, client, object) = try await pair()
        defer {
            server.close()
            client.close()
        }
        let nested: DBusValue = .dictionary(
            key: "o", value: "a{sa{sv}}",
            [
                DBusDictionaryEntry(
                    .objectPath("/org/bluez/hci0"),
                    .dictionary(
                        key: "s", value: "a{sv}",
                        [
                            DBusDictionaryEntry(
                                .string("org.bluez.Adapter1"),
                                .properties(["Powered": .boolean(true), "Address": .string("00:00:5E:00:53:00")])),
                            DBusDictionaryEntry(.string("org.freedesktop.DBus.Introspectable"), .properties([:])),
                        ])),
                DBusDictionaryEntry(.objectPath("/"), .dictionary(key: "s", value: "a{sv}", [])),
            ])
        let arguments: [DBusValue] = [
            .byte(0xA5), .boolean(true), .boolean(false), .int16(-12345), .uint16(65535), .int32(Int32.min),
            .uint32(UInt32.max), .int64(Int64.min), .uint64(UInt64.max), .double(-1.5e300), .string(""),
            .string("grüße ✓"), .objectPath("/org/example/a_b/c1"), .signature("a{sv}(ii)"), .bytes([]),
            .bytes(Array(0...255)), .array(element: "s", []), .strings(["a", "b", "c"]),
            .array(element: "(ib)", [.structure([.int32(1), .boolean(true)]), .structure([.int32(2), .boolean(false)])]),
            .properties([
                "UUIDs": .strings(["8d53dc1d-1db7-4cd3-868b-8a527460aa84"]), "RSSI": .int16(-42),
                "Value": .bytes([1, 2, 3]), "Nested": .variant(.variant(.string("deep"))),
                "Empty": .properties([:]),
            ]),
            nested, .structure([.string("x"), .array(element: "ay", [.bytes([9]), .bytes([])]), .variant(.uint16(3))]),
            .variant(.objectPath("/")), .array(element: "v", [.variant(.byte(1)), .variant(.string("two"))]),
            .dictionary(key: "q", value: "ay", [DBusDictionaryEntry(.uint16(0x0059), .bytes([0xDE, 0xAD]))]),
        ]
        let reply = try await client.call(
            destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Echo",
            arguments)
        #expect(reply == arguments)
        #expect(object.received.last == arguments)
        #expect(reply.map(\.signature).joined() == arguments.map(\.signature).joined())
    }

    @Test func propertiesGetGetAllAndSet() async throws {
        let (server, client, _) = try await pair()
        defer {
            server.close()
            client.close()
        }
        let destination = server.uniqueName
        #expect(
            try await client.property(destination: destination, path: "/org/example/obj", interface: TestObject.interface, name: "Count")
                == .uint32(7))
        let all = try await client.properties(destination: destination, path: "/org/example/obj", interface: TestObject.interface)
        #expect(all == ["Name": .string("test"), "Count": .uint32(7), "Writable": .boolean(false)])
        try await client.setProperty(
            destination: destination, path: "/org/example/obj", interface: TestObject.interface, name: "Writable",
            value: .boolean(true))
        #expect(
            try await client.property(destination: destination, path: "/org/example/obj", interface: TestObject.interface, name: "Writable")
                == .boolean(true))
        await #expect(throws: DBusError.self) {
            try await client.setProperty(
                destination: destination, path: "/org/example/obj", interface: TestObject.interface, name: "Count",
                value: .uint32(1))
        }
        do {
            _ = try await client.property(destination: destination, path: "/org/example/obj", interface: TestObject.interface, name: "Nope")
            Issue.record("an unknown property must fail")
        } catch let error as DBusError {
            #expect(error.name == DBusError.unknownProperty)
        }
        let xml = try await client.call(
            destination: destination, path: "/org/example", interface: DBusConnection.introspectableInterface,
            member: "Introspect")
        #expect(xml.first?.string?.contains("<node name=\"obj\"/>") == true)
    }

    @Test func objectManagerListsAndAnnouncesObjects() async throws {
        let (server, client, _) = try await pair()
        defer {
            server.close()
            client.close()
        }
        try server.exportObjectManager(at: "/org/example")
        try server.export(TestObject(properties: ["Name": .string("child")]), at: "/org/example/obj/child")
        let objects = try await client.managedObjects(destination: server.uniqueName, path: "/org/example")
        #expect(Set(objects.objects.keys) == ["/org/example/obj", "/org/example/obj/child"])
        #expect(objects.objects["/org/example/obj/child"]?[TestObject.interface]?["Name"] == .string("child"))

        let added = try await client.signals(.objectManager(sender: server.uniqueName, member: "InterfacesAdded"))
        let removed = try await client.signals(.objectManager(sender: server.uniqueName, member: "InterfacesRemoved"))
        try server.export(TestObject(properties: ["Name": .string("late")]), at: "/org/example/late")
        var iterator = added.makeAsyncIterator()
        let signal = await iterator.next()
        #expect(signal?.body.first == .objectPath("/org/example/late"))
        #expect(DBusManagedObjects(.dictionary(key: "o", value: "a{sa{sv}}", [DBusDictionaryEntry(signal!.body[0], signal!.body[1])]))
            .objects["/org/example/late"]?[TestObject.interface]?["Name"] == .string("late"))
        server.unexport("/org/example/late")
        var removedIterator = removed.makeAsyncIterator()
        let gone = await removedIterator.next()
        #expect(gone?.body == [.objectPath("/org/example/late"), .strings([TestObject.interface])])
    }

    @Test func signalsFollowTheirMatchRulesInOrder() async throws {
        let (server, client, _) = try await pair()
        defer {
            server.close()
            client.close()
        }
        let target: DBusObjectPath = "/org/example/obj"
        let stream = try await client.signals(
            .propertiesChanged(sender: server.uniqueName, path: target, interface: TestObject.interface))
        // Not for us: another interface, another path.
        try server.emitPropertiesChanged(path: target, interface: "org.example.Other1", changed: ["X": .int32(-1)])
        try server.emitPropertiesChanged(path: "/org/example/elsewhere", interface: TestObject.interface, changed: ["X": .int32(-2)])
        for index in 0..<200 {
            try server.emitPropertiesChanged(path: target, interface: TestObject.interface, changed: ["Value": .bytes([UInt8(index & 0xFF)])])
        }
        var seen: [Int] = []
        for await signal in stream {
            guard let changed = signal.body.dropFirst().first?.stringKeyedDictionary, let bytes = changed["Value"]?.bytes else {
                Issue.record("unexpected signal \(signal)")
                break
            }
            seen.append(Int(bytes[0]))
            if seen.count == 200 { break }
        }
        #expect(seen == (0..<200).map { $0 & 0xFF })
    }

    @Test func passesFileDescriptorsBothWays() async throws {
        let (server, client, object) = try await pair()
        defer {
            server.close()
            client.close()
        }
        // Server -> client: a socket the client writes into and the server reads from.
        let reply = try await client.call(
            destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Open")
        #expect(reply.count == 2)
        #expect(reply[1] == .uint16(247))
        let fd = try #require(reply[0].fileDescriptor).take()
        defer { close(fd) }
        let packet: [UInt8] = [1, 2, 3, 4, 5]
        #expect(write(fd, packet, packet.count) == packet.count)
        let serverEnd = try #require(object.openedEnds.last)
        defer { close(serverEnd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(serverEnd, &buffer, buffer.count)
        #expect(Array(buffer.prefix(max(0, count))) == packet)

        // Client -> server: a pipe whose write end travels as an argument.
        var pipeFDs: [Int32] = [-1, -1]
        #expect(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]) }
        _ = try await client.call(
            destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Take",
            [.unixFD(DBusUnixFD(borrowing: pipeFDs[1]))])
        close(pipeFDs[1])
        let received = try #require(object.receivedDescriptors.last)
        #expect(write(received, "hi", 2) == 2)
        close(received)
        var two = [UInt8](repeating: 0, count: 8)
        #expect(read(pipeFDs[0], &two, 8) == 2)
        #expect(Array(two.prefix(2)) == Array("hi".utf8))
    }

    @Test func errorsCarryTheirNamesAndMapToMcuMgrError() async throws {
        let (server, client, _) = try await pair()
        defer {
            server.close()
            client.close()
        }
        do {
            _ = try await client.call(
                destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Fail")
            Issue.record("Fail must throw")
        } catch let error as DBusError {
            #expect(error.name == "org.example.Error.Custom")
            #expect(error.message == "asked to fail")
        }
        do {
            _ = try await client.call(
                destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Missing")
            Issue.record("an unknown method must throw")
        } catch let error as DBusError {
            #expect(error.isUnknownMember)
        }
        do {
            _ = try await client.call(
                destination: server.uniqueName, path: "/nowhere", interface: TestObject.interface, member: "Echo")
            Issue.record("an unknown object must throw")
        } catch let error as DBusError {
            #expect(error.name == DBusError.unknownObject)
        }
        do {
            _ = try await client.call(destination: "org.bluez", path: "/", interface: "org.bluez.Adapter1", member: "StartDiscovery")
            Issue.record("a missing service must throw")
        } catch let error as DBusError {
            #expect(error.name == DBusError.serviceUnknown)
            let mapped = error.mcuMgrError("start scanning")
            #expect(mapped.kind == .transport)
            #expect(mapped.message.contains("bluetoothd"))
        }
        // Arguments libdbus would abort on are refused before it sees them.
        await #expect(throws: DBusError.self) {
            _ = try await client.call(
                destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Echo",
                [.array(element: "s", [.int32(1)])])
        }
        await #expect(throws: DBusError.self) {
            _ = try await client.call(destination: server.uniqueName, path: "/org/example/obj", interface: "no_dots", member: "Echo")
        }
        await #expect(throws: DBusError.self) {
            _ = try await client.call(destination: "not a name", path: "/", interface: TestObject.interface, member: "Echo")
        }
    }

    @Test func callsTimeOutWithoutBlockingOthers() async throws {
        let (server, client, object) = try await pair()
        defer {
            object.released.signal()
            server.close()
            client.close()
        }
        // The server holds its answer until after the check, so only the 200 ms timeout can end the call.
        do {
            _ = try await client.call(
                .methodCall(destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Hold"),
                timeout: .milliseconds(200))
            Issue.record("Hold must time out")
        } catch let error as DBusError {
            #expect(error.name == DBusError.noReply)
            #expect(error.mcuMgrError("hold").kind == .timeout)
        }
        // The client's own I/O thread was never blocked: the bus answers at once.
        let names = try await client.call(
            destination: DBusConnection.busName, path: DBusConnection.busPath, interface: DBusConnection.busName, member: "GetId")
        #expect(names.first?.string?.isEmpty == false)
    }

    @Test func manyConcurrentCallsGetTheirOwnAnswers() async throws {
        let (server, client, _) = try await pair()
        defer {
            server.close()
            client.close()
        }
        let destination = server.uniqueName
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<300 {
                group.addTask {
                    let reply = try await client.call(
                        destination: destination, path: "/org/example/obj", interface: TestObject.interface, member: "Echo",
                        [.uint32(UInt32(index)), .bytes([UInt8](repeating: UInt8(index & 0xFF), count: index))])
                    #expect(reply == [.uint32(UInt32(index)), .bytes([UInt8](repeating: UInt8(index & 0xFF), count: index))])
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func closingFailsWaitingCallsAndEndsStreams() async throws {
        let (server, client, object) = try await pair()
        defer {
            object.released.signal()
            server.close()
        }
        let stream = try await client.signals(.propertiesChanged(sender: server.uniqueName))
        let waiting = Task {
            try await client.call(
                .methodCall(destination: server.uniqueName, path: "/org/example/obj", interface: TestObject.interface, member: "Hold"),
                timeout: .seconds(60))
        }
        // Close while the call is known to wait at the server.
        #expect(await waitUntil { object.holdsArrived == 1 })
        client.close()
        do {
            _ = try await waiting.value
            Issue.record("the call must fail when the connection closes")
        } catch let error as DBusError {
            #expect(error.name == DBusError.disconnected)
        }
        for await _ in stream {}  // Ends.
        #expect(!client.isConnected)
        await #expect(throws: DBusError.self) {
            _ = try await client.call(destination: DBusConnection.busName, path: DBusConnection.busPath, interface: DBusConnection.busName, member: "GetId")
        }
    }

    @Test func reportsTheBusGoingAway() async throws {
        let ownRig = try BLERig.start(bluez: false)
        let connection = try await DBusConnection.connect(address: ownRig.address)
        let ended = LockedFlag()
        connection.onDisconnect { _ in ended.set() }
        ownRig.stop()
        let deadline = ContinuousClock.now + .seconds(5)
        while !ended.value, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(ended.value)
        #expect(!connection.isConnected)
    }

    @Test func connectingToNoBusSaysWhatToDo() async throws {
        do {
            _ = try await DBusConnection.connect(address: "unix:path=/nonexistent/bus")
            Issue.record("connecting to a missing bus must fail")
        } catch let error as McuMgrError {
            #expect(error.kind == .transport)
            #expect(error.message.contains("DBUS_SYSTEM_BUS_ADDRESS"))
        }
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() {
        lock.lock()
        flag = true
        lock.unlock()
    }
    var value: Bool {
        lock.lock()
        defer { lock.unlock() }
        return flag
    }
}
