#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// A log line of the upgrade.
public struct FirmwareUpgradeLogEntry: Sendable, Hashable, CustomStringConvertible {
    /// How important: `.info` for steps, `.debug` for details, `.warning` for things to know.
    public var level: Logger.Level
    /// The text.
    public var message: String
    /// When it was written.
    public var timestamp: Date

    /// Creates an entry.
    public init(level: Logger.Level, message: String, timestamp: Date = Date()) {
        self.level = level
        self.message = message
        self.timestamp = timestamp
    }

    public var description: String { message }
}
