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
