/// A D-Bus object path such as `/org/bluez/hci0`.
public struct DBusObjectPath: Sendable, Hashable, Comparable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    /// - Precondition: `rawValue` is a valid object path (see `isValid`); use `init?(validating:)` for
    ///   untrusted text.
    public init(_ rawValue: String) {
        precondition(Self.isValid(rawValue), "invalid D-Bus object path \"\(rawValue)\"")
        self.rawValue = rawValue
    }

    public init?(validating rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    public init(stringLiteral value: String) { self.init(value) }

    public static let root = DBusObjectPath("/")

    /// Whether `text` is a valid object path: `/`, or `/`-separated non-empty elements of
    /// `[A-Za-z0-9_]`.
    public static func isValid(_ text: String) -> Bool {
        guard text.first == "/" else { return false }
        if text == "/" { return true }
        guard text.last != "/" else { return false }
        var previousSlash = false
        for (index, scalar) in text.unicodeScalars.enumerated() {
            if scalar == "/" {
                if previousSlash && index > 0 { return false }
                previousSlash = true
                continue
            }
            previousSlash = false
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9", "_": continue
            default: return false
            }
        }
        return true
    }

    /// A child path: `self/element`. `element` must be a valid path element.
    public func appending(_ element: String) -> DBusObjectPath {
        DBusObjectPath(rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// Whether this path is `ancestor` or lies below it.
    public func isDescendant(of ancestor: DBusObjectPath) -> Bool {
        if ancestor.rawValue == "/" || ancestor == self { return true }
        return rawValue.hasPrefix(ancestor.rawValue + "/")
    }

    /// The path without its last element (`/` for top-level paths).
    public var parent: DBusObjectPath {
        guard let slash = rawValue.lastIndex(of: "/"), slash != rawValue.startIndex else { return .root }
        return DBusObjectPath(String(rawValue[..<slash]))
    }

    public var description: String { rawValue }

    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}
