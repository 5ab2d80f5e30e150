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
