import McuMgrCore

/// The groups and commands the simulated device serves, with the operations each accepts.
/// Anything else is answered `rc 8` (PROTOCOL.md 1.4).
enum SupportedCommands {
    static let read: Set<SMPOperation> = [.read]
    static let write: Set<SMPOperation> = [.write]
    static let both: Set<SMPOperation> = [.read, .write]

    /// group → command → accepted operations.
    static let table: [UInt16: [UInt8: Set<SMPOperation>]] = [
        // OS: echo, task stats, mempool, date-time, reset, params, info, bootloader info. Console echo
        // control (1) is not implemented by Zephyr.
        0: [0: both, 2: read, 3: read, 4: both, 5: write, 6: read, 7: read, 8: read],
        // Image: state, upload, erase, slot info.
        1: [0: both, 1: write, 5: write, 6: read],
        2: [0: read, 1: read],
        3: [0: both, 1: write, 2: write, 3: both],
        // Log: show, clear, module list, level list, logs list.
        4: [0: read, 1: write, 3: read, 4: read, 5: read],
        5: [0: write],
        7: [0: write, 1: read],
        8: [0: both, 1: read, 2: read, 3: read, 4: write],
        9: [0: write],
        10: [0: read, 1: read, 2: read, 3: read],
        63: [0: write],
        // SUIT (NCS): manifests list, manifest state, envelope upload, missing image poll, resource upload,
        // cache raw upload, cleanup. Served only by SUIT devices.
        66: [0: read, 1: read, 2: write, 3: read, 4: write, 5: write, 6: write],
    ]

    /// Group ids in ascending order.
    static var groups: [UInt16] { table.keys.sorted() }

    /// Zephyr's handler count for a group: the highest command id + 1 (handler arrays are indexed by id).
    static func handlerCount(_ group: UInt16) -> Int {
        (table[group]?.keys.max()).map { Int($0) + 1 } ?? 0
    }

    /// Group names as Zephyr registers them for enumeration details.
    static func name(_ group: UInt16) -> String {
        switch group {
        case 0: return "os mgmt"
        case 1: return "img mgmt"
        case 2: return "stat mgmt"
        case 3: return "settings mgmt"
        case 4: return "log mgmt"
        case 5: return "crash mgmt"
        case 7: return "run mgmt"
        case 8: return "fs mgmt"
        case 9: return "shell mgmt"
        case 10: return "enum mgmt"
        case 63: return "zephyr basic mgmt"
        case 66: return "suitfu mgmt"
        default: return "group \(group)"
        }
    }

    static func accepts(group: UInt16, command: UInt8, operation: SMPOperation) -> Bool {
        table[group]?[command]?.contains(operation) ?? false
    }
}
