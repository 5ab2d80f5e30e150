import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// The round-trip budget of transfers (the "Transfers" section of the FirmwareUpgrade article), checked by
/// counting what the simulated device receives: an upload to a known device sends its chunks and one
/// verification; the first contact adds `os params` (and, for a file long enough to gain from it, the
/// resume check: close, status and hash of what the device holds); a download sends its chunks and one hash.
@Suite struct RoundTripBudgetTests {
    /// What the device received, in order.
    final class Received: Sendable {
        private let box = ManagerTestBox<[SimulatedRequestRecord]>([])
        init(_ device: SimulatedDevice) {
            device.setRequestObserver { [box] record in box.withValue { $0.append(record) } }
        }
        /// How many requests `take` would return.
        var count: Int { box.withValue { $0.count } }
        /// The requests since the last call.
        func take() -> [SimulatedRequestRecord] { box.withValue { all in defer { all = [] }; return all } }
    }

    static func read(_ group: McuMgrGroup, _ command: UInt8) -> SimulatedRequestRecord {
        SimulatedRequestRecord(operation: .read, group: group, command: McuMgrCommand(rawValue: command))
    }
    static func write(_ group: McuMgrGroup, _ command: UInt8) -> SimulatedRequestRecord {
        SimulatedRequestRecord(operation: .write, group: group, command: McuMgrCommand(rawValue: command))
    }
    static let params = read(.os, 6)
    static let fileChunk = write(.fileSystem, 0)
    static let fileDownload = read(.fileSystem, 0)
    static let fileStatus = read(.fileSystem, 1)
    static let fileHash = read(.fileSystem, 2)
    static let fileClose = write(.fileSystem, 4)
    static let imageChunk = write(.image, 1)

    static func memory(in directory: URL) -> DeviceParametersMemory {
        DeviceParametersMemory(file: directory.appendingPathComponent("device-params.json"))
    }

    /// 16 chunks of 256 bytes: more than `resumeCheckMinimumChunks`, so a first contact checks for a resume.
    static let chunked = UploadConfiguration(maximumChunkSize: 256)

    @Test func fileUploadFirstContactThenKnownDevice() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        let first = ManagerRig(parametersMemory: memory) { $0.bufferSize = 2048 }
        let received = Received(first.device)
        let bytes = managerTestBytes(4096, seed: 5)
        let local = try FileSystemManagerTests.writeLocal(bytes, in: directory)

        let upload = try await FileSystemManager(client: first.client).upload(local, to: "/lfs1/a.bin", configuration: Self.chunked)
        #expect(upload.verification == .sha256)
        #expect(received.take() == [Self.fileClose, Self.fileStatus, Self.params] + Array(repeating: Self.fileChunk, count: 16) + [Self.fileHash])
        #expect(memory.recall("sim:") == .init(bufferSize: 2048, bufferCount: 4))

        // The same device again, in a new connection: the chunks and the hash, nothing else. Other bytes
        // to the same path, and the same bytes again (no resume check: this path was finished).
        for seed: UInt64 in [6, 6] {
            let again = ManagerRig(device: first.device, parametersMemory: memory)
            let other = managerTestBytes(4096, seed: seed)
            let url = try FileSystemManagerTests.writeLocal(other, in: directory, name: "other.bin")
            let result = try await FileSystemManager(client: again.client).upload(url, to: "/lfs1/a.bin", configuration: Self.chunked)
            #expect(result.verification == .sha256)
            #expect(first.device.file("/lfs1/a.bin") == other)
            #expect(received.take() == Array(repeating: Self.fileChunk, count: 16) + [Self.fileHash])
        }

