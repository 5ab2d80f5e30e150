import McuMgrCore

/// Zephyr's v2 → v1 error translation (PROTOCOL.md 2.4): a group code becomes an `MGMT_ERR_*` value
/// when the request was SMP v1, as each group's `*_translate_error_code` in Zephyr's
/// subsys/mgmt/mcumgr/grp/*/src/*_mgmt.c maps it (os, img, stat, settings, fs, shell, enum, zephyr basic;
/// checked on native_sim_udp 4.4.0 for os, stat, settings, fs, shell and enum). Groups without a
/// translate function yield 1 (EUNKNOWN).
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
        case .stats:
            switch rc {
            case 2, 3: return 5  // INVALID_GROUP, INVALID_STAT_NAME → ENOENT
            case 4: return 3  // INVALID_STAT_SIZE → EINVAL
            default: return 1
            }
        case .settings:
            switch rc {
            case 2: return 3  // KEY_TOO_LONG → EINVAL
            case 3, 4: return 5  // KEY_NOT_FOUND, READ_NOT_SUPPORTED → ENOENT
            default: return 1  // ROOT_KEY_NOT_FOUND, WRITE/DELETE_NOT_SUPPORTED, SAVE_FAILED, UNKNOWN
            }
        case .shell:
            switch rc {
            case 2, 3: return 3  // COMMAND_TOO_LONG, EMPTY_COMMAND → EINVAL
            default: return 1
            }
        case .enumeration:
            switch rc {
            case 2: return 3  // TOO_MANY_GROUP_ENTRIES → EINVAL
            default: return 1  // INDEX_TOO_LARGE, INSUFFICIENT_HEAP_FOR_ENTRIES, UNKNOWN
            }
        case .zephyrBasic:
            switch rc {
            case 2: return 5  // FLASH_OPEN_FAILED → ENOENT
            case 3, 4: return 0  // FLASH_CONFIG_QUERY_FAIL, FLASH_ERASE_FAILED → EOK (as Zephyr has it)
            default: return 1
            }
        default:
            return 1
        }
    }
}
