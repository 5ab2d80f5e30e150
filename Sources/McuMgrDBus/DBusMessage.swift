/// A D-Bus message as plain Swift values: what the connection hands to signal handlers and exported
/// objects, and what it builds calls from.
public struct DBusMessage: Sendable, CustomStringConvertible {
    /// The four message types.
    public enum Kind: Sendable, Hashable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    /// Set by the sender's connection; 0 before sending.
    public var serial: UInt32 = 0
    /// For returns and errors: the serial of the call answered.
    public var replySerial: UInt32 = 0
    /// The sender's unique name (`:1.42`), set by the bus.
    public var sender: String?
    public var destination: String?
    public var path: DBusObjectPath?
    public var interface: String?
    public var member: String?
    /// For errors: the error name (`org.bluez.Error.Failed`).
    public var errorName: String?
    public var body: [DBusValue]
    /// For calls: the caller does not want an answer.
    public var noReplyExpected = false

    public init(
        kind: Kind, destination: String? = nil, path: DBusObjectPath? = nil, interface: String? = nil,
        member: String? = nil, body: [DBusValue] = []
    ) {
        self.kind = kind
        self.destination = destination
        self.path = path
        self.interface = interface
        self.member = member
        self.body = body
    }

    /// A method call.
    public static func methodCall(
        destination: String?, path: DBusObjectPath, interface: String?, member: String, body: [DBusValue] = []
    ) -> DBusMessage {
        DBusMessage(kind: .methodCall, destination: destination, path: path, interface: interface, member: member, body: body)
    }

    /// A signal.
    public static func signal(
        path: DBusObjectPath, interface: String, member: String, body: [DBusValue] = [], destination: String? = nil
    ) -> DBusMessage {
        DBusMessage(kind: .signal, destination: destination, path: path, interface: interface, member: member, body: body)
    }

    /// The signature of the body.
    public var signature: String { body.map(\.signature).joined() }

    /// The first argument as a string (signal `arg0`), if it is one.
    public var firstStringArgument: String? { body.first?.string }

    public var description: String {
        var parts: [String] = ["\(kind)"]
        if let sender { parts.append("from \(sender)") }
        if let destination { parts.append("to \(destination)") }
        if let path { parts.append("path \(path)") }
        if let interface { parts.append("\(interface).\(member ?? "")") } else if let member { parts.append(member) }
        if let errorName { parts.append(errorName) }
        parts.append("(\(signature))")
        return parts.joined(separator: " ")
    }
}

/// A method call received by an exported object.
public struct DBusMethodCall: Sendable {
    /// The caller's unique bus name.
    public var sender: String
    public var path: DBusObjectPath
    public var interface: String?
    public var member: String
    public var arguments: [DBusValue]

    /// The arguments' signature.
    public var signature: String { arguments.map(\.signature).joined() }

    /// Checks the arguments' signature.
    /// - Throws: `DBusError.invalidArguments` when it differs from `expected`.
    public func expectSignature(_ expected: String) throws {
        guard signature == expected else {
            throw DBusError(
                name: DBusError.invalidArgs,
                message: "\(member) takes (\(expected)), got (\(signature))")
        }
    }
}
