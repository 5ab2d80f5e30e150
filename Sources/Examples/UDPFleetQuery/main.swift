// Asks many networked devices at once what they run:
//     example-udp-fleet udp:192.0.2.7 udp:192.0.2.8:1337 udp:[2001:db8::7]
import Foundation
import McuManager
import McuMgrUDP

/// What one device said, or why it said nothing.
struct DeviceReport: Sendable {
    var address: String
    var line: String
    var answered: Bool
}

func query(_ address: String) async -> DeviceReport {
    let uri: McuMgrDeviceURI
    do {
        uri = try McuMgrDeviceURI(parsing: address)
        guard uri.scheme == .udp else { throw McuMgrError(.usage, "\(address) is not a udp: address") }
    } catch {
        return DeviceReport(address: address, line: "\(error)", answered: false)
    }
    let transport = UDPTransport(configuration: .init(host: uri.target, port: uri.port ?? 1337))
    // A fleet query should not wait 10 s for each device that is off: 2 s per request.
    let client = McuMgrClient(transport: transport, configuration: .init(timeout: .seconds(2)))
    let report: DeviceReport
    do {
        let os = DefaultManager(client: client)
        let clock = ContinuousClock()
        let start = clock.now
        _ = try await os.echo("ping")
        let roundTrip = (clock.now - start) / .milliseconds(1)
        let parameters = try await os.mcuMgrParameters()
        let running = try await ImageManager(client: client).list().images.filter(\.active)
        let images = running.map { "image \($0.image) \($0.version)\($0.confirmed ? "" : " (not confirmed)")" }
        let line = String(format: "echo %.1f ms", roundTrip)
            + ", buffers \(parameters.bufferCount) x \(parameters.bufferSize) B, " + images.joined(separator: ", ")
        report = DeviceReport(address: address, line: line, answered: true)
    } catch {
        report = DeviceReport(address: address, line: "\(error)", answered: false)
    }
    await client.close()
    return report
}

let addresses = Array(CommandLine.arguments.dropFirst())
guard !addresses.isEmpty else {
    print("usage: example-udp-fleet udp:HOST[:PORT] ...")
    exit(64)
}
// All devices at once; the report in the order given.
let reports = await withTaskGroup(of: (Int, DeviceReport).self) { group in
    for (index, address) in addresses.enumerated() { group.addTask { (index, await query(address)) } }
    var reports: [(Int, DeviceReport)] = []
    for await report in group { reports.append(report) }
    return reports.sorted { $0.0 < $1.0 }.map(\.1)
}
for report in reports {
    print("\(report.address)  \(report.answered ? "ok" : "FAILED")  \(report.line)")
}
exit(reports.allSatisfy(\.answered) ? 0 : 1)
