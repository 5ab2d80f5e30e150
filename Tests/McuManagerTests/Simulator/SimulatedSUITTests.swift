import Foundation
import McuManager
import McuMgrCore
import Testing
import TestSupport

@testable import McuMgrSimulator

/// The SUIT device: group 66 with raw requests, the image-group view, and envelopes `McuMgrPackage` reads.
@Suite("Simulated device: SUIT")
struct SimulatedSUITTests {
    static let suit = McuMgrGroup(rawValue: 66)

    static func device(_ configure: (inout SimulatorConfiguration) -> Void = { _ in }) -> SimulatedDevice {
        var configuration = SimulatorConfiguration()
        configuration.suit = SimulatedSUITConfiguration()
        configure(&configuration)
        return SimulatedDevice(configuration: configuration)
    }

    /// Uploads `data` with a SUIT upload command; `first` adds the first chunk's own keys.
    @discardableResult
    static func upload(
        _ data: [UInt8], to device: SimulatedDevice, command: UInt8, group: McuMgrGroup = suit, chunk: Int = 700,
        first: [CBORMapEntry] = []
    ) throws -> SimResponse {
        var offset = 0
        var last: SimResponse?
        while offset < data.count {
            var body: [CBORMapEntry] = .entries([
                "off": .unsigned(UInt64(offset)), "data": .bytes(Array(data[offset..<min(offset + chunk, data.count)])),
            ])
            if offset == 0 { body += first + .entries(["len": .unsigned(UInt64(data.count))]) }
            let response = try exchange(device, .write, group: group, command: command, body: .map(body))
            try #require(response.rc == 0 || (group == .image && response.body["err"] == nil), "upload failed at \(offset): \(response.body)")
            offset = try #require(response["off"]?.int)
            last = response
        }
        return try #require(last)
    }

    static func poll(_ device: SimulatedDevice) throws -> SimResponse {
        try exchange(device, .read, group: suit, command: 3)
    }

    @Test func bootloaderInfoAndRC() throws {
        let device = Self.device()
        let info = try exchange(device, .read, group: .os, command: 8)
        #expect(info["bootloader"]?.string == "SUIT" && info.rc == 0)
        #expect(try exchange(device, .read, group: .os, command: 8, body: ["query": "mode"]).rc == 8)
        #expect(try exchange(device, .read, group: .os, command: 0, body: ["d": "x"]).rc == 0)
        let groups = try #require(try exchange(device, .read, group: .enumeration, command: 1)["groups"]?.arrayValue)
        #expect(groups.contains(66))
        // An MCUboot device has no group 66.
        #expect(try exchange(SimulatedDevice(), .read, group: Self.suit, command: 0).rc == 8)
    }

    @Test func manifestsAndState() throws {
        let device = Self.device()
        let manifests = try #require(try exchange(device, .read, group: Self.suit, command: 0)["manifests"]?.arrayValue)
        #expect(manifests.compactMap { $0["role"]?.int } == [0x10, 0x11, 0x20, 0x22])
        let root = try exchange(device, .read, group: Self.suit, command: 1, body: ["role": 0x20])
        #expect(root.rc == 0 && root["sequence_number"]?.int == 1 && root["digest_algorithm"]?.int == -16)
        #expect(root["class_id"]?.byteString?.count == 16 && root["vendor_id"]?.byteString?.count == 16)
        #expect(root["digest"]?.byteString?.count == 32)
        #expect(try exchange(device, .read, group: Self.suit, command: 1, body: ["role": 0x77]).rc == 5)
    }

