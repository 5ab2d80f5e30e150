/// A D-Bus match rule for signals (`type='signal',interface='...',...`): sent to the bus with AddMatch
/// and used locally to route received signals to their subscribers.
public struct DBusMatchRule: Sendable, Hashable, CustomStringConvertible {
    /// The sender: a unique name (`:1.7`) or a well-known one (`org.bluez`, resolved to its current
    /// owner when subscribing).
    public var sender: String?
    public var interface: String?
    public var member: String?
    /// Exactly this object.
    public var path: DBusObjectPath?
    /// This object and everything below it.
    public var pathNamespace: DBusObjectPath?
    /// The first argument, when it is a string (e.g. the interface of PropertiesChanged).
    public var arg0: String?

    public init(
        sender: String? = nil, interface: String? = nil, member: String? = nil, path: DBusObjectPath? = nil,
        pathNamespace: DBusObjectPath? = nil, arg0: String? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
        self.arg0 = arg0
    }

    /// `org.freedesktop.DBus.Properties.PropertiesChanged` of `interface` on `path` (or below
    /// `pathNamespace`).
    public static func propertiesChanged(
        sender: String?, path: DBusObjectPath? = nil, pathNamespace: DBusObjectPath? = nil, interface: String? = nil
    ) -> DBusMatchRule {
        DBusMatchRule(
            sender: sender, interface: DBusConnection.propertiesInterface, member: "PropertiesChanged", path: path,
            pathNamespace: pathNamespace, arg0: interface)
    }

    /// ObjectManager's InterfacesAdded / InterfacesRemoved from `sender`.
    public static func objectManager(sender: String?, member: String) -> DBusMatchRule {
        DBusMatchRule(sender: sender, interface: DBusConnection.objectManagerInterface, member: member)
    }

    /// The rule as the bus expects it.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            parts.append("\(key)='\(value.replacing("'", with: "'\\''"))'")
        }
        add("sender", sender)
        add("interface", interface)
        add("member", member)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("arg0", arg0)
        return parts.joined(separator: ",")
    }

    /// Whether a received signal matches; `senderOwner` is the unique name the sender resolved to.
    func matches(_ message: DBusMessage, senderOwner: String?) -> Bool {
        guard message.kind == .signal else { return false }
        if let owner = senderOwner ?? (sender?.hasPrefix(":") == true ? sender : nil), message.sender != owner {
            return false
        }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path, messagePath.isDescendant(of: pathNamespace) else { return false }
        }
        if let arg0, message.firstStringArgument != arg0 { return false }
        return true
    }
}
