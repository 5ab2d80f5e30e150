// Firmware upgrade of a device on the network, test-and-confirm, with events:
//     example-udp-upgrade udp:192.0.2.7 dfu_application.zip [SWAP_SECONDS]
import Foundation
import McuManager
import McuMgrUDP

let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4,
    let uri = try? McuMgrDeviceURI(parsing: arguments[1]), uri.scheme == .udp
else {
    print("usage: example-udp-upgrade udp:HOST[:PORT] PACKAGE(.bin|.zip|.suit) [SWAP_SECONDS]")
    exit(64)
}
let swapTime = Duration.seconds(arguments.count == 4 ? Double(arguments[3]) ?? 8 : 8)

let transport = UDPTransport(configuration: .init(host: uri.target, port: uri.port ?? 1337))
let client = McuMgrClient(transport: transport)
do {
    print("echo:", try await DefaultManager(client: client).echo("hello"))
    for slot in try await ImageManager(client: client).list().images {
        print("image \(slot.image) slot \(slot.slot): \(slot.version) active=\(slot.active) confirmed=\(slot.confirmed)")
    }

    let manager = FirmwareUpgradeManager(client: client, reconnection: .reopen)
    let events = manager.events()  // subscribe before starting
    let printer = Task {
        for await event in events {
            switch event {
            case .stateChanged(_, let to):
                print("state:", to)
            case .uploadProgress(let progress):
                // The rate is smoothed over the last seconds; nil until the upload has run long enough.
                let rate = progress.bytesPerSecond.map { String(format: " at %.1f KiB/s", $0 / 1024) } ?? ""
                print("uploaded \(progress.totalBytesSent) of \(progress.totalSize) bytes\(rate)")
            case .log(let entry) where entry.level >= .info:
                print("  \(entry.message)")
            case .completed, .failed, .cancelled:
                return
            default:
                break
            }
        }
    }
    let result = try await manager.upgrade(
        try McuMgrPackage(url: URL(fileURLWithPath: arguments[2])),
        configuration: FirmwareUpgradeConfiguration(upgradeMode: .testAndConfirm, estimatedSwapTime: swapTime))
    await printer.value
    print("uploaded images: \(result.summary.uploadedImages), \(result.bytesSent) bytes in \(result.duration)")
    for slot in result.finalImages {
        print("image \(slot.image) slot \(slot.slot): \(slot.version) active=\(slot.active) confirmed=\(slot.confirmed)")
    }
    await client.close()
} catch {
    print("upgrade failed: \(error)")
    await client.close()
    exit(1)
}