        // Without a memory (a library user's transport, SMP_NO_CACHE) every upload is a first contact.
        let forgetful = ManagerRig(device: first.device)
        _ = try await FileSystemManager(client: forgetful.client).upload(local, to: "/lfs1/b.bin", configuration: Self.chunked)
        #expect(received.take() == [Self.fileClose, Self.fileStatus, Self.params] + Array(repeating: Self.fileChunk, count: 16) + [Self.fileHash])
    }

    /// An upload that was interrupted is resumed on the known device: the resume check runs for the path
    /// it left unfinished, and only the rest is sent.
    @Test func anInterruptedUploadIsResumedOnAKnownDevice() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        let first = ManagerRig(parametersMemory: memory) { $0.bufferSize = 2048 }
        let received = Received(first.device)
        // Known device: a finished upload first.
        let small = try FileSystemManagerTests.writeLocal(managerTestBytes(100, seed: 1), in: directory, name: "small.bin")
        _ = try await FileSystemManager(client: first.client).upload(small, to: "/lfs1/small.bin", configuration: Self.chunked)
        _ = received.take()

        // The link goes away when the sixth chunk is sent: the device holds the first five.
        let bytes = managerTestBytes(4096, seed: 7)
        let local = try FileSystemManagerTests.writeLocal(bytes, in: directory)
        let broken = ManagerRig(device: first.device, parametersMemory: memory)
        broken.tap.rule.withValue {
            $0 = { packet in
                packet.header.group == .fileSystem && packet.header.command.rawValue == 0
                    && (smpBody(packet)["off"]?.int ?? 0) >= 5 * 256 ? .closeLink : .forward(packet.bytes)
            }
        }
        await #expect(throws: McuMgrError.self) {
            _ = try await FileSystemManager(client: broken.client).upload(local, to: "/lfs1/a.bin", configuration: Self.chunked)
        }
        // The device handles the chunks that went before the link closed after the client saw it close.
        let forwarded = broken.tap.sent.filter { $0.header.group == .fileSystem }.count
        #expect(await waitUntil { received.count >= forwarded })
        #expect(received.take() == Array(repeating: Self.fileChunk, count: 5))
        #expect(memory.hasUnfinishedUpload(of: "/lfs1/a.bin", to: "sim:"))

        let again = ManagerRig(device: first.device, parametersMemory: memory)
        let result = try await FileSystemManager(client: again.client).upload(local, to: "/lfs1/a.bin", configuration: Self.chunked)
        #expect(result.resumedFrom == 5 * 256)
        #expect(result.verification == .sha256)
        #expect(first.device.file("/lfs1/a.bin") == bytes)
        // Close, status and hash of the five chunks; the other eleven; then the device's copy is closed
        // and checked (an upload that did not start at offset 0 leaves the file open on Zephyr).
        #expect(received.take()
            == [Self.fileClose, Self.fileStatus, Self.fileHash] + Array(repeating: Self.fileChunk, count: 11)
            + [Self.fileClose, Self.fileStatus, Self.fileHash])
        #expect(!memory.hasUnfinishedUpload(of: "/lfs1/a.bin", to: "sim:"))

        // Sent again as a whole: the device holds all of it, and the resume check's hash is its verification.
        let broken2 = ManagerRig(device: first.device, parametersMemory: memory)
        memory.beginUpload(of: "/lfs1/a.bin", bytes: bytes.count, to: "sim:")
        let whole = try await FileSystemManager(client: broken2.client).upload(local, to: "/lfs1/a.bin", configuration: Self.chunked)
        #expect(whole.resumedFrom == bytes.count)
        #expect(whole.verification == .sha256)
        #expect(received.take() == [Self.fileClose, Self.fileStatus, Self.fileHash])
    }

    /// The device cache's record of an unfinished upload costs no time between answers: it goes while the
    /// hash that checks the upload is on its way (every byte is on the device by then), not after its answer.
    @Test func theRecordOfAnUnfinishedUploadGoesWhileTheHashIsOnItsWay() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        let rig = ManagerRig(parametersMemory: memory) { $0.bufferSize = 2048 }
        let received = Received(rig.device)
        let local = try FileSystemManagerTests.writeLocal(managerTestBytes(4096, seed: 8), in: directory)
        // The device's answer to the hash waits for the test.
        rig.tap.holdAnswersUntilReleased(to: (.fileSystem, McuMgrCommand(rawValue: 2)))
        defer { rig.tap.releaseHeldAnswers() }
        let upload = Task { try await FileSystemManager(client: rig.client).upload(local, to: "/lfs1/r.bin", configuration: Self.chunked) }
        let hash = McuMgrCommand(rawValue: 2)
        #expect(await waitUntil { rig.tap.sent.contains { $0.header.group == .fileSystem && $0.header.command == hash } })
        #expect(await waitUntil { !memory.hasUnfinishedUpload(of: "/lfs1/r.bin", to: "sim:") })
        #expect(!rig.tap.received.contains { $0.header.group == .fileSystem && $0.header.command == hash }, "the hash is unanswered")
        rig.tap.releaseHeldAnswers()
        let result = try await upload.value
        #expect(result.verification == .sha256)
        #expect(received.take() == [Self.fileClose, Self.fileStatus, Self.params] + Array(repeating: Self.fileChunk, count: 16) + [Self.fileHash])
        #expect(!memory.hasUnfinishedUpload(of: "/lfs1/r.bin", to: "sim:"))
    }

    /// A download long enough to gain from a pipeline asks a new device for its buffers once, then keeps
    /// `buf_count - 1` requests in flight; a known device is not asked. The file arrives whole either way.
    @Test func aLongDownloadKeepsTheDevicesBuffersBusy() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let bytes = managerTestBytes(20_000, seed: 5)
        let memory = Self.memory(in: directory)
        for (run, expectParams) in [(1, true), (2, false)] {
            let rig = ManagerRig(parametersMemory: memory) {
                $0.bufferSize = 512
                $0.bufferCount = 4
                $0.initialFiles = ["/lfs1/long.bin": bytes]
            }
            let received = Received(rig.device)
            // The first read goes alone (it learns the file's length); the next ones fill the window.
            rig.tap.holdAnswers(to: (.fileSystem, McuMgrCommand(0)), passing: 1, untilInFlight: 3)
            let local = directory.appendingPathComponent("long-\(run).bin")
            let result = try await FileSystemManager(client: rig.client).download("/lfs1/long.bin", to: local)
            #expect(result.verification == .sha256)
            #expect(FileManager.default.contents(atPath: local.path).map(Array.init) == bytes)
            let requests = received.take()
            #expect(requests.contains(Self.params) == expectParams, "run \(run): \(requests.filter { $0 != Self.fileDownload })")
            #expect(requests.filter { $0 != Self.fileDownload && $0 != Self.params } == [Self.fileHash])
            #expect(rig.tap.maximumInFlight == 3, "run \(run)")
        }
        // A link that reorders the pieces of an answer (Bluetooth LE over EATT) takes one at a time: the
        // pieces of overlapping answers would mix.
        let reordering = ManagerRig(parametersMemory: memory) {
            $0.bufferSize = 512
            $0.initialFiles = ["/lfs1/long.bin": bytes]
        }
        reordering.tap.piecesArriveOutOfOrder.withValue { $0 = true }
        let local = directory.appendingPathComponent("long-eatt.bin")
        _ = try await FileSystemManager(client: reordering.client).download("/lfs1/long.bin", to: local)
        #expect(FileManager.default.contents(atPath: local.path).map(Array.init) == bytes)
        #expect(reordering.tap.maximumInFlight == 1)
    }

    @Test func fileDownloadSendsItsChunksAndOneHash() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let rig = ManagerRig(parametersMemory: Self.memory(in: directory)) {
            $0.bufferSize = 2048
            $0.initialFiles = ["/lfs1/d.bin": managerTestBytes(1000, seed: 3)]
        }
        let received = Received(rig.device)
        for _ in 0..<2 {
            let result = try await FileSystemManager(client: rig.client).download(
                "/lfs1/d.bin", to: directory.appendingPathComponent("d.bin"))
            #expect(result.verification == .sha256)
            #expect(received.take() == [Self.fileDownload, Self.fileHash])
        }
    }

    @Test func imageUploadFirstContactThenKnownDevice() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        let first = ManagerRig(parametersMemory: memory) { $0.bufferSize = 2048 }
        let received = Received(first.device)
        let image = ImageManagerTests.image(kib: 8)
        let configuration = UploadConfiguration(maximumChunkSize: 1024)
        _ = try await ImageManager(client: first.client).upload(data: Data(image), configuration: configuration)
        #expect(received.take() == [Self.params] + Array(repeating: Self.imageChunk, count: 8))

        try await ImageManager(client: first.client).erase(slot: 1)
        _ = received.take()
        let again = ManagerRig(device: first.device, parametersMemory: memory)
        let result = try await ImageManager(client: again.client).upload(data: Data(image), configuration: configuration)
        #expect(result.resumedFrom == 0)
        #expect(received.take() == Array(repeating: Self.imageChunk, count: 8))
    }

    /// Remembered buffers larger than the device's (other firmware at the same address): the first chunk
    /// goes unanswered, the device is asked, and the upload goes on under its real buffers.
    @Test func rememberedBuffersThatNoLongerHoldAreAskedAgain() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        memory.remember(.init(bufferSize: 2048, bufferCount: 4), for: "sim:")
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 512
        configuration.fileSystemBlockCount = nil
        // The link carries 2048-byte packets; the device stays silent to a request above its buffer.
        let rig = ManagerRig(device: SimulatedDevice(configuration: configuration), parametersMemory: memory, mtu: 2048)
        let received = Received(rig.device)
        let bytes = managerTestBytes(3000, seed: 9)
        let local = try FileSystemManagerTests.writeLocal(bytes, in: directory)
        let result = try await FileSystemManager(client: rig.client).upload(local, to: "/lfs1/a.bin")
        #expect(result.verification == .sha256)
        #expect(rig.device.file("/lfs1/a.bin") == bytes)
        let requests = received.take()
        #expect(requests.first == Self.params)
        #expect(requests.last == Self.fileHash)
        #expect(requests.dropFirst().dropLast().allSatisfy { $0 == Self.fileChunk })
        #expect(memory.recall("sim:") == .init(bufferSize: 512, bufferCount: 4))
    }

    /// A device without SHA-256 (Zephyr built with CRC-32 alone): the first transfer finds that out
    /// (a SHA-256 hash refused with FS error 13, then the list of types) and a known device is asked for
    /// CRC-32 at once; when the device no longer takes CRC-32, its types are found again.
    @Test func aDeviceWithoutSHA256IsAskedForCRC32AtOnceWhenKnown() async throws {
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let memory = Self.memory(in: directory)
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = 2048
        configuration.fileSystemBlockCount = nil
        configuration.initialFiles = ["/lfs1/d.bin": managerTestBytes(1000, seed: 4)]
        let device = SimulatedDevice(configuration: configuration)
        func connect(refusing refused: String) -> ManagerRig {
            let rig = ManagerRig(device: device, parametersMemory: memory)
            rig.tap.rule.withValue { rule in
                rule = { packet in
                    guard packet.header.group == .fileSystem else { return .forward(packet.bytes) }
                    switch packet.header.command.rawValue {
                    case 2 where smpBody(packet)["type"]?.string == refused:
                        return .reply(.textMap(["err": .textMap(["group": 8, "rc": 13])]))
                    case 3 where refused == "sha256":
                        return .reply(.textMap(["types": .textMap(["crc32": .textMap(["format": 0, "size": 4])])]))
                    default:
                        return .forward(packet.bytes)
                    }
                }
            }
            return rig
        }
        /// The file-system requests the client sent: command and hash type.
        func sent(_ rig: ManagerRig) -> [String] {
            rig.tap.sent.filter { $0.header.group == .fileSystem }.map { packet in
                "\(packet.header.command.rawValue)" + (smpBody(packet)["type"]?.string.map { " " + $0 } ?? "")
            }
        }
        let first = connect(refusing: "sha256")
        let result = try await FileSystemManager(client: first.client).download(
            "/lfs1/d.bin", to: directory.appendingPathComponent("1.bin"))
        #expect(result.verification == .crc32)
        #expect(sent(first) == ["0", "2 sha256", "3", "2 crc32"])
        #expect(memory.recallHashType(of: "sim:") == "crc32")

        let known = connect(refusing: "sha256")
        let again = try await FileSystemManager(client: known.client).download(
            "/lfs1/d.bin", to: directory.appendingPathComponent("2.bin"))
        #expect(again.verification == .crc32)
        #expect(sent(known) == ["0", "2 crc32"])

        // New firmware with SHA-256 alone: CRC-32 is refused, SHA-256 found and remembered.
        let changed = connect(refusing: "crc32")
        let third = try await FileSystemManager(client: changed.client).download(
            "/lfs1/d.bin", to: directory.appendingPathComponent("3.bin"))
        #expect(third.verification == .sha256)
        #expect(sent(changed) == ["0", "2 crc32", "2 sha256"])
        #expect(memory.recallHashType(of: "sim:") == "sha256")
    }
}
