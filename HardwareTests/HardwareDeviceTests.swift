import Foundation
import McuManager
import McuMgrCore
import McuMgrSerial
import McuMgrUDP
import Testing

/// Tests against a real board. They run only when told which device to use:
///   SMP_HW_SERIAL=/dev/ttyACM0 (optionally SMP_HW_BAUD=115200)   a board on a serial port
///   SMP_HW_SERIAL=1 (or auto, or a filter such as usb:1915:520f)  the board discovery finds
///   SMP_HW_UDP=192.0.2.7[:1337]                                  a board reachable over UDP
/// and are skipped otherwise. They change nothing on the device except a scratch file under
/// SMP_HW_FS_DIR (default /lfs1) when the board has a file system.
enum HardwareBoard {
    static let environment = ProcessInfo.processInfo.environment

    static var serialPath: String? {
        environment["SMP_HW_SERIAL"].flatMap { $0.isEmpty ? nil : HardwareDiscovery.serialPath(for: $0) }
    }
    static var udpTarget: String? { environment["SMP_HW_UDP"].flatMap { $0.isEmpty ? nil : $0 } }

    static func transports() throws -> [any McuMgrTransport] {
        var result: [any McuMgrTransport] = []
        if let path = serialPath {
            let baud = Int(environment["SMP_HW_BAUD"] ?? "") ?? 115_200
            result.append(SerialTransport(configuration: .init(path: path, baudRate: baud)))
        }
        if let target = udpTarget {
            let uri = try McuMgrDeviceURI(parsing: "udp:" + target)
            result.append(UDPTransport(configuration: .init(host: uri.target, port: uri.port ?? 1337)))
        }
        return result
    }

    static var isConfigured: Bool { serialPath != nil || udpTarget != nil }
}

@Suite(
    "Real boards (SMP_HW_SERIAL / SMP_HW_UDP)",
    .enabled(if: HardwareBoard.isConfigured, "set SMP_HW_SERIAL=/dev/ttyACM0 or SMP_HW_UDP=HOST[:PORT] to run"),
    .serialized)
struct HardwareDeviceTests {
    @Test func echoParametersAndImageList() async throws {
        for transport in try HardwareBoard.transports() {
            let client = McuMgrClient(transport: transport)
            let os = DefaultManager(client: client)
            let text = "hardware-\(UInt32.random(in: 0...UInt32.max))"
            #expect(try await os.echo(text) == text, "\(transport.name)")
            do {
                let parameters = try await os.mcuMgrParameters()
                #expect(parameters.bufferSize >= 64)
                #expect(parameters.bufferCount >= 1)
            } catch let error as McuMgrError where error.returnCode == .notSupported {
                // MCUmgr parameters are optional on the device.
            }
            let images = try await ImageManager(client: client).list().images
            #expect(images.contains { $0.active }, "\(transport.name): no active image reported")
            await client.close()
        }
    }

    @Test func fileRoundTripWhenTheBoardHasAFileSystem() async throws {
        let directory = HardwareBoard.environment["SMP_HW_FS_DIR"] ?? "/lfs1"
        for transport in try HardwareBoard.transports() {
            let client = McuMgrClient(transport: transport)
            let fs = FileSystemManager(client: client)
            let local = FileManager.default.temporaryDirectory.appendingPathComponent("smp-hw-\(UUID().uuidString)")
            let back = local.appendingPathExtension("back")
            defer {
                try? FileManager.default.removeItem(at: local)
                try? FileManager.default.removeItem(at: back)
            }
            let bytes = Data((0..<16_384).map { _ in UInt8.random(in: 0...255) })
            try bytes.write(to: local)
            do {
                _ = try await fs.upload(local, to: "\(directory)/smp-hw-test.bin")
            } catch let error as McuMgrError where error.kind == .device {
                // No file system (rc 8) or no such mount point: nothing to test on this board.
                await client.close()
                continue
            }
            _ = try await fs.download("\(directory)/smp-hw-test.bin", to: back)
            #expect(try Data(contentsOf: back) == bytes)
            await client.close()
        }
    }
}
