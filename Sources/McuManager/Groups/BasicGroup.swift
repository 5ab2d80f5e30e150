#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Zephyr basic group (63): PROTOCOL.md 3.10.

extension McuMgrCommand {
    /// Zephyr basic group commands.
    public enum Basic {
        /// Erase the storage partition.
        public static let eraseStorage = McuMgrCommand(0)
    }
}

/// Erases the `storage_partition` (settings / NVS area).
public struct EraseStorageRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .zephyrBasic }
    public static var command: McuMgrCommand { McuMgrCommand.Basic.eraseStorage }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "erase storage" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
    /// The device erases the partition for every copy: `McuMgrTimeouts.storageEraseResendFloor`.
    public var resendFloor: Duration? { McuMgrTimeouts.storageEraseResendFloor }
}
