#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The OS group (0): echo, statistics, date-time, reset, buffer parameters, application and bootloader info.
public struct DefaultManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Sends `text` and returns what the device echoed.
    public func echo(_ text: String) async throws -> String {
        try await client.send(EchoRequest(text: text)).text
    }

    /// Turns the console's echo on or off (mynewt; Zephyr answers rc 8).
    public func consoleEcho(enabled: Bool) async throws {
        _ = try await client.send(ConsoleEchoControlRequest(enabled: enabled))
    }

    /// Per-thread statistics, by thread name.
    public func taskStats() async throws -> [String: TaskStatisticsResponse.Task] {
        try await client.send(TaskStatisticsRequest()).tasks
    }

    /// Memory pool statistics, by pool name.
    public func memoryPoolStats() async throws -> [String: MemoryPoolStatisticsResponse.Pool] {
        try await client.send(MemoryPoolStatisticsRequest()).pools
    }

    /// The device's date and time, read as UTC.
    /// - Throws: `McuMgrError` of kind `.protocolViolation` if the device's text does not parse.
    public func readDatetime() async throws -> Date {
        let response = try await client.send(DateTimeReadRequest())
        guard let date = response.date else {
            throw McuMgrError(
                .protocolViolation,
                "date-time read: the device answered \"\(response.dateTime)\", which is not yyyy-MM-ddTHH:mm:ss")
        }
        return date
    }

    /// Sets the device's clock to `date`, sent as UTC `yyyy-MM-ddTHH:mm:ss`.
    public func writeDatetime(_ date: Date = Date()) async throws {
        _ = try await client.send(DateTimeWriteRequest(date: date))
    }

    /// Resets the device. It answers first and reboots about 250 ms later.
    /// - Parameters:
    ///   - force: reset even if an application hook refuses.
    ///   - bootMode: 0 normal, 1 bootloader / firmware loader; nil to leave out.
    public func reset(force: Bool = false, bootMode: Int? = nil) async throws {
        _ = try await client.send(ResetRequest(force: force, bootMode: bootMode))
    }

    /// The device's SMP buffer size (`buf_size`) and count (`buf_count`).
    public func mcuMgrParameters() async throws -> McuMgrParametersResponse {
        try await client.send(McuMgrParametersRequest())
    }

    /// OS / application information for the format letters (`s n r v b m p i o`, `a` = all; nil = `s`).
    public func applicationInfo(format: String? = nil) async throws -> String {
        try await client.send(ApplicationInfoRequest(format: format)).output
    }

    /// Bootloader information for `query` (nil = the bootloader's name, `"mode"`, `"active_b0_slot"`).
    public func bootloaderInfo(query: String? = nil) async throws -> BootloaderInfoResponse {
        try await client.send(BootloaderInfoRequest(query: query))
    }

    /// The bootloader's name, e.g. "MCUboot" or "SUIT".
    public func bootloaderName() async throws -> String? {
        try await bootloaderInfo().bootloader
    }

    /// MCUboot's mode (`query: "mode"`); `.unknown` if the device does not report one.
    public func bootloaderMode() async throws -> BootloaderMode {
        try await bootloaderInfo(query: "mode").mode ?? .unknown
    }
}
