import McuMgrCore

/// Zephyr's v2 → v1 error translation (PROTOCOL.md 2.4): a group code becomes an `MGMT_ERR_*` value
/// when the request was SMP v1. Groups without a translate function yield 1 (EUNKNOWN).
enum ErrorTranslation {
    static func v1ReturnCode(group: McuMgrGroup, rc: Int) -> Int {
        switch group {
        case .os:
            switch rc {
            case 2: return 3  // INVALID_FORMAT → EINVAL
            case 3, 4: return 5  // QUERY_YIELDS_NO_ANSWER, RTC_NOT_SET → ENOENT
            default: return 1
            }
        case .image:
            switch rc {
            case 3, 4: return 5  // NO_IMAGE, NO_TLVS → ENOENT
            case 9, 27, 28: return 6  // NO_FREE_SLOT, CURRENT_VERSION_IS_NEWER, IMAGE_ALREADY_PENDING
            case 15: return 2  // NO_FREE_MEMORY → ENOMEM
            case 14, 19, 20, 21, 22, 24, 25: return 3  // invalid slot/offsets/length/header/hash/address
            default: return 1
            }
        case .fileSystem:
            switch rc {
            case 2, 13: return 3  // FILE_INVALID_NAME, CHECKSUM_HASH_NOT_FOUND → EINVAL
            case 3, 14: return 5  // FILE_NOT_FOUND, MOUNT_POINT_NOT_FOUND → ENOENT
            default: return 1
            }
        default:
            return 1
        }
    }
}
