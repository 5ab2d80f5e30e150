// Asks many networked devices at once what they run, with McuMgrFleet (one session per device, at most
// 8 at a time; a device that is off fails on its own, without holding up the others):
//     example-udp-fleet udp:192.0.2.7 udp:192.0.2.8:1337 udp:[2001:db8::7]
import Foundation
import McuManager
import McuMgrUDP

let addresses = Array(CommandLine.arguments.dropFirst())
guard !addresses.isEmpty else {
    print("usage: example-udp-fleet udp:HOST[:PORT] ...")
    exit(64)
}
let devices = addresses.map { address in
    McuMgrFleet.Device(name: address) {
        let uri = try McuMgrDeviceURI(parsing: address)
        guard uri.scheme == .udp else { throw McuMgrError(.usage, "\(address) is not a udp: address") }
        return UDPTransport(configuration: .init(host: uri.target, port: uri.port ?? 1337))
    }
}
// A fleet query should not wait 10 s for each device that is off: 2 s per request.
let fleet = McuMgrFleet(devices: devices, configuration: .init(maximumParallel: 8, client: .init(timeout: .seconds(2))))
let results = await fleet.run { session in
    let os = DefaultManager(client: session.client)
    let clock = ContinuousClock()
    let start = clock.now
    _ = try await os.echo("ping")
    let roundTrip = (clock.now - start) / .milliseconds(1)
    let parameters = try await os.mcuMgrParameters()
    let running = try await ImageManager(client: session.client).list().images.filter(\.active)
    let images = running.map { "image \($0.image) \($0.version)\($0.confirmed ? "" : " (not confirmed)")" }
    return String(format: "echo %.1f ms", roundTrip)
        + ", buffers \(parameters.bufferCount) x \(parameters.bufferSize) B, " + images.joined(separator: ", ")
}
// One result per device, in the order given.
for result in results {
    switch result.result {
    case .success(let line): print("\(result.device)  ok  \(line)")
    case .failure(let error): print("\(result.device)  FAILED  \(error)")
    }
}
exit(results.allSatisfy(\.succeeded) ? 0 : 1)
