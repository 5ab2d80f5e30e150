import NIOConcurrencyHelpers

/// An object this process serves on the bus (a BlueZ GATT application, an advertisement, an agent).
///
/// The connection answers `org.freedesktop.DBus.Properties`, `Introspectable` and `Peer` from
/// `interfaceProperties`, and passes every other call to `handle(_:)`. Calls arrive on the
/// connection's I/O thread one at a time and in order, so implementations must be quick and must not
/// wait for other D-Bus calls (they may start them and return).
public protocol DBusExportedObject: AnyObject, Sendable {
    /// The object's interfaces (beyond the standard ones) and each one's current properties.
    var interfaceProperties: [String: [String: DBusValue]] { get }

    /// Answers a method call of one of the object's interfaces with the reply's arguments.
    /// - Throws: `DBusError` to answer with that error (e.g. `DBusError.unknownMethod`).
    func handle(_ call: DBusMethodCall) throws -> [DBusValue]

    /// Sets a property on a peer's request (`Properties.Set`).
    /// - Throws: `DBusError` to refuse (the default refuses with PropertyReadOnly).
    func setProperty(_ name: String, interface: String, value: DBusValue) throws
}

extension DBusExportedObject {
    public func setProperty(_ name: String, interface: String, value: DBusValue) throws {
        throw DBusError(name: DBusError.propertyReadOnly, message: "\(interface).\(name) is read-only")
    }
}

extension DBusError {
    /// The answer to a method an object does not have.
    public static func unknownMethod(_ call: DBusMethodCall) -> DBusError {
        DBusError(
            name: unknownMethod,
            message: "no method \(call.interface.map { "\($0)." } ?? "")\(call.member)(\(call.signature)) on \(call.path)")
    }
}

/// An exported object that answers some calls later, from any thread: a BlueZ agent waiting for the
/// user to type a passkey must not hold the connection's I/O thread (the reply BlueZ waits for, and
/// every other call, arrive there).
public protocol DBusDeferringObject: DBusExportedObject {
    /// Handles `call` and answers it through `reply`, now or later (exactly once; a reply dropped
    /// unanswered answers with `org.freedesktop.DBus.Error.NoReply`). Called on the I/O thread.
    func handle(_ call: DBusMethodCall, reply: DBusReply)
}

extension DBusDeferringObject {
    public func handle(_ call: DBusMethodCall) throws -> [DBusValue] { throw DBusError.unknownMethod(call) }
}

/// The answer to one method call, sent when `succeed` or `fail` is called (the first call counts).
public final class DBusReply: @unchecked Sendable {
    private let lock = NIOLock()
    private var send: (@Sendable (Result<[DBusValue], DBusError>) -> Void)?

    init(_ send: @escaping @Sendable (Result<[DBusValue], DBusError>) -> Void) {
        self.send = send
    }

    /// Answers with these values.
    public func succeed(_ values: [DBusValue] = []) { complete(.success(values)) }

    /// Answers with an error.
    public func fail(_ error: DBusError) { complete(.failure(error)) }

    private func complete(_ result: Result<[DBusValue], DBusError>) {
        let send = lock.withLock {
            defer { self.send = nil }
            return self.send
        }
        send?(result)
    }

    deinit {
        send?(.failure(DBusError(name: DBusError.noReply, message: "the object did not answer")))
    }
}
