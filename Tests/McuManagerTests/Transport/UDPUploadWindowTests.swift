import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import McuMgrUDP
import Testing

/// `smp image upload` and `smp dfu` over UDP ask one authority (`LinkLimits.window`) how many chunks go
/// in flight, and get one answer on the same device: Zephyr's UDP transport takes `buf_count / 2`
/// (before, the firmware upgrade took `buf_count - 1`, past the buffers of a device with four).
@Suite("UDP: image upload and firmware upgrade windows")
struct UDPUploadWindowTests {
    /// Wraps a transport and counts the image upload requests in flight: sent, by sequence number (a resend
    /// is the same request), and not yet answered.
    final class UploadsInFlight: McuMgrTransport, @unchecked Sendable {
        let inner: any McuMgrTransport
        private let state = ManagerTestBox((outstanding: Set<UInt8>(), most: 0, sent: 0))

        init(_ inner: any McuMgrTransport) { self.inner = inner }

        var name: String { inner.name }
        var linkLimits: LinkLimits { inner.linkLimits }
        /// The most image upload requests in flight at once.
        var most: Int { state.current.most }
        /// Image upload requests sent (resends included).
        var sent: Int { state.current.sent }

        static func isUpload(_ header: SMPHeader) -> Bool {
            header.group == .image && header.command == McuMgrCommand.Image.upload
        }

        func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
            try await inner.open { [state] event in
                if case .packet(let bytes) = event, let header = try? SMPHeader(decoding: bytes), Self.isUpload(header) {
                    _ = state.withValue { $0.outstanding.remove(header.sequence) }
                }
                handler(event)
            }
        }

        func send(_ packet: [UInt8]) throws {
            if let header = try? SMPHeader(decoding: packet), Self.isUpload(header) {
                state.withValue {
                    $0.outstanding.insert(header.sequence)
                    $0.most = max($0.most, $0.outstanding.count)
                    $0.sent += 1
                }
            }
            try inner.send(packet)
        }

        func close() async { await inner.close() }
    }

    @Test(arguments: [(bufferCount: 2, window: 1), (bufferCount: 4, window: 2)])
    func imageUploadAndFirmwareUpgradeKeepTheSameChunksInFlight(bufferCount: Int, window: Int) async throws {
        var configuration = SimulatorConfiguration()
        configuration.bufferCount = bufferCount
        let device = SimulatedDevice(configuration: configuration)
        // Answers 20 ms late: every window fills before its first answer comes back.
        let frontEnd = UDPFrontEnd(device: device, host: "127.0.0.1", port: 0, latency: .milliseconds(20))
        let port = try #require(try await frontEnd.start().port)
        func connect() -> (UploadsInFlight, McuMgrClient) {
            // A fixed resend timeout far above the 20 ms round trip: the window is the subject here. On a
            // loaded machine the simulator (on the same cores) can answer later than a timeout measured
            // from its round trips; a resend then halves the window, or a chunk sent again as a new
            // request counts twice as in flight.
            let link = UploadsInFlight(UDPTransport(configuration: .init(host: "127.0.0.1", port: port, retransmitInterval: .seconds(5))))
            return (link, McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10))))
        }

        // `smp image upload`: the image manager's upload.
        let (uploadLink, uploadClient) = connect()
        let file = ImageManagerTests.image(kib: 32)
        let uploaded = try await ImageManager(client: uploadClient).upload(data: Data(file))
        let uploadWindow = await uploadClient.linkLimits.window
        await uploadClient.close()

        // `smp dfu`: another image, upload only (the window is the upload's), on a new connection.
        let (dfuLink, dfuClient) = connect()
        let image = DFUFixtures.image(version: McuMgrImageVersion(major: 3, minor: 0), size: 32 * 1024, seed: 5)
        let manager = FirmwareUpgradeManager(client: dfuClient, options: DFUFixtures.options)
        let upgraded = try await manager.upgrade(images: [image], configuration: DFUFixtures.configuration(.uploadOnly))
        await dfuClient.close()
        await frontEnd.stop()

        #expect(uploaded.pipelineDepth == window)
        #expect(uploadWindow == window)
        #expect(upgraded.images.first?.uploaded == true)
        #expect(device.slot(holding: image.hash)?.slot == 1)
        // Both sent many chunks, never more in flight than the one window, and filled it.
        #expect(uploadLink.sent > 10 && dfuLink.sent > 10)
        #expect(uploadLink.most == window, "image upload: \(uploadLink.most) in flight")
        #expect(dfuLink.most == window, "firmware upgrade: \(dfuLink.most) in flight")
    }
}
