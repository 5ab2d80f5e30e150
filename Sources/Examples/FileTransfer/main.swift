// Sends a file to the device's file system and reads it back, with progress, over serial (local or remote) or UDP:
//     example-file-transfer serial:/dev/ttyACM0 settings.json /lfs1/settings.json
//     example-file-transfer udp:192.0.2.7 settings.json /lfs1/settings.json
//     example-file-transfer rfc2217://192.0.2.9:2001 settings.json /lfs1/settings.json   (a remote port: ser2net)
import Foundation
import McuManager
import McuMgrSerial
import McuMgrUDP

let arguments = CommandLine.arguments
guard arguments.count == 4, let uri = try? McuMgrDeviceURI(parsing: arguments[1]) else {
    print("usage: example-file-transfer serial:PORT|udp:HOST[:PORT]|tcp://HOST:PORT|rfc2217://HOST:PORT LOCAL_FILE /REMOTE/PATH")
    exit(64)
}
let transport: any McuMgrTransport
switch uri.scheme {
case .serial: transport = SerialTransport(configuration: .init(path: uri.target, baudRate: 115_200))
case .udp: transport = UDPTransport(configuration: .init(host: uri.target, port: uri.port ?? 1337))
case .tcp: transport = SerialTransport(configuration: .init(endpoint: .tcp(host: uri.target, port: uri.port ?? 0)))
case .rfc2217: transport = SerialTransport(configuration: .init(endpoint: .rfc2217(host: uri.target, port: uri.port ?? 0)))
default:
    print("this example speaks serial:, udp:, tcp: and rfc2217:, not \(uri.scheme):")
    exit(64)
}
let client = McuMgrClient(transport: transport)
let files = FileSystemManager(client: client)
let local = URL(fileURLWithPath: arguments[2])
let remote = arguments[3]

/// Prints a line per 25 % with the rate over the last seconds (none until the transfer has run long enough).
func progressPrinter(_ label: String) -> TransferProgressHandler {
    let reported = QuarterTracker()
    return { progress in
        let quarter = Int(progress.fractionCompleted * 4)
        guard reported.advance(to: quarter) else { return }
        let rate = progress.bytesPerSecond.map { String(format: " at %.1f KiB/s", $0 / 1024) } ?? ""
        print("\(label) \(quarter * 25)%: \(progress.bytesTransferred) of \(progress.totalBytes) bytes\(rate)")
    }
}

/// The last quarter printed, shared with the progress callback.
final class QuarterTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var last = -1
    func advance(to quarter: Int) -> Bool {
        lock.withLock {
            guard quarter > last else { return false }
            last = quarter
            return true
        }
    }
}

do {
    // The upload resumes a file an earlier, interrupted upload left on the device, then checks its hash.
    let sent = try await files.upload(local, to: remote, progress: progressPrinter("upload"))
    print("upload: \(sent.bytes) bytes, \(sent.verification)")
    // The download appears under its name only when complete and verified.
    let copy = FileManager.default.temporaryDirectory.appendingPathComponent("example-\(UUID().uuidString)")
    let received = try await files.download(remote, to: copy, progress: progressPrinter("download"))
    print("download: \(received.bytes) bytes, \(received.verification)")
    let same = try Data(contentsOf: copy) == Data(contentsOf: local)
    try? FileManager.default.removeItem(at: copy)
    print(same ? "the device holds the same bytes" : "the copy differs")
    await client.close()
    exit(same ? 0 : 1)
} catch {
    print("transfer failed: \(error)")
    await client.close()
    exit(1)
}
