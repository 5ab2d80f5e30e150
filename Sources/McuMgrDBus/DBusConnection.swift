#if canImport(Glibc)
import Glibc
#endif
import CDBus
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuManager

/// A private connection to a D-Bus bus, driven by its own I/O thread.
///
/// Only the I/O thread touches libdbus's connection: callers hand it work through a queue and a
/// wake-up pipe, and `async` calls resume when the reply arrives, so no caller ever blocks on the bus.
/// Signals go to subscribers and method calls to exported objects on the I/O thread, in the order
/// the bus delivered them. `close()` ends the thread; every call still waiting fails then.
public final class DBusConnection: @unchecked Sendable {
    public static let busName = "org.freedesktop.DBus"
    public static let busPath: DBusObjectPath = "/org/freedesktop/DBus"
    public static let propertiesInterface = "org.freedesktop.DBus.Properties"
    public static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    public static let introspectableInterface = "org.freedesktop.DBus.Introspectable"
    public static let peerInterface = "org.freedesktop.DBus.Peer"

    /// Where the system bus is: `$DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket.
    public static var systemBusAddress: String {
        if let address = ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"], !address.isEmpty {
            return address
        }
        return "unix:path=/var/run/dbus/system_bus_socket"
    }

    /// The bus address this connection uses.
    public let address: String
    /// This connection's unique name on the bus (`:1.42`).
    public let uniqueName: String
    /// Whether the bus lets this connection pass file descriptors.
    public let canPassFileDescriptors: Bool

    private let raw: OpaquePointer
    private let logger: Logger
    /// Wakes the I/O thread from its poll when work is queued.
    private let wakePipe: WakePipe

    // Guarded by `lock`.
    private let lock = NIOLock()
    private var commands: [@Sendable () -> Void] = []
    private var closeReason: DBusError?
    private var disconnectHandlers: [@Sendable (DBusError) -> Void] = []

    // Touched only on the I/O thread.
    private var pending: [UInt32: PendingCall] = [:]
    private var subscriptions: [UInt64: Subscription] = [:]
    private var objects: [DBusObjectPath: any DBusExportedObject] = [:]
    private var managers: Set<DBusObjectPath> = []
    private var stopping = false

    private let nextSubscriptionID = LockedCounter()
    private let clock = ContinuousClock()

    private struct PendingCall {
        var deadline: ContinuousClock.Instant
        var description: String
        var complete: @Sendable (Result<DBusMessage, DBusError>) -> Void
    }

    private struct Subscription {
        var rule: DBusMatchRule
        var senderOwner: String?
        var handler: @Sendable (DBusMessage) -> Void
        var onEnd: (@Sendable () -> Void)?
    }

    /// A libdbus message pointer handed to the I/O thread.
    private struct RawMessage: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    // MARK: Opening and closing

    /// Connects to the system bus (`DBUS_SYSTEM_BUS_ADDRESS` is honoured, as BlueZ clients expect).
    /// - Throws: `McuMgrError` of kind `.transport` saying how to fix the bus.
    public static func system(logger: Logger = DBusConnection.silentLogger) async throws -> DBusConnection {
        try await connect(address: systemBusAddress, logger: logger)
    }

    /// Connects to the bus at `address` (e.g. `unix:path=/run/dbus/system_bus_socket`) and registers.
    /// - Throws: `McuMgrError` of kind `.transport` saying how to fix the bus.
    public static func connect(address: String, logger: Logger = DBusConnection.silentLogger) async throws -> DBusConnection {
        try LibDBus.load()
        dbusThreadsInit
        // Connecting and the Hello exchange block, so they run on a thread of their own.
        let opened: Result<(RawMessage, String), McuMgrError> = await withCheckedContinuation { continuation in
            startDetachedThread {
                continuation.resume(returning: openBlocking(address))
            }
        }
        let (connection, name) = try opened.get()
        return try DBusConnection(raw: connection.pointer, address: address, uniqueName: name, logger: logger)
    }

    private static func openBlocking(_ address: String) -> Result<(RawMessage, String), McuMgrError> {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        func failure(_ what: String) -> McuMgrError {
            let detail = dbus_error_is_set(&error) != 0 ? String(cString: error.message) : "unknown error"
            return McuMgrError(
                .transport,
                "cannot \(what) the D-Bus bus at \(address): \(detail); check that the bus daemon runs (for BlueZ: `systemctl status dbus bluetooth`) or point DBUS_SYSTEM_BUS_ADDRESS at the right bus"
            )
        }
        guard let connection = dbus_connection_open_private(address, &error) else {
            return .failure(failure("connect to"))
        }
        dbus_connection_set_exit_on_disconnect(connection, 0)
        guard dbus_bus_register(connection, &error) != 0, let name = dbus_bus_get_unique_name(connection) else {
            dbus_connection_close(connection)
            dbus_connection_unref(connection)
            return .failure(failure("register on"))
        }
        return .success((RawMessage(pointer: connection), String(cString: name)))
    }

    private init(raw: OpaquePointer, address: String, uniqueName: String, logger: Logger) throws {
        do throws(SystemCallError) {
            wakePipe = try WakePipe()
        } catch {
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            throw McuMgrError(.transport, "cannot create a pipe for the D-Bus I/O thread: \(error)")
        }
        self.raw = raw
        self.address = address
        self.uniqueName = uniqueName
        self.logger = logger
        self.canPassFileDescriptors = dbus_connection_can_send_type(raw, CDBUS_TYPE_UNIX_FD) != 0
        startDetachedThread(name: "dbus \(uniqueName)") { [self] in self.runLoop() }
    }

    /// The wake-up pipe closes only here, not when the connection ends: `enqueue` writes to it after
    /// releasing the lock, and a pipe closed at the end could by then be another file's descriptor.
    deinit {
        wakePipe.close()
    }

    /// A logger that drops everything (the default).
    public static let silentLogger = Logger(label: "mcumgr.dbus", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Closes the connection: calls still waiting fail with `Disconnected`, signal streams end.
    /// Idempotent.
    public func close() {
        _ = enqueue { [self] in self.stopping = true }
    }

    /// Whether the connection is still usable.
    public var isConnected: Bool {
        lock.lock()
        defer { lock.unlock() }
        return closeReason == nil
    }

    /// Called once (on the I/O thread) when the connection ends, by `close()` or because the bus went
    /// away; at once if it already has.
    public func onDisconnect(_ handler: @escaping @Sendable (DBusError) -> Void) {
        lock.lock()
        if let reason = closeReason {
            lock.unlock()
            handler(reason)
            return
        }
        disconnectHandlers.append(handler)
        lock.unlock()
    }

    // MARK: Calls

    /// Sends a method call and waits for its reply.
    /// - Returns: the reply (a method return).
    /// - Throws: `DBusError`: the peer's error reply, `NoReply` after `timeout`, `Disconnected` when
    ///   the connection ends first, `InvalidArgs` for arguments libdbus would refuse.
    public func call(_ message: DBusMessage, timeout: Duration = .seconds(25)) async throws -> DBusMessage {
        let result: Result<DBusMessage, DBusError> = await withCheckedContinuation { continuation in
            call(message, timeout: timeout) { continuation.resume(returning: $0) }
        }
        let reply = try result.get()
        if reply.kind == .error {
            throw DBusError(name: reply.errorName ?? DBusError.failed, message: reply.body.first?.string ?? "")
        }
        return reply
    }

    /// Sends a method call now (calls made one after another from one thread reach the bus in that
    /// order) and hands its reply or error to `completion` on the I/O thread. An error reply arrives as
    /// a message of kind `.error`; local failures (invalid arguments, timeout, closed connection) as
    /// `.failure`.
    public func call(
        _ message: DBusMessage, timeout: Duration = .seconds(25),
        completion: @escaping @Sendable (Result<DBusMessage, DBusError>) -> Void
    ) {
        precondition(message.kind == .methodCall, "call(_:) sends method calls")
        if message.body.contains(where: { $0.containsFileDescriptor }), !canPassFileDescriptors {
            completion(.failure(DBusError(name: DBusError.notSupported, message: "this bus connection cannot pass file descriptors")))
            return
        }
        let raw: RawMessage
        do {
            raw = RawMessage(pointer: try DBusMarshal.makeRaw(message))
        } catch let error as DBusError {
            completion(.failure(error))
            return
        } catch {
            completion(.failure(DBusError(name: DBusError.failed, message: "\(error)")))
            return
        }
        let description = "\(message.interface ?? "").\(message.member ?? "") on \(message.path?.rawValue ?? "?")"
        let deadline = clock.now.advanced(by: timeout)
        let accepted = enqueue { [self] in
            var serial: UInt32 = 0
            let sent = dbus_connection_send(self.raw, raw.pointer, &serial) != 0
            dbus_message_unref(raw.pointer)
            guard sent else {
                completion(.failure(DBusError(name: DBusError.failed, message: "libdbus could not queue \(description)")))
                return
            }
            self.pending[serial] = PendingCall(deadline: deadline, description: description, complete: completion)
        }
        if !accepted {
            dbus_message_unref(raw.pointer)
            completion(.failure(closedError))
        }
    }

    /// Calls `interface.member` on `path` of `destination` and returns the reply's arguments.
    public func call(
        destination: String, path: DBusObjectPath, interface: String, member: String, _ arguments: [DBusValue] = [],
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        try await call(
            .methodCall(destination: destination, path: path, interface: interface, member: member, body: arguments),
            timeout: timeout
        ).body
    }

    /// Sends a message without waiting for anything (signals, or calls that want no reply).
    /// - Throws: `DBusError` for invalid arguments or a closed connection.
    public func send(_ message: DBusMessage) throws {
        var message = message
        if message.kind == .methodCall { message.noReplyExpected = true }
        let raw = RawMessage(pointer: try DBusMarshal.makeRaw(message))
        let accepted = enqueue { [self] in
            if dbus_connection_send(self.raw, raw.pointer, nil) == 0 { self.logger.warning("libdbus could not queue a message (out of memory)") }
            dbus_message_unref(raw.pointer)
        }
        if !accepted {
            dbus_message_unref(raw.pointer)
            throw closedError
        }
    }

    /// Emits a signal from one of this connection's objects.
    public func emitSignal(
        path: DBusObjectPath, interface: String, member: String, _ arguments: [DBusValue] = [], destination: String? = nil
    ) throws {
        try send(.signal(path: path, interface: interface, member: member, body: arguments, destination: destination))
    }

    // MARK: Properties and object managers

    /// `Properties.Get`.
    public func property(destination: String, path: DBusObjectPath, interface: String, name: String) async throws -> DBusValue {
        let reply = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, member: "Get",
            [.string(interface), .string(name)])
        guard let value = reply.first else {
            throw DBusError(name: DBusError.invalidArgs, message: "Get \(interface).\(name) on \(path) returned nothing")
        }
        return value.unwrapped
    }

    /// `Properties.GetAll`, variants removed.
    public func properties(destination: String, path: DBusObjectPath, interface: String) async throws -> [String: DBusValue] {
        let reply = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, member: "GetAll", [.string(interface)])
        return reply.first?.stringKeyedDictionary ?? [:]
    }

    /// `Properties.Set`.
    public func setProperty(
        destination: String, path: DBusObjectPath, interface: String, name: String, value: DBusValue
    ) async throws {
        _ = try await call(
            destination: destination, path: path, interface: Self.propertiesInterface, member: "Set",
            [.string(interface), .string(name), .variant(value)])
    }

    /// `ObjectManager.GetManagedObjects`: every object with its interfaces and their properties.
    public func managedObjects(destination: String, path: DBusObjectPath = .root) async throws -> DBusManagedObjects {
        let reply = try await call(
            destination: destination, path: path, interface: Self.objectManagerInterface, member: "GetManagedObjects")
        return DBusManagedObjects(reply.first ?? .dictionary(key: "o", value: "a{sa{sv}}", []))
    }

    /// `RequestName` with DO_NOT_QUEUE: true when this connection now owns `name`.
    public func requestName(_ name: String) async throws -> Bool {
        let reply = try await call(
            destination: Self.busName, path: Self.busPath, interface: Self.busName, member: "RequestName",
            [.string(name), .uint32(UInt32(CDBUS_NAME_FLAG_DO_NOT_QUEUE))])
        return reply.first?.int == Int(CDBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER)
    }

    /// The unique name owning `name`, nil when nobody does.
    public func nameOwner(_ name: String) async throws -> String? {
        do {
            return try await call(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, member: "GetNameOwner",
                [.string(name)]
            ).first?.string
        } catch let error as DBusError where error.name == DBusError.nameHasNoOwner {
            return nil
        }
    }

    // MARK: Signals

    /// Delivers signals matching `rule` to `handler` (on the I/O thread, in order) until the returned
    /// subscription is cancelled or the connection closes. Signals are delivered from the moment this
    /// returns.
    public func subscribe(
        _ rule: DBusMatchRule, onEnd: (@Sendable () -> Void)? = nil, _ handler: @escaping @Sendable (DBusMessage) -> Void
    ) async throws -> DBusSubscription {
        var owner: String?
        if let sender = rule.sender, !sender.hasPrefix(":") {
            owner = try await nameOwner(sender)
        }
        let id = nextSubscriptionID.next()
        let subscription = Subscription(rule: rule, senderOwner: owner, handler: handler, onEnd: onEnd)
        let resolvedOwner = owner
        guard enqueue({ [self] in self.subscriptions[id] = subscription }) else { throw closedError }
        do {
            _ = try await call(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, member: "AddMatch",
                [.string(rule.description)])
        } catch {
            _ = enqueue { [self] in self.subscriptions[id] = nil }
            throw error
        }
        _ = resolvedOwner
        return DBusSubscription(connection: self, id: id, rule: rule)
    }

    /// Signals matching `rule` as an async sequence; cancelling the consuming task or dropping the
    /// sequence removes the match.
    public func signals(_ rule: DBusMatchRule) async throws -> AsyncStream<DBusMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusMessage.self)
        let subscription = try await subscribe(rule, onEnd: { continuation.finish() }) { continuation.yield($0) }
        continuation.onTermination = { _ in subscription.cancel() }
        return stream
    }

    func unsubscribe(_ id: UInt64, rule: DBusMatchRule) {
        let removed = enqueue { [self] in
            if let subscription = self.subscriptions.removeValue(forKey: id) {
                subscription.onEnd?()
            }
        }
        guard removed else { return }
        try? send(
            .methodCall(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, member: "RemoveMatch",
                body: [.string(rule.description)]))
    }

    // MARK: Exporting objects

    /// Serves `object` at `path`. An object manager above `path` announces it (InterfacesAdded).
    public func export(_ object: any DBusExportedObject, at path: DBusObjectPath) throws {
        guard enqueue({ [self] in
            self.objects[path] = object
            for manager in self.managers where path != manager && path.isDescendant(of: manager) {
                let interfaces = Self.interfacesValue(object.interfaceProperties)
                self.sendNow(
                    .signal(
                        path: manager, interface: Self.objectManagerInterface, member: "InterfacesAdded",
                        body: [.objectPath(path), interfaces]))
            }
        }) else { throw closedError }
    }

    /// Stops serving the object at `path`; an object manager above it announces InterfacesRemoved.
    public func unexport(_ path: DBusObjectPath) {
        _ = enqueue { [self] in
            guard let object = self.objects.removeValue(forKey: path) else { return }
            for manager in self.managers where path != manager && path.isDescendant(of: manager) {
                let names = object.interfaceProperties.keys.sorted()
                self.sendNow(
                    .signal(
                        path: manager, interface: Self.objectManagerInterface, member: "InterfacesRemoved",
                        body: [.objectPath(path), .strings(names)]))
            }
        }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for the objects below it.
    public func exportObjectManager(at path: DBusObjectPath) throws {
        guard enqueue({ [self] in self.managers.insert(path) }) else { throw closedError }
    }

    /// Stops serving the object manager at `path`.
    public func unexportObjectManager(at path: DBusObjectPath) {
        _ = enqueue { [self] in _ = self.managers.remove(path) }
    }

    /// Emits `PropertiesChanged` for `interface` of the object at `path`.
    public func emitPropertiesChanged(
        path: DBusObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String] = []
    ) throws {
        try emitSignal(
            path: path, interface: Self.propertiesInterface, member: "PropertiesChanged",
            [.string(interface), .properties(changed), .strings(invalidated)])
    }

    static func interfacesValue(_ interfaces: [String: [String: DBusValue]]) -> DBusValue {
        .dictionary(
            key: "s", value: "a{sv}",
            interfaces.sorted { $0.key < $1.key }.map { DBusDictionaryEntry(.string($0.key), .properties($0.value)) })
    }

    // MARK: The I/O thread

    private var closedError: DBusError {
        lock.lock()
        defer { lock.unlock() }
        return closeReason ?? DBusError(name: DBusError.disconnected, message: "the D-Bus connection is closed")
    }

    /// Queues work for the I/O thread; false when the connection has ended.
    @discardableResult
    private func enqueue(_ command: @escaping @Sendable () -> Void) -> Bool {
        lock.lock()
        guard closeReason == nil else {
            lock.unlock()
            return false
        }
        commands.append(command)
        lock.unlock()
        wakePipe.wake()
        return true
    }

    private func runLoop() {
        var fd: Int32 = -1
        _ = dbus_connection_get_unix_fd(raw, &fd)  // A socket connection always has one.
        var reason = DBusError(name: DBusError.disconnected, message: "the connection was closed")
        loop: while true {
            lock.lock()
            let batch = commands
            commands.removeAll()
            lock.unlock()
            for command in batch { command() }
            if stopping { break loop }

            _ = dbus_connection_read_write(raw, 0)
            while let message = dbus_connection_pop_message(raw) {
                dispatch(message)
                dbus_message_unref(message)
            }
            if dbus_connection_get_is_connected(raw) == 0 {
                reason = DBusError(name: DBusError.disconnected, message: "the bus at \(address) closed the connection")
                break loop
            }
            expireCalls()

            lock.lock()
            let more = !commands.isEmpty
            lock.unlock()
            if more { continue }
            var events = Int16(POLLIN)
            if dbus_connection_has_messages_to_send(raw) != 0 { events |= Int16(POLLOUT) }
            var fds = [pollfd(fd: fd, events: events, revents: 0), pollfd(fd: wakePipe.readEnd, events: Int16(POLLIN), revents: 0)]
            _ = try? SystemCall.poll(&fds, timeout: pollTimeout())
            if fds[1].revents != 0 { wakePipe.drain() }
        }
        finish(reason)
    }

    /// Milliseconds until the next call deadline (at most one second).
    private func pollTimeout() -> Int32 {
        guard let next = pending.values.map(\.deadline).min() else { return 1000 }
        let remaining = clock.now.duration(to: next)
        if remaining <= .zero { return 0 }
        let ms = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1
        return Int32(min(1000, ms))
    }

    private func expireCalls() {
        let now = clock.now
        for (serial, call) in pending where call.deadline <= now {
            pending[serial] = nil
            call.complete(.failure(DBusError(name: DBusError.noReply, message: "no reply to \(call.description) in time")))
        }
    }

    private func finish(_ reason: DBusError) {
        lock.lock()
        closeReason = reason
        let leftover = commands
        commands.removeAll()
        let handlers = disconnectHandlers
        disconnectHandlers.removeAll()
        lock.unlock()
        // Commands queued before the close still run: they only touch local state or resume callers.
        for command in leftover { command() }
        for call in pending.values { call.complete(.failure(reason)) }
        pending.removeAll()
        for subscription in subscriptions.values { subscription.onEnd?() }
        subscriptions.removeAll()
        objects.removeAll()
        managers.removeAll()
        dbus_connection_flush(raw)
        dbus_connection_close(raw)
        dbus_connection_unref(raw)
        for handler in handlers { handler(reason) }
        logger.debug("D-Bus connection \(uniqueName) ended: \(reason)")
    }

    /// Sends at once (I/O thread only).
    private func sendNow(_ message: DBusMessage, replyTo call: OpaquePointer? = nil) {
        do {
            let raw = try DBusMarshal.makeRaw(message, replyTo: call)
            if dbus_connection_send(self.raw, raw, nil) == 0 { logger.warning("libdbus could not queue \(message) (out of memory)") }
            dbus_message_unref(raw)
        } catch {
            logger.warning("cannot send \(message): \(error)")
        }
    }

    private func dispatch(_ raw: OpaquePointer) {
        let message = DBusMarshal.decode(raw)
        switch message.kind {
        case .methodReturn, .error:
            if let call = pending.removeValue(forKey: message.replySerial) {
                call.complete(.success(message))
            }
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" { return }
            for subscription in subscriptions.values
            where subscription.rule.matches(message, senderOwner: subscription.senderOwner) {
                subscription.handler(message)
            }
        case .methodCall:
            handleMethodCall(message, raw: raw)
        }
    }

    // MARK: Serving exported objects

    private func handleMethodCall(_ message: DBusMessage, raw: OpaquePointer) {
        guard let path = message.path, let member = message.member else { return }
        let call = DBusMethodCall(
            sender: message.sender ?? "", path: path, interface: message.interface, member: member, arguments: message.body)
        if let object = objects[path] as? any DBusDeferringObject, ![
            Self.peerInterface, Self.introspectableInterface, Self.objectManagerInterface, Self.propertiesInterface,
        ].contains(call.interface ?? "") {
            // Answered whenever the object calls the reply, from any thread: the call is kept until then.
            dbus_message_ref(raw)
            let held = RawMessage(pointer: raw)
            let wantsReply = !message.noReplyExpected
            object.handle(
                call,
                reply: DBusReply { [weak self] result in
                    let sent = self?.enqueue { [weak self] in
                        if wantsReply { self?.sendReply(result, to: held.pointer) }
                        dbus_message_unref(held.pointer)
                    }
                    if sent != true { dbus_message_unref(held.pointer) }
                })
            return
        }
        let result: Result<[DBusValue], DBusError>
        do {
            result = .success(try answer(call))
        } catch let error as DBusError {
            result = .failure(error)
        } catch {
            result = .failure(DBusError(name: DBusError.failed, message: "\(error)"))
        }
        guard !message.noReplyExpected else { return }
        sendReply(result, to: raw)
    }

    /// Answers the call `raw` (I/O thread only).
    private func sendReply(_ result: Result<[DBusValue], DBusError>, to raw: OpaquePointer) {
        switch result {
        case .success(let values):
            var reply = DBusMessage(kind: .methodReturn)
            reply.body = values
            sendNow(reply, replyTo: raw)
        case .failure(let error):
            var reply = DBusMessage(kind: .error)
            reply.errorName = error.name
            reply.body = [.string(error.message)]
            sendNow(reply, replyTo: raw)
        }
    }

    private func answer(_ call: DBusMethodCall) throws -> [DBusValue] {
        switch call.interface {
        case Self.peerInterface?:
            if call.member == "Ping" { return [] }
            if call.member == "GetMachineId" {
                guard let id = dbus_try_get_local_machine_id(nil) else { throw DBusError.unknownMethod(call) }
                defer { dbus_free(id) }
                return [.string(String(cString: id))]
            }
            throw DBusError.unknownMethod(call)
        case Self.introspectableInterface?:
            guard call.member == "Introspect" else { throw DBusError.unknownMethod(call) }
            return [.string(introspection(of: call.path))]
        case Self.objectManagerInterface?:
            guard managers.contains(call.path), call.member == "GetManagedObjects" else {
                throw DBusError.unknownMethod(call)
            }
            let entries = objects.filter { $0.key != call.path && $0.key.isDescendant(of: call.path) }
                .sorted { $0.key < $1.key }
                .map { DBusDictionaryEntry(.objectPath($0.key), Self.interfacesValue($0.value.interfaceProperties)) }
            return [.dictionary(key: "o", value: "a{sa{sv}}", entries)]
        case Self.propertiesInterface?:
            guard let object = objects[call.path] else { throw unknownObject(call) }
            return try answerProperties(call, object: object)
        default:
            guard let object = objects[call.path] else { throw unknownObject(call) }
            return try object.handle(call)
        }
    }

    private func unknownObject(_ call: DBusMethodCall) -> DBusError {
        DBusError(name: DBusError.unknownObject, message: "no object at \(call.path)")
    }

    private func answerProperties(_ call: DBusMethodCall, object: any DBusExportedObject) throws -> [DBusValue] {
        let all = object.interfaceProperties
        switch call.member {
        case "Get":
            try call.expectSignature("ss")
            let interface = call.arguments[0].string!, name = call.arguments[1].string!
            guard let properties = all[interface] else {
                throw DBusError(name: DBusError.unknownInterface, message: "\(call.path) has no interface \(interface)")
            }
            guard let value = properties[name] else {
                throw DBusError(name: DBusError.unknownProperty, message: "\(interface) has no property \(name)")
            }
            return [.variant(value)]
        case "GetAll":
            try call.expectSignature("s")
            let interface = call.arguments[0].string!
            return [.properties(all[interface] ?? [:])]
        case "Set":
            try call.expectSignature("ssv")
            let interface = call.arguments[0].string!, name = call.arguments[1].string!
            guard all[interface]?[name] != nil else {
                throw DBusError(name: DBusError.unknownProperty, message: "\(interface) has no property \(name)")
            }
            try object.setProperty(name, interface: interface, value: call.arguments[2].unwrapped)
            return []
        default:
            throw DBusError.unknownMethod(call)
        }
    }

    private func introspection(of path: DBusObjectPath) -> String {
        var xml = "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\"\n"
        xml += " \"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n"
        var interfaces: [String: [String: DBusValue]] = [
            Self.introspectableInterface: [:], Self.peerInterface: [:],
        ]
        if let object = objects[path] {
            interfaces[Self.propertiesInterface] = [:]
            interfaces.merge(object.interfaceProperties) { a, _ in a }
        }
        if managers.contains(path) { interfaces[Self.objectManagerInterface] = [:] }
        for (name, properties) in interfaces.sorted(by: { $0.key < $1.key }) {
            xml += "  <interface name=\"\(name)\">\n"
            for (property, value) in properties.sorted(by: { $0.key < $1.key }) {
                xml += "    <property name=\"\(property)\" type=\"\(value.signature)\" access=\"read\"/>\n"
            }
            xml += "  </interface>\n"
        }
        // Direct children, so that tools can walk the tree.
        var children = Set<String>()
        for candidate in Array(objects.keys) + Array(managers) where candidate != path && candidate.isDescendant(of: path) {
            let rest = candidate.rawValue.dropFirst(path.rawValue == "/" ? 1 : path.rawValue.count + 1)
            if let first = rest.split(separator: "/").first { children.insert(String(first)) }
        }
        for child in children.sorted() { xml += "  <node name=\"\(child)\"/>\n" }
        xml += "</node>\n"
        return xml
    }
}

