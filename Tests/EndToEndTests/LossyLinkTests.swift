import Foundation
import Testing

/// `smp` over links that lose data: every transfer completes and verifies, or fails clearly in time.
@Suite("Lossy links", .serialized)
struct LossyLinkTests {
    /// A 1 MiB image upload through a UDP path that loses 10 % of the datagrams each way.
    @Test func aMebibyteImageUploadThroughTenPercentLossCompletesAndVerifies() async throws {
        try TestEnvironment.requireBinaries()
        let (data, hash) = try DFUPackages.image(size: 1 << 20, seed: 10)
        try await withSimulator(.udp, extraArguments: ["--slot-size", String(0x120000)]) { session in
            let file = try DFUPackages.write(data, "big.bin", in: session.directory)
            let devicePort = try #require(session.sim.udpEndpoints.first?.port)
            let proxy = try LossyUDPProxy(devicePort: devicePort, lossRate: 0.10, seed: 42)
            defer { proxy.stop() }
            let upload = try await ProcessRunner.run(
                TestEnvironment.smp,
                ["--device", "udp:127.0.0.1:\(proxy.port)", "--json", "image", "upload", file], timeout: 300)
            #expect(upload.status == 0, "\(upload)")
            #expect(proxy.dropped > 50, "the path lost \(proxy.dropped) of \(proxy.dropped + proxy.forwarded) datagrams")
            // The device (asked directly) holds exactly the uploaded image in the second slot.
            let slots = try await session.imageList()
            #expect(slots.contains { $0.slot == 1 && $0.hash == hex(hash) }, "\(slots)")
        }
    }
}
