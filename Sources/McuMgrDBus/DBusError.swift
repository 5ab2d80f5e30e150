import McuManager

/// An error reply from the bus or a peer (or one made up locally for a timeout or a lost
/// connection), with the D-Bus error name and its message.
public struct DBusError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The D-Bus error name, e.g. `org.bluez.Error.Failed`.
    public var name: String
    /// The human-readable text that came with it.
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { message.isEmpty ? name : "\(name): \(message)" }

    // Names from the D-Bus specification that the package meets or sends.
    public static let failed = "org.freedesktop.DBus.Error.Failed"
    public static let noReply = "org.freedesktop.DBus.Error.NoReply"
    public static let timeout = "org.freedesktop.DBus.Error.Timeout"
    public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
    public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
    public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
    public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
    public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    public static let notSupported = "org.freedesktop.DBus.Error.NotSupported"

    /// Whether the peer does not implement what was called (method, interface or object).
    public var isUnknownMember: Bool {
        [Self.unknownMethod, Self.unknownObject, Self.unknownInterface, Self.unknownProperty].contains(name)
    }

    /// The package's error for this failure while doing `operation`, with a hint for the names users
    /// meet: the service is not running, the policy denies access, the peer did not answer. This error is
    /// its `cause`.
    public func mcuMgrError(_ operation: String) -> McuMgrError {
        var error = hinted(operation)
        error.cause = self
        return error
    }

    private func hinted(_ operation: String) -> McuMgrError {
        switch name {
        case Self.serviceUnknown, Self.nameHasNoOwner:
            return McuMgrError(
                .transport,
                "\(operation): \(message.isEmpty ? "the service is not on the bus" : message); is bluetoothd running (`systemctl status bluetooth`)? For a private bus set DBUS_SYSTEM_BUS_ADDRESS"
            )
        case Self.accessDenied:
            return McuMgrError(
                .transport,
                "\(operation): the D-Bus policy denied access (\(message)); run as a user allowed to use BlueZ (e.g. in the bluetooth group) or as root"
            )
        case Self.noReply, Self.timeout:
            return McuMgrError(.timeout, "\(operation): no answer on D-Bus in time (\(message)); the service may be busy or hung")
        case Self.disconnected:
            return McuMgrError(.transport, "\(operation): the D-Bus connection closed (\(message)); check that the bus daemon is running")
        default:
            return McuMgrError(.transport, "\(operation) failed: \(description)")
        }
    }
}
