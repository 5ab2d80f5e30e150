import Foundation
import McuManager
import McuMgrCore
import McuMgrDiscovery
import McuMgrSerial
import Testing

/// Discovery against real boards: `SMP_HW_SERIAL=1` (any board discovery finds), a filter
/// (`usb:1915:520f`), or a path. `SMP_HW_ALLOW_RESET=1` also resets the board and follows it.
enum HardwareDiscovery {
    static let environment = ProcessInfo.processInfo.environment
    static var setting: String? { environment["SMP_HW_SERIAL"].flatMap { $0.isEmpty ? nil : $0 } }
    static var baud: Int { Int(environment["SMP_HW_BAUD"] ?? "") ?? 115_200 }

    /// The port for the other hardware tests: a path as given, else the port discovery picks (the only
    /// candidate, or the only one the board table calls a likely SMP port).
    static func serialPath(for setting: String) -> String? {
        guard let filter = filter(for: setting) else { return setting }
        let candidates = SerialDeviceDiscovery().devices().filter(filter.matches)
        if candidates.count == 1 { return candidates[0].path }
        let likely = candidates.filter { $0.board?.smp == .likely }
        return likely.count == 1 ? likely[0].path : candidates.first?.path
    }

    static func filter(for setting: String) -> SerialDeviceFilter? {
        if ["1", "auto", "yes", "true"].contains(setting.lowercased()) { return SerialDeviceFilter(isAuto: true, text: "auto") }
        if SerialDeviceFilter.isFilter(setting) { return try? SerialDeviceFilter(parsing: setting) }
        return nil
    }

    static func prober() -> SerialDeviceProber {
        SerialDeviceProber(timeout: .seconds(2)) { device in
            SerialTransport(configuration: .init(path: device.path, baudRate: baud))
        }
    }
}

@Suite(
    "Real boards: discovery (SMP_HW_SERIAL)",
    .enabled(if: HardwareDiscovery.setting != nil, "set SMP_HW_SERIAL=1 (or a path or usb: filter) to run"),
    .serialized)
struct HardwareDiscoveryTests {
    @Test func discoveryListsTheBoardWithItsUSBIdentity() throws {
        let devices = SerialDeviceDiscovery().devices()
        #expect(!devices.isEmpty, "no USB serial devices found; is the board connected?")
        for device in devices {
            #expect(device.usb != nil)
            #expect(device.suggestedFilter != nil)
            #expect(FileManager.default.fileExists(atPath: device.path), "\(device.path)")
        }
        if let setting = HardwareDiscovery.setting, setting.hasPrefix("/") {
            let resolved = URL(fileURLWithPath: setting).resolvingSymlinksInPath().path
            #expect(devices.contains { $0.path == resolved || $0.links.contains(setting) }, "\(setting) not among \(devices.map(\.path))")
        }
    }

    @Test func probeFindsTheBoardAnsweringSMP() async throws {
        let devices = SerialDeviceDiscovery().devices()
        let results = await HardwareDiscovery.prober().probe(devices)
        let answering = results.filter(\.answered)
        #expect(!answering.isEmpty, "no port answered SMP: \(results.map { "\($0.device.path): \($0.summary)" })")
        if let path = HardwareBoard.serialPath {
            #expect(answering.contains { $0.device.path == URL(fileURLWithPath: path).resolvingSymlinksInPath().path })
        }
    }

    @Test(.enabled(if: HardwareDiscovery.environment["SMP_HW_ALLOW_RESET"] == "1", "set SMP_HW_ALLOW_RESET=1 to reset the board"))
    func followTheBoardAcrossAReset() async throws {
        let filter = HardwareDiscovery.filter(for: HardwareDiscovery.setting ?? "auto") ?? SerialDeviceFilter(isAuto: true)
        let selection = try await SerialDeviceSelector(prober: HardwareDiscovery.prober()).select(filter)
        let follower = DeviceFollower(device: selection.device)
        await follower.start()
        let client = McuMgrClient(transport: SerialTransport(configuration: .init(path: selection.device.path, baudRate: HardwareDiscovery.baud)))
        try await DefaultManager(client: client).reset()
        await client.close()
        let reconnect = follower.transportFactory(configuration: .init(path: selection.device.path, baudRate: HardwareDiscovery.baud))
        let transport = try await reconnect()
        let again = McuMgrClient(transport: transport)
        // The application may take a moment to start SMP after the port is back.
        var answer: String?
        for _ in 0..<20 where answer == nil {
            answer = try? await DefaultManager(client: again).echo("after reset")
            if answer == nil { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(answer == "after reset")
        await again.close()
        await follower.stop()
    }
}
