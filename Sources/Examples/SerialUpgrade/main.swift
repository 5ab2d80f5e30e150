// Firmware upgrade of a board on USB serial, following its port across the reset:
//     example-serial-upgrade /dev/ttyACM0 app_update.bin [SWAP_SECONDS]
import Foundation
import McuManager
import McuMgrSerial

let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4 else {
    print("usage: example-serial-upgrade PORT PACKAGE(.bin|.zip|.suit) [SWAP_SECONDS]")
    exit(64)
}
let port = arguments[1]
let swapTime = Duration.seconds(arguments.count == 4 ? Double(arguments[3]) ?? 8 : 8)

let transport = SerialTransport(configuration: .init(path: port, baudRate: 115_200))
let client = McuMgrClient(transport: transport)
// The board's own USB leaves the bus when it resets: wait for the port to come back, then reopen it.
let manager = FirmwareUpgradeManager(client: client, reconnection: .reopen(waitingForPath: port))
let events = manager.events()  // subscribe before starting
let printer = Task {
    for await event in events {
        switch event {
        case .stateChanged(_, let to):
            print("state:", to)
        case .uploadProgress(let progress):
            let percent = progress.totalSize > 0 ? 100 * progress.totalBytesSent / progress.totalSize : 100
            let rate = progress.bytesPerSecond.map { String(format: ", %.1f KiB/s", $0 / 1024) } ?? ""
            print("upload \(percent)%\(rate)")
        case .failed(let state, let error):
            print("failed in state \(state): \(error)")
            return
        case .completed, .cancelled:
            return
        default:
            break
        }
    }
}
do {
    let package = try McuMgrPackage(url: URL(fileURLWithPath: arguments[2]))
    let result = try await manager.upgrade(
        package, configuration: FirmwareUpgradeConfiguration(upgradeMode: .testAndConfirm, estimatedSwapTime: swapTime))
    await printer.value
    for image in result.images {
        print("image \(image.image): \(image.fileName) \(image.uploaded ? "uploaded" : "already there")")
    }
    for slot in result.finalImages where slot.active {
        print("running: image \(slot.image) version \(slot.version), confirmed=\(slot.confirmed)")
    }
    await client.close()
} catch {
    printer.cancel()
    print("upgrade failed: \(error)")
    await client.close()
    exit(1)
}
