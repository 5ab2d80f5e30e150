import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing

/// The DocC articles' examples (Sources/McuManager/McuManager.docc), run as written against the
/// simulated device, with the articles' imports: when the API changes, these break first.
@Suite("Documentation examples")
struct DocumentationExampleTests {
    @Test("Getting started: echo, parameters, image list, a device error")
    func gettingStarted() async throws {
        let transport = InMemorySimulatorTransport(device: SimulatedDevice())
        let client = McuMgrClient(transport: transport)

        let os = DefaultManager(client: client)
        #expect(try await os.echo("hello") == "hello")
        let params = try await os.mcuMgrParameters()
        #expect(params.bufferSize > 0 && params.bufferCount > 0)

        let images = ImageManager(client: client)
        let slots = try await images.list().images
        #expect(slots.contains { $0.slot == 0 && $0.active && $0.confirmed })

        do {
            _ = try await StatsManager(client: client).read(group: "no_such_group")
            Issue.record("reading an unknown statistics group succeeded")
        } catch let error as McuMgrError where error.kind == .device {
            #expect(error.groupError?.name == "INVALID_STAT_NAME", "\(error)")
        }
        await client.close()
    }

    @Test("The simulated device: two images")
    func simulator() async throws {
        var configuration = SimulatorConfiguration()
        configuration.imageCount = 2
        let device = SimulatedDevice(configuration: configuration)
        let client = McuMgrClient(transport: InMemorySimulatorTransport(device: device))
        let images = try await ImageManager(client: client).list().images
        #expect(Set(images.map(\.image)) == [0, 1], "\(images)")
        await client.close()
    }

    @Test("Firmware upgrade: test and confirm an image built in memory, following the events")
    func firmwareUpgrade() async throws {
        let version = McuMgrImageVersion(major: 1, minor: 1)
        let built = try McuMgrImageBuilder(version: version).image(body: Data(repeating: 0x5A, count: 16 * 1024))
        let file = McuMgrPackage.Image(
            image: 0, contentType: .mcubootImage, hash: built.hash, version: version.description, data: built.data,
            fileName: "app_update.bin")

        let client = McuMgrClient(transport: InMemorySimulatorTransport(device: SimulatedDevice()))
        let manager = FirmwareUpgradeManager(client: client, reconnection: .reopen)
        let events = manager.events()
        let seen = Task { await events.reduce(0) { count, _ in count + 1 } }
        let result = try await manager.upgrade(
            images: [file],
            configuration: FirmwareUpgradeConfiguration(
                upgradeMode: .testAndConfirm, estimatedSwapTime: .milliseconds(100), resetDelay: .milliseconds(320),
                reconnectTimeout: .seconds(10), retryInterval: .milliseconds(100)))
        let running = result.finalImages.first { $0.image == 0 && $0.active }
        #expect(running?.hash == built.hash && running?.confirmed == true, "\(result.finalImages)")
        seen.cancel()
        #expect(await seen.value > 0, "no events")
        await client.close()
    }
}
