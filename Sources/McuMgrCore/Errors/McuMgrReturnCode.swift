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

/// A group-specific SMP v2 error: `err {group, rc}`.
public struct McuMgrGroupError: Sendable, Hashable, CustomStringConvertible {
    public var group: McuMgrGroup
    public var rc: Int

    public init(group: McuMgrGroup, rc: Int) {
        self.group = group
        self.rc = rc
    }

    /// The name of the code in its group (e.g. `FILE_NOT_FOUND`), or a generic name.
    public var name: String { McuMgrGroupError.names[group.rawValue]?[rc] ?? (rc == 1 ? "UNKNOWN" : "rc \(rc)") }

    public var description: String { "\(group) error \(name) (\(rc))" }

    /// Per-group names of the v2 error codes (PROTOCOL.md 2.3).
    public static let names: [UInt16: [Int: String]] = [
        0: [
            0: "OK", 1: "UNKNOWN", 2: "INVALID_FORMAT", 3: "QUERY_YIELDS_NO_ANSWER", 4: "RTC_NOT_SET",
            5: "RTC_COMMAND_FAILED", 6: "QUERY_RESPONSE_VALUE_NOT_VALID", 7: "HEAP_STATS_FETCH_FAILED",
        ],
        1: [
            0: "OK", 1: "UNKNOWN", 2: "FLASH_CONFIG_QUERY_FAIL", 3: "NO_IMAGE", 4: "NO_TLVS", 5: "INVALID_TLV",
            6: "TLV_MULTIPLE_HASHES_FOUND", 7: "TLV_INVALID_SIZE", 8: "HASH_NOT_FOUND", 9: "NO_FREE_SLOT",
            10: "FLASH_OPEN_FAILED", 11: "FLASH_READ_FAILED", 12: "FLASH_WRITE_FAILED", 13: "FLASH_ERASE_FAILED",
            14: "INVALID_SLOT", 15: "NO_FREE_MEMORY", 16: "FLASH_CONTEXT_ALREADY_SET",
            17: "FLASH_CONTEXT_NOT_SET", 18: "FLASH_AREA_DEVICE_NULL", 19: "INVALID_PAGE_OFFSET",
            20: "INVALID_OFFSET", 21: "INVALID_LENGTH", 22: "INVALID_IMAGE_HEADER",
            23: "INVALID_IMAGE_HEADER_MAGIC", 24: "INVALID_HASH", 25: "INVALID_FLASH_ADDRESS",
            26: "VERSION_GET_FAILED", 27: "CURRENT_VERSION_IS_NEWER", 28: "IMAGE_ALREADY_PENDING",
            29: "INVALID_IMAGE_VECTOR_TABLE", 30: "INVALID_IMAGE_TOO_LARGE", 31: "INVALID_IMAGE_DATA_OVERRUN",
            32: "IMAGE_CONFIRMATION_DENIED", 33: "IMAGE_SETTING_TEST_TO_ACTIVE_DENIED",
            34: "ACTIVE_SLOT_NOT_KNOWN",
        ],
        2: [0: "OK", 1: "UNKNOWN", 2: "INVALID_GROUP", 3: "INVALID_STAT_NAME", 4: "INVALID_STAT_SIZE", 5: "WALK_ABORTED"],
        3: [
            0: "OK", 1: "UNKNOWN", 2: "KEY_TOO_LONG", 3: "KEY_NOT_FOUND", 4: "READ_NOT_SUPPORTED",
            5: "ROOT_KEY_NOT_FOUND", 6: "WRITE_NOT_SUPPORTED", 7: "DELETE_NOT_SUPPORTED", 8: "SAVE_NOT_SUPPORTED",
        ],
        8: [
            0: "OK", 1: "UNKNOWN", 2: "FILE_INVALID_NAME", 3: "FILE_NOT_FOUND", 4: "FILE_IS_DIRECTORY",
            5: "FILE_OPEN_FAILED", 6: "FILE_SEEK_FAILED", 7: "FILE_READ_FAILED", 8: "FILE_TRUNCATE_FAILED",
            9: "FILE_DELETE_FAILED", 10: "FILE_WRITE_FAILED", 11: "FILE_OFFSET_NOT_VALID",
            12: "FILE_OFFSET_LARGER_THAN_FILE", 13: "CHECKSUM_HASH_NOT_FOUND", 14: "MOUNT_POINT_NOT_FOUND",
            15: "READ_ONLY_FILESYSTEM", 16: "FILE_EMPTY", 17: "FILE_CLOSE_FAILED",
        ],
        9: [0: "OK", 1: "UNKNOWN", 2: "COMMAND_TOO_LONG", 3: "EMPTY_COMMAND"],
        10: [0: "OK", 1: "UNKNOWN", 2: "TOO_MANY_GROUP_ENTRIES", 3: "INSUFFICIENT_HEAP_FOR_ENTRIES", 4: "INDEX_TOO_LARGE"],
        11: [
            0: "OK", 1: "UNKNOWN", 2: "MISSING_REQUIRED_FUNCTIONS", 3: "MISSING_INFO_FUNCTIONS",
            4: "INVALID_TRANSPORT", 5: "INVALID_MODE", 6: "ALL_CONTEXTS_USED",
            7: "BOTH_TRANSPORT_AND_ALL_PARAMETERS", 8: "NOT_BRIDGED", 9: "SAME_BRIDGE_DEVICE_DISALLOWED",
            10: "INGOING_NOT_SUPPORTED", 11: "OUTGOING_NOT_SUPPORTED", 12: "INCOMING_ALREADY_BRIDGED",
            13: "OUTGOING_ALREADY_BRIDGED", 14: "CONNECT_MISSING_PARAMETER", 15: "CONNECT_INVALID_PARAMETER",
            16: "CONNECT_UNSUPPORTED_PARAMETER", 17: "CONNECT_FAILED",
        ],
        63: [0: "OK", 1: "UNKNOWN", 2: "FLASH_OPEN_FAILED", 3: "FLASH_CONFIG_QUERY_FAIL", 4: "FLASH_ERASE_FAILED"],
    ]
}
