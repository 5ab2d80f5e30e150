/// An SMP v1 / SMP-level return code (`MGMT_ERR_*`), the `rc` key of a response.
public struct McuMgrReturnCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    public static let ok = Self(0)
    public static let unknown = Self(1)
    public static let noMemory = Self(2)
    public static let invalidValue = Self(3)
    public static let timeout = Self(4)
    public static let noEntry = Self(5)
    public static let badState = Self(6)
    public static let messageTooLarge = Self(7)
    public static let notSupported = Self(8)
    public static let corrupt = Self(9)
    public static let busy = Self(10)
    public static let accessDenied = Self(11)
    public static let unsupportedTooOld = Self(12)
    public static let unsupportedTooNew = Self(13)
    /// Base of application-defined codes.
    public static let perUser = Self(256)

    /// The `MGMT_ERR_*` name.
    public var name: String {
        switch rawValue {
        case 0: return "EOK"
        case 1: return "EUNKNOWN"
        case 2: return "ENOMEM"
        case 3: return "EINVAL"
        case 4: return "ETIMEOUT"
        case 5: return "ENOENT"
        case 6: return "EBADSTATE"
        case 7: return "EMSGSIZE"
        case 8: return "ENOTSUP"
        case 9: return "ECORRUPT"
        case 10: return "EBUSY"
        case 11: return "EACCESSDENIED"
        case 12: return "UNSUPPORTED_TOO_OLD"
        case 13: return "UNSUPPORTED_TOO_NEW"
        default: return rawValue >= 256 ? "EPERUSER+\(rawValue - 256)" : "rc \(rawValue)"
        }
    }

    /// What the code means, in words.
    public var meaning: String {
        switch rawValue {
        case 0: return "success"
        case 1: return "unknown error"
        case 2: return "the device is out of memory or buffers"
        case 3: return "the device rejected a value in the request"
        case 4: return "the operation timed out on the device"
        case 5: return "no such entry"
        case 6: return "the device's current state forbids this command"
        case 7: return "the response did not fit the device's buffer"
        case 8: return "the device does not support this group or command"
        case 9: return "the device received a corrupted payload"
        case 10: return "the device is busy with another request"
        case 11: return "access denied"
        case 12: return "the device needs SMP v2 requests"
        case 13: return "the device does not support this SMP version"
        default: return rawValue >= 256 ? "application-defined error" : "unknown error code"
        }
    }

    /// A hint for the user, where one helps.
    public var hint: String? {
        switch rawValue {
        case 2: return "send smaller requests (lower the MTU) or retry later"
        case 3: return "check the arguments"
        case 5: return "check the name or path"
        case 6: return "check the device's state (e.g. `smp image list`) first"
        case 7: return "lower the MTU or chunk size"
        case 8: return "the firmware was built without this command; enable it in the device's configuration"
        case 10: return "retry in a moment"
        default: return nil
        }
    }

    public var description: String { "\(name) (\(rawValue))" }
}
