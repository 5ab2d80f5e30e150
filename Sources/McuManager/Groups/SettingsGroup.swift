#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Settings group (3): PROTOCOL.md 3.4.

extension McuMgrCommand {
    /// Settings group commands.
    public enum Settings {
        /// Read (R) / write (W) one setting.
        public static let readWrite = McuMgrCommand(0)
        /// Delete a setting.
        public static let delete = McuMgrCommand(1)
        /// Commit.
        public static let commit = McuMgrCommand(2)
        /// Load (R) / save (W).
        public static let loadSave = McuMgrCommand(3)
    }
}

/// Reads one setting's raw value.
public struct SettingsReadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.readWrite }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "settings read" }
    public typealias Response = SettingsReadResponse

    /// The setting's name (`name`), e.g. `bt/name`.
    public var name: String
    /// Largest value the client accepts (`max_size`).
    public var maximumSize: Int?

    /// Creates the request.
    public init(name: String, maximumSize: Int? = nil) {
        self.name = name
        self.maximumSize = maximumSize
    }

    enum CodingKeys: String, CodingKey { case name, maximumSize = "max_size" }
}

/// A setting's raw value.
public struct SettingsReadResponse: Decodable, Sendable, Hashable {
    /// The value's bytes (`val`); the client must know its type.
    public var value: Data
    /// The device's own limit (`max_size`), sent when smaller than requested.
    public var maximumSize: Int?

    enum CodingKeys: String, CodingKey { case value = "val", maximumSize = "max_size" }
}

/// Writes one setting's raw value.
public struct SettingsWriteRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.readWrite }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "settings write" }
    public typealias Response = McuMgrEmptyResponse

    /// The setting's name (`name`).
    public var name: String
    /// The value's bytes (`val`).
    public var value: Data

    /// Creates the request.
    public init(name: String, value: Data) {
        self.name = name
        self.value = value
    }

    enum CodingKeys: String, CodingKey { case name, value = "val" }
}

/// Deletes one setting.
public struct SettingsDeleteRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.delete }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "settings delete" }
    public typealias Response = McuMgrEmptyResponse

    /// The setting's name (`name`).
    public var name: String

    /// Creates the request.
    public init(name: String) { self.name = name }
}

/// Commits the settings (applies written values).
public struct SettingsCommitRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.commit }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "settings commit" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}

/// Loads the settings from persistent storage.
public struct SettingsLoadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.loadSave }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "settings load" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}

/// Saves the settings (all, or one subtree) to persistent storage.
public struct SettingsSaveRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .settings }
    public static var command: McuMgrCommand { McuMgrCommand.Settings.loadSave }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "settings save" }
    public typealias Response = McuMgrEmptyResponse

    /// Subtree to save (`name`); nil saves everything.
    public var name: String?

    /// Creates the request.
    public init(name: String? = nil) { self.name = name }
}
