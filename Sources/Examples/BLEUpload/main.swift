// Uploads a firmware image to a Bluetooth LE device through BlueZ, marks it for a test boot and resets:
//     example-ble-upload ble:AA:BB:CC:DD:EE:FF app_update.bin
//     example-ble-upload "ble:name=my board?adapter=hci1" app_update.bin
import Foundation
import McuManager
import McuMgrBLE

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: example-ble-upload ble:ADDRESS|ble:name=NAME[?adapter=hciN] IMAGE.bin")
    exit(64)
}
do {
    let transport = try McuMgrBleTransport(uri: McuMgrDeviceURI(parsing: arguments[1]))
    let client = McuMgrClient(transport: transport)
    let images = ImageManager(client: client)
    let file = URL(fileURLWithPath: arguments[2])
    let image = try McuMgrImage(contentsOf: file)  // checks the MCUboot header and TLVs, reads the hash
    print("uploading version \(image.version), hash \(image.hash.map { String(format: "%02x", $0) }.joined())")
    let upload = try await images.upload(file: file) { progress in
        let rate = progress.bytesPerSecond.map { String(format: " at %.1f KiB/s", $0 / 1024) } ?? ""
        print("\(progress.bytesTransferred) of \(progress.totalBytes) bytes\(rate)")
    }
    print("uploaded in \(upload.duration), \(upload.chunkSize)-byte chunks, \(upload.pipelineDepth) in flight")
    // Test boot: the device runs the new image after the reset, and reverts unless it is confirmed.
    for slot in try await images.test(hash: image.hash).images {
        print("image \(slot.image) slot \(slot.slot): \(slot.version) pending=\(slot.pending) active=\(slot.active)")
    }
    try await DefaultManager(client: client).reset()
    print("reset: the device boots the new image once")
    await client.close()
} catch {
    print("upload failed: \(error)")
    exit(1)
}
