#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The settings group (3): raw setting values by name.
public struct SettingsManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// A setting's raw bytes (the caller knows its type).
    public func read(name: String, maxSize: Int? = nil) async throws -> Data {
        try await client.send(SettingsReadRequest(name: name, maximumSize: maxSize)).value
    }

    /// Writes a setting's raw bytes.
    public func write(name: String, value: Data) async throws {
        _ = try await client.send(SettingsWriteRequest(name: name, value: value))
    }

    /// Deletes a setting.
    public func delete(name: String) async throws {
        _ = try await client.send(SettingsDeleteRequest(name: name))
    }

    /// Commits (applies) written settings.
    public func commit() async throws {
        _ = try await client.send(SettingsCommitRequest())
    }

    /// Loads settings from persistent storage.
    public func load() async throws {
        _ = try await client.send(SettingsLoadRequest())
    }

    /// Saves settings (the subtree `name`, or all when nil) to persistent storage.
    public func save(name: String? = nil) async throws {
        _ = try await client.send(SettingsSaveRequest(name: name))
    }

    /// The settings key under which an application in MCUboot firmware-loader mode keeps the name its
    /// loader advertises over Bluetooth LE (sdk-nrf-bm: doc/nrf-bm/app_dev/dfu/dfu_name.rst and its
    /// settings handlers; Nordic's iOS and Android libraries write the same key).
    public static let firmwareLoaderAdvertisingNameKey = "fw_loader/adv_name"

    /// Has the firmware loader advertise as `name` after the next reset into it (boot_mode 1): writes the
    /// name's UTF-8 bytes to `fw_loader/adv_name` and saves the settings so that the value survives the
    /// reset, as the iOS library's method of the same name does (in sdk-nrf-bm the save is what copies the
    /// name to the retained memory the loader reads: subsys/storage/ble_rmem/src/ble_rmem.c `settings_save`).
    public func setFirmwareLoaderAdvertisingName(_ name: String) async throws {
        try await write(name: Self.firmwareLoaderAdvertisingNameKey, value: Data(name.utf8))
        try await save()
    }
}
