import Foundation
import McuManager
import McuMgrBLE
import McuMgrCore
import Testing

/// Tests against a real Bluetooth LE board through the machine's BlueZ. They run only when told which
/// device to use:
///   SMP_HW_BLE=AA:BB:CC:DD:EE:FF (or name=NAME, and any ble: URI options: ?adapter=hci1&timeout=20)
///   SMP_HW_ALLOW_RESET=1   also reset the board and check that the link comes back
/// and are skipped otherwise. They change nothing on the device except a scratch file under
/// SMP_HW_FS_DIR (default /lfs1) when the board has a file system.
enum HardwareBLEBoard {
    static let environment = ProcessInfo.processInfo.environment

    static var uri: McuMgrDeviceURI? {
        guard let text = environment["SMP_HW_BLE"], !text.isEmpty else { return nil }
        return try? McuMgrDeviceURI(parsing: text.hasPrefix("ble:") ? text : "ble:" + text)
    }

    static var isConfigured: Bool { uri != nil }
    static var allowReset: Bool { ["1", "yes", "true"].contains(environment["SMP_HW_ALLOW_RESET"]?.lowercased() ?? "") }

    static func transport() throws -> McuMgrBleTransport {
        guard let uri else { throw McuMgrError(.usage, "SMP_HW_BLE is not a valid ble: device: \(environment["SMP_HW_BLE"] ?? "")") }
        return try McuMgrBleTransport(uri: uri)
    }
}

@Suite(
    "Real boards over Bluetooth LE (SMP_HW_BLE)",
    .enabled(if: HardwareBLEBoard.isConfigured, "set SMP_HW_BLE=AA:BB:CC:DD:EE:FF (or name=NAME) to run"),
    .serialized)
struct HardwareBLETests {
    @Test func echoParametersAndImageList() async throws {
        let transport = try HardwareBLEBoard.transport()
        let client = McuMgrClient(transport: transport)
        let os = DefaultManager(client: client)
        let text = "hardware-ble-\(UInt32.random(in: 0...UInt32.max))"
        #expect(try await os.echo(text) == text)
        #expect(transport.attMTU.map { (23...517).contains($0) } == true, "ATT MTU \(String(describing: transport.attMTU))")
        // An echo longer than one ATT payload: several writes and notifications (the device must
        // reassemble, or the request must fit one write).
        let parameters = try? await os.mcuMgrParameters()
        if let parameters, parameters.bufferSize > transport.mtu + 64 {
            let long = String(repeating: "x", count: min(parameters.bufferSize - 64, 1024))
            #expect(try await os.echo(long) == long)
        }
        let images = try await ImageManager(client: client).list().images
        #expect(images.contains { $0.active }, "no active image reported")
        await client.close()
    }

    @Test func pipelinedRequests() async throws {
        let client = McuMgrClient(transport: try HardwareBLEBoard.transport())
        let os = DefaultManager(client: client)
        let parameters = try? await os.mcuMgrParameters()
        // The device's buffers set the window (`LinkLimits.window`: buf_count - 1 over Bluetooth LE).
        await client.refineLinkLimits(
            deviceBufferSize: parameters?.bufferSize, deviceBufferCount: parameters?.bufferCount ?? 2, requestedWindow: nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<12 {
                group.addTask {
                    let reply = try await os.echo("pipelined \(index)")
                    #expect(reply == "pipelined \(index)")
                }
            }
            try await group.waitForAll()
        }
        await client.close()
    }

    @Test func fileRoundTripWhenTheBoardHasAFileSystem() async throws {
        let directory = HardwareBLEBoard.environment["SMP_HW_FS_DIR"] ?? "/lfs1"
        let client = McuMgrClient(transport: try HardwareBLEBoard.transport())
        let fs = FileSystemManager(client: client)
        let local = FileManager.default.temporaryDirectory.appendingPathComponent("smp-hw-ble-\(UUID().uuidString)")
        let back = local.appendingPathExtension("back")
        defer {
            try? FileManager.default.removeItem(at: local)
            try? FileManager.default.removeItem(at: back)
        }
        let bytes = Data((0..<32_768).map { _ in UInt8.random(in: 0...255) })
        try bytes.write(to: local)
        do {
            _ = try await fs.upload(local, to: "\(directory)/smp-hw-ble.bin")
        } catch let error as McuMgrError where error.kind == .device {
            await client.close()
            return  // No file system on this board.
        }
        _ = try await fs.download("\(directory)/smp-hw-ble.bin", to: back)
        #expect(try Data(contentsOf: back) == bytes)
        await client.close()
    }

    @Test(.enabled(if: HardwareBLEBoard.allowReset, "set SMP_HW_ALLOW_RESET=1 to reset the board"))
    func reconnectsAfterAReset() async throws {
        let client = McuMgrClient(transport: try HardwareBLEBoard.transport(), configuration: .init(timeout: .seconds(20)))
        let os = DefaultManager(client: client)
        #expect(try await os.echo("before reset") == "before reset")
        try await os.reset()
        // The board drops the link when it reboots; the next request reconnects (retrying while it boots).
        try await Task.sleep(for: .seconds(2))
        #expect(try await os.echo("after reset") == "after reset")
        await client.close()
    }

    @Test func scanFindsTheBoard() async throws {
        // The other tests disconnect when they finish, so the board advertises again.
        let transport = try HardwareBLEBoard.transport()
        let (_, devices) = try await BLEScanner.discover(
            adapter: transport.configuration.adapter, timeout: .seconds(8), onlySMP: false)
        let found = devices.first { device in
            switch transport.configuration.target {
            case .address(let address): return device.address == address
            case .name(let name): return device.name == name || device.alias == name
            }
        }
        let board = try #require(found, "the board did not show up in an 8 s scan; seen: \(devices.map(\.label))")
        #expect(board.rssi != nil || board.connected)
    }
}