/// A signal subscription; `cancel()` ends it (also when the connection closes).
public final class DBusSubscription: Sendable {
    private weak let connection: DBusConnection?
    private let id: UInt64
    public let rule: DBusMatchRule
    private let cancelled = LockedCounter()

    init(connection: DBusConnection, id: UInt64, rule: DBusMatchRule) {
        self.connection = connection
        self.id = id
        self.rule = rule
    }

    /// Stops delivery and removes the match from the bus. Idempotent.
    public func cancel() {
        guard cancelled.next() == 0 else { return }
        connection?.unsubscribe(id, rule: rule)
    }
}

/// The answer of `GetManagedObjects`: object path → interface → property → value.
public struct DBusManagedObjects: Sendable {
    public var objects: [DBusObjectPath: [String: [String: DBusValue]]]

    public init(objects: [DBusObjectPath: [String: [String: DBusValue]]] = [:]) {
        self.objects = objects
    }

    /// Parses `a{oa{sa{sv}}}`.
    public init(_ value: DBusValue) {
        var objects: [DBusObjectPath: [String: [String: DBusValue]]] = [:]
        if case .dictionary(_, _, let entries) = value.unwrapped {
            for entry in entries {
                guard let path = entry.key.objectPath, case .dictionary(_, _, let interfaceEntries) = entry.value else { continue }
                var interfaces: [String: [String: DBusValue]] = [:]
                for interfaceEntry in interfaceEntries {
                    guard let name = interfaceEntry.key.string else { continue }
                    interfaces[name] = interfaceEntry.value.stringKeyedDictionary ?? [:]
                }
                objects[path] = interfaces
            }
        }
        self.objects = objects
    }

    /// The objects that have `interface`, with that interface's properties, sorted by path.
    public func objects(with interface: String) -> [(path: DBusObjectPath, properties: [String: DBusValue])] {
        objects.compactMap { path, interfaces in interfaces[interface].map { (path, $0) } }.sorted { $0.path < $1.path }
    }
}

extension DBusValue {
    var containsFileDescriptor: Bool {
        switch self {
        case .unixFD: return true
        case .array(let element, let items): return element.contains("h") && items.contains { $0.containsFileDescriptor }
        case .dictionary(_, _, let entries):
            return entries.contains { $0.key.containsFileDescriptor || $0.value.containsFileDescriptor }
        case .structure(let members): return members.contains { $0.containsFileDescriptor }
        case .variant(let inner): return inner.containsFileDescriptor
        default: return false
        }
    }
}

/// A counter behind a lock (ids; once-only flags).
final class LockedCounter: @unchecked Sendable {
    private let lock = NIOLock()
    private var value: UInt64 = 0
    /// The current value, then increments it.
    func next() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        let v = value
        value += 1
        return v
    }
}

/// libdbus must be told once that it is used from several threads.
private let dbusThreadsInit: Void = {
    _ = dbus_threads_init_default()
}()