    @Test func envelopeThenRequestedResourceInstallsAndReboots() throws {
        let device = Self.device { $0.swapTime = .seconds(2) }
        let events = ResetEventBox()
        device.setResetObserver { events.add($0) }
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 2)
        #expect(try Self.poll(device).body == CBOR.map([CBORMapEntry(key: "rc", value: 0)]))
        try Self.upload(envelope.bytes, to: device, command: 2)
        // The integrated radio image is there; the application image is asked for.
        let poll = try Self.poll(device)
        let session = try #require(poll["stream_session_id"]?.uint64)
        #expect(poll["resource_id"]?.byteString == Array("file://app.bin".utf8))
        #expect(events.events.isEmpty)
        // A wrong session id is refused.
        let app = try #require(envelope.detachedResources["file://app.bin"])
        let wrong = try exchange(
            device, .write, group: Self.suit, command: 4,
            body: ["off": 0, "len": .unsigned(UInt64(app.count)), "stream_session_id": .unsigned(session + 7), "data": .bytes(Array(app[0..<100]))])
        #expect(wrong.rc == 6)
        try Self.upload(app, to: device, command: 4, first: .entries(["stream_session_id": .unsigned(session)]))
        // Everything arrived: installed at the reboot that follows at once.
        #expect(events.events.count == 1 && events.events[0].reason == .update && events.events[0].swapped)
        #expect(events.events[0].rebootingUntil == SMPInstant(nanoseconds: 2_300_000_000))
        let root = try #require(device.suitRootManifest)
        #expect(root.sequenceNumber == 2 && root.digest == envelope.digest)
        #expect(device.suitInstalledResources["file://app.bin"] == app)
        #expect(device.suitInstalledResources["#rad"] == envelope.resources[1].data)
        #expect(try exchange(device, .read, group: Self.suit, command: 1, body: ["role": 0x20])["sequence_number"]?.int == 2)
        // The same update again is a downgrade (sequence number not higher): refused after the upload.
        let last = try exchange(
            device, .write, group: Self.suit, command: 2,
            body: ["off": 0, "len": .unsigned(UInt64(envelope.bytes.count)), "data": .bytes(envelope.bytes)])
        #expect(last.rc == 11)
        // A newer one with the same app image needs nothing: installed at once.
        var next = envelope
        next.sequenceNumber = 3
        try Self.upload(next.bytes, to: device, command: 2)
        #expect(events.events.count == 2 && device.suitRootManifest?.sequenceNumber == 3)
    }

    @Test func cacheAndDeferredInstall() throws {
        let device = Self.device()
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 5)
        try Self.upload(envelope.bytes, to: device, command: 2, first: .entries(["defer_install": true]))
        #expect(try Self.poll(device)["stream_session_id"] == nil)
        let cache = SimulatedSUITEnvelope.cache(envelope.detachedResources)
        try Self.upload(cache, to: device, command: 5, first: .entries(["target_id": 0]))
        #expect(device.resetCount == 0)
        // Process the delivered envelope: the cache has the app image, so it installs.
        let process = try exchange(device, .write, group: Self.suit, command: 2, body: ["off": 0, "len": 0])
        #expect(process.rc == 0)
        #expect(device.resetCount == 1 && device.suitRootManifest?.sequenceNumber == 5)
        #expect(try exchange(device, .write, group: Self.suit, command: 5, body: ["off": 0, "len": 4, "target_id": 9, "data": .bytes([1, 2, 3, 4])]).rc == 3)
    }

    @Test func badResourceDigestAndCleanup() throws {
        let device = Self.device()
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 2, applicationSize: 1500)
        try Self.upload(envelope.bytes, to: device, command: 2)
        let session = try #require(try Self.poll(device)["stream_session_id"]?.uint64)
        let bad = [UInt8](repeating: 0xAB, count: 1500)
        let answer = try exchange(
            device, .write, group: Self.suit, command: 4,
            body: ["off": 0, "len": 1500, "stream_session_id": .unsigned(session), "data": .bytes(bad)])
        #expect(answer.rc == 9)
        #expect(try Self.poll(device)["stream_session_id"] == nil)
        #expect(device.suitRootManifest?.sequenceNumber == 1)
        // Cleanup drops a waiting candidate.
        try Self.upload(envelope.bytes, to: device, command: 2)
        #expect(try Self.poll(device)["stream_session_id"] != nil)
        #expect(try exchange(device, .write, group: Self.suit, command: 6).rc == 0)
        #expect(try Self.poll(device)["stream_session_id"] == nil)
        // A damaged envelope is refused.
        var damaged = envelope.bytes
        damaged[damaged.count / 2] ^= 0xFF
        let refused = try exchange(
            device, .write, group: Self.suit, command: 2,
            body: ["off": 0, "len": .unsigned(UInt64(damaged.count)), "data": .bytes(damaged)])
        #expect(refused.rc != 0)
    }

    @Test func imageGroupView() throws {
        let device = Self.device()
        var list = try SimulatedImageGroupTests.list(device)
        #expect(list.count == 1 && list[0]["version"]?.string == "1" && list[0]["active"] == true)
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 4)
        try Self.upload(envelope.bytes, to: device, command: 1, group: .image, first: .entries(["image": 0]))
        try Self.upload(SimulatedSUITEnvelope.cache(envelope.detachedResources), to: device, command: 1, group: .image, first: .entries(["image": 1]))
        list = try SimulatedImageGroupTests.list(device)
        #expect(list.count == 2 && list[1]["version"]?.string == "4" && list[1]["hash"]?.byteString == envelope.digest)
        #expect(list[1]["pending"] == true)
        #expect(device.resetCount == 0)
        let confirm = try exchange(device, .write, group: .image, command: 0, body: ["confirm": true])
        #expect(confirm.rc == 0)
        #expect(device.resetCount == 1 && device.suitRootManifest?.digest == envelope.digest)
        list = try SimulatedImageGroupTests.list(device)
        #expect(list.count == 1 && list[0]["version"]?.string == "4")
    }

    @Test func envelopeIsReadableByMcuMgrPackage() throws {
        let envelope = SimulatedSUITEnvelope.demo(sequenceNumber: 42)
        let package = try McuMgrPackage(data: Data(envelope.bytes), fileName: "root.suit")
        #expect(package.isSUIT)
        #expect(package.images.count == 1)
        #expect(package.images[0].hash == Data(envelope.digest))
        #expect(package.images[0].version == "42")
        #expect(envelope.resources[0].fileName == "app.bin")
        // The cache image is a CBOR map of URIs to bytes.
        let cache = try CBOR(decoding: SimulatedSUITEnvelope.cache(envelope.detachedResources))
        #expect(cache["file://app.bin"]?.byteString == envelope.resources[0].data)
    }

    @Test func suitOverTheInMemoryTransportGoesSilentWhileInstalling() async throws {
        let clock = ManualClock()
        let device = Self.device { $0.swapTime = .seconds(1); $0.resetDelay = .zero; $0.bootTime = .zero }
        let transport = InMemorySimulatorTransport(device: device, clock: { clock.instant })
        let events = EventCollector()
        try await transport.open { events.add($0) }
        let envelope = SimulatedSUITEnvelope(
            sequenceNumber: 2, resources: [.init(component: "app", uri: "#app", data: [1, 2, 3])])
        try transport.send(
            smpRequest(.write, group: Self.suit, command: 2, body: ["off": 0, "len": .unsigned(UInt64(envelope.bytes.count)), "data": .bytes(envelope.bytes)]))
        await events.waitForPackets(1)
        try transport.send(smpRequest(.read, group: Self.suit, command: 3))
        await waitUntil { transport.handledRequests == 2 }
        #expect(events.packets.count == 1)  // installing: no answer to the poll
        clock.advance(to: .seconds(1))
        try transport.send(smpRequest(.read, group: Self.suit, command: 3))
        await events.waitForPackets(2)
        await transport.close()
    }
}
