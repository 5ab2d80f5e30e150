import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import TestSupport
import Testing

/// Uploads and downloads against `ZephyrFileSystemModel`: the behaviour measured on Zephyr 4.4.0.
@Suite struct ExactFileTransferTests {
    struct Rig {
        let rig = ManagerRig()
        let model = ZephyrFileSystemModel()
        let client: McuMgrClient
        let directory: URL

        init(timeout: Duration = .seconds(10)) throws {
            model.install(on: rig.tap)
            // Lost answers are resent by the session with the same sequence number (as over UDP): the
            // model handles the repeated write as Zephyr does. The link reports each lost answer
            // (`ManagerTapAction.loseAnswer`) and the session resends at once; no resend timer runs (its
            // interval is past every request's deadline), so an answer late on a loaded machine is not
            // resent and every count below is the same on every machine. The timer's part (a resend
            // after the interval) is tested in virtual time by `UploadTimingTests`.
            client = McuMgrClient(
                transport: rig.tap,
                configuration: .init(
                    timeout: timeout,
                    session: SMPSessionConfiguration(window: 1, retransmitInterval: .seconds(3600), maximumRetransmits: 5)))
            directory = try makeManagerTestDirectory()
        }

        func local(_ bytes: [UInt8], name: String = "local.bin") throws -> URL {
            let url = directory.appendingPathComponent(name)
            try Data(bytes).write(to: url)
            return url
        }

        var manager: FileSystemManager { FileSystemManager(client: client) }
        var uploads: [SMPPacket] {
            rig.tap.sent.filter { $0.header.group == .fileSystem && $0.header.command.rawValue == 0 && $0.header.operation == .write }
        }
        var commands: [UInt8] { rig.tap.sent.filter { $0.header.group == .fileSystem }.map { $0.header.command.rawValue } }
    }

    static let quick = UploadConfiguration(
        pipelineDepth: 1, maximumChunkSize: 300, firstChunkTimeout: .seconds(5), chunkTimeout: .seconds(5))

    @Test func aLostAnswerInTheMiddleEndsWithTheWholeFileCommitted() async throws {
        // The answer to the third chunk is lost: the chunk goes again, the device answers FS error 11 with
        // its length and forgets the file's length, so the file stays open after the last chunk; the
        // device's stat and hash then show only what was committed before (2914 of 4096 in the report).
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        r.model.loseAnswer = { _, count in count == 3 }
        let bytes = managerTestBytes(4096, seed: 21)
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/a.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(result.bytes == 4096)
        #expect(r.model.file("/lfs1/a.bin") == bytes)
        #expect(!r.model.isFileOpen)
        #expect(r.model.offsetErrors == 1)
        // Closed before the length and hash are asked for.
        let commands = r.commands
        let lastWrite = try #require(commands.lastIndex(of: 0))
        let close = try #require(commands[lastWrite...].firstIndex(of: 4))
        #expect(commands[close...].contains(1))
        #expect(commands[close...].contains(2))
    }

    @Test func aShortUploadIsItsChunksAndOneHash() async throws {
        // 7 chunks of 300 bytes: no close, length or resume check first; the device closed the file at its
        // length, so one SHA-256 of the whole file settles it.
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(2000, seed: 30)
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/short.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/short.bin") == bytes)
        #expect(!r.model.isFileOpen)
        #expect(r.commands == Array(repeating: 0, count: 7) + [2], "\(r.commands)")
    }

    @Test func aLongUploadChecksForTheDevicesCopyFirst() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(2700, seed: 31)  // 9 chunks of 300
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/long.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/long.bin") == bytes)
        #expect(r.commands == [4, 1] + Array(repeating: 0, count: 9) + [2], "\(r.commands)")
    }

    @Test func aLostAnswerToTheLastChunkIsTheWholeFile() async throws {
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(1000, seed: 22)
        r.model.loseAnswer = { offset, count in offset > 0 && count == 4 }
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/last.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/last.bin") == bytes)
    }

    @Test func aRepeatedFirstChunkThatWasAppendedStartsTheUploadAgain() async throws {
        // Zephyr appends a repeated offset-0 chunk while the new file is open (measured: 60 + 60 -> off 120).
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(3000, seed: 23)
        r.model.loseAnswer = { _, count in count == 1 }
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/first.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/first.bin") == bytes)
        let firstChunks = r.uploads.filter { smpBody($0)["off"]?.int == 0 }
        #expect(firstChunks.count == 3)  // sent, repeated (appended), and again after a close
    }

    @Test func aFirstChunkAppendedAgainAfterTheRestartStartsOnceMore() async throws {
        // At 10% loss each way one first chunk in ten loses its answer: two in a row must not fail the upload.
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(3000, seed: 33)
        r.model.loseAnswer = { offset, count in offset == 0 && (count == 1 || count == 3) }
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/twice.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/twice.bin") == bytes)
        let firstChunks = r.uploads.filter { smpBody($0)["off"]?.int == 0 }
        #expect(firstChunks.count == 5)  // twice sent, repeated (appended) and closed; then once
    }

    @Test func aFirstChunkTakenTwiceWhoseCopyWasAppendedIsFoundAndSentAgain() async throws {
        // A late or duplicated copy of the first chunk reaches the device after the original: Zephyr appends
        // it to the new file it has open, answers the next chunk with FS error 11 and `len` = both copies,
        // which looks like that chunk's acknowledgement (the chunks have the same length). But the device
        // refused that chunk, sent once: the bytes it holds at its offset are not this upload's. The upload
        // closes the file and sends it again from offset 0 (which truncates it) at once, before any hash.
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(1500, seed: 32)  // 5 chunks: no resume check, one hash at the end
        r.model.duplicateWrite = { offset, count in offset == 0 && count == 1 }
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/dup.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/dup.bin") == bytes)
        #expect(r.model.offsetErrors == 1)
        let firstChunks = r.uploads.filter { smpBody($0)["off"]?.int == 0 }
        #expect(firstChunks.count == 2, "sent, and again after the refused second chunk")
        // The first chunk, the refused second one, a close, the five chunks again; then the close, length
        // and hash of an upload that started over. No hash of the corrupted copy.
        #expect(r.commands == [0, 0, 4] + Array(repeating: 0, count: 5) + [4, 1, 2], "\(r.commands)")
    }

    @Test func anAppendedCopyOfTheFirstChunkIsFoundWithoutVerification() async throws {
        // The same copy with `verify: false`: no hash would show it, so the refused chunk must. Before, the
        // upload went on from the device's offset and left a file of the right length with the first chunk
        // twice in it, reported as a success.
        let r = try Rig(timeout: .seconds(5))
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(1500, seed: 34)
        r.model.duplicateWrite = { offset, count in offset == 0 && count == 1 }
        let result = try await r.manager.upload(
            try r.local(bytes), to: "/lfs1/dup-unverified.bin", verify: false, configuration: Self.quick)
        #expect(result.bytes == 1500)
        #expect(r.model.file("/lfs1/dup-unverified.bin") == bytes)
        #expect(!r.commands.contains(2), "no hash asked for: \(r.commands)")
    }

    @Test func anInterruptedUploadResumesFromTheDevicesBytes() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(4000, seed: 24)
        // A run killed after 1500 bytes: the device still holds the file open.
        r.model.setInterruptedUpload("/lfs1/k.bin", Array(bytes[..<1500]), total: 4000)
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/k.bin", configuration: Self.quick)
        #expect(result.resumedFrom == 1500)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/k.bin") == bytes)
        #expect(r.model.bytesReceived == 2500)
        #expect(r.uploads.allSatisfy { (smpBody($0)["off"]?.int ?? 0) >= 1500 })
        #expect(r.uploads.allSatisfy { smpBody($0)["len"] == nil })
    }

    @Test func aDifferentShorterFileOnTheDeviceIsReplacedFromOffsetZero() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(2000, seed: 25)
        r.model.setFile("/lfs1/other.bin", managerTestBytes(700, seed: 26))
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/other.bin", configuration: Self.quick)
        #expect(result.resumedFrom == 0)
        #expect(r.model.file("/lfs1/other.bin") == bytes)
        #expect(r.model.bytesReceived == 2000)
    }

    @Test func restartIgnoresTheDevicesPartialFile() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let bytes = managerTestBytes(2000, seed: 27)
        r.model.setInterruptedUpload("/lfs1/r.bin", Array(bytes[..<900]), total: 2000)
        let result = try await r.manager.upload(
            try r.local(bytes), to: "/lfs1/r.bin", resume: false, configuration: Self.quick)
        #expect(result.resumedFrom == 0)
        #expect(r.model.file("/lfs1/r.bin") == bytes)
        // The file is short (7 chunks): no close first. The device still had it open, so the first chunk was
        // appended; the upload saw that in the answer's offset, closed the file and sent it from offset 0.
        #expect(r.model.bytesReceived == 2000 + 300)
    }

    @Test func aFileLeftOpenByAnEarlierUploadDoesNotLeaveAStaleOffset() async throws {
        // The retry of the report: the device still had the file open with a stale offset; a new upload at
        // offset 0 got `off` = stale offset + chunk. Closing first avoids it.
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let old = managerTestBytes(4096, seed: 28)
        r.model.setInterruptedUpload("/lfs1/s.bin", old, total: 0)
        let bytes = managerTestBytes(4096, seed: 29)
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/s.bin", configuration: Self.quick)
        #expect(result.verification == .sha256)
        #expect(r.model.file("/lfs1/s.bin") == bytes)
        #expect(r.commands.first == 4)
    }

    @Test func anEmptyFileUploadsAndVerifiesAsEmpty() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let result = try await r.manager.upload(try r.local([]), to: "/lfs1/empty.bin")
        #expect(result.verification == .empty)
        #expect(r.model.file("/lfs1/empty.bin") == [])
    }

    @Test func anEmptyUploadOverAnExistingFileSaysTheDeviceKeptIt() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        r.model.setFile("/lfs1/full.bin", managerTestBytes(100))
        let error = await #expect(throws: McuMgrError.self) {
            try await r.manager.upload(try r.local([]), to: "/lfs1/full.bin")
        }
        #expect(error?.message.contains("still has 100 bytes") == true)
        #expect(error?.message.contains("does not truncate") == true)
    }

    @Test func anEmptyFileDownloadsAndVerifiesAsEmpty() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        r.model.setFile("/lfs1/e.bin", [])
        let destination = r.directory.appendingPathComponent("e.bin")
        let result = try await r.manager.download("/lfs1/e.bin", to: destination)
        #expect(result.verification == .empty)
        #expect(try Data(contentsOf: destination).isEmpty)
    }

    @Test func withoutHashesTheLengthIsChecked() async throws {
        let r = try Rig()
        defer { try? FileManager.default.removeItem(at: r.directory) }
        let install = r.rig.tap.rule.current
        r.rig.tap.rule.withValue { rule in
            rule = { packet in
                packet.header.group == .fileSystem && [2, 3].contains(packet.header.command.rawValue)
                    ? .reply(.textMap(["rc": 8])) : install!(packet)
            }
        }
        let bytes = managerTestBytes(1200, seed: 30)
        let result = try await r.manager.upload(try r.local(bytes), to: "/lfs1/len.bin", configuration: Self.quick)
        #expect(result.verification == .length)
        #expect(result.verification.description.contains("length only"))
        #expect(r.model.file("/lfs1/len.bin") == bytes)
    }
}

/// Downloads that a device answers badly.
@Suite struct DownloadLimitTests {
    static func rig(_ reply: @escaping @Sendable (Int) -> ManagerTapAction) -> ManagerRig {
        // Every request is answered: the default timeout, which a loaded machine meets.
        let rig = ManagerRig()
        rig.tap.rule.withValue { rule in
            rule = { packet in
                guard packet.header.group == .fileSystem, packet.header.command.rawValue == 0 else {
                    return .forward(packet.bytes)
                }
                return reply(smpBody(packet)["off"]?.int ?? 0)
            }
        }
        return rig
    }

    static func download(
        _ rig: ManagerRig, configuration: FileDownloadConfiguration = .init()
    ) async throws -> (McuMgrError?, URL) {
        let directory = try makeManagerTestDirectory()
        let destination = directory.appendingPathComponent("out.bin")
        do {
            _ = try await FileSystemManager(client: rig.client).download(
                "/lfs1/x.bin", to: destination, configuration: configuration)
            return (nil, directory)
        } catch let error as McuMgrError {
            return (error, directory)
        }
    }

    static func leftovers(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
    }

    @Test func aFileAboveTheLimitIsRefusedBeforeAnythingIsWritten() async throws {
        let rig = Self.rig { _ in .reply(.textMap(["off": 0, "data": .bytes([1, 2, 3]), "len": .int(4 << 30)])) }
        let (error, directory) = try await Self.download(rig)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(error?.kind == .usage)
        #expect(error?.message.contains("announces 4294967296 bytes") == true)
        #expect(error?.message.contains("--max-size") == true)
        #expect(try Self.leftovers(directory).isEmpty)
    }

    @Test func theLimitCanBeRaised() async throws {
        let rig = ManagerRig()
        rig.device.setFile("/lfs1/x.bin", managerTestBytes(5000))
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let manager = FileSystemManager(client: rig.client)
        let small = await #expect(throws: McuMgrError.self) {
            try await manager.download(
                "/lfs1/x.bin", to: directory.appendingPathComponent("a"), configuration: .init(maximumLength: 4999))
        }
        #expect(small?.kind == .usage)
        let result = try await manager.download(
            "/lfs1/x.bin", to: directory.appendingPathComponent("b"), configuration: .init(maximumLength: 5000))
        #expect(result.bytes == 5000)
    }

    @Test func aNegativeLengthIsAnInvalidLength() async throws {
        let rig = Self.rig { _ in .reply(.textMap(["off": 0, "data": .bytes([]), "len": .int(-5)])) }
        let (error, directory) = try await Self.download(rig)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(error?.kind == .protocolViolation)
        #expect(error?.message.contains("the device sent an invalid length") == true)
        #expect(try Self.leftovers(directory).isEmpty)
    }

    /// Over EATT the notifications of one answer can arrive out of order and still add up to the length
    /// its header declares: the packet is whole and its CBOR garbled. The error is the link's advice
    /// (for Bluetooth, one ATT bearer), not a broken firmware.
    @Test func aReorderedAnswerGetsTheLinksAdvice() async throws {
        var answer: [UInt8] = []
        CBORWriter.write(.textMap(["off": 0, "data": .bytes(managerTestBytes(200)), "len": 200]), into: &answer)
        // Three notifications' worth, the last one first.
        let third = answer.count / 3
        let reordered = Array(answer[(2 * third)...] + answer[..<(2 * third)])
        #expect(throws: (any Error).self, "the reordered answer is not CBOR") { try CBOR(decoding: reordered) }
        let rig = Self.rig { _ in .replyPayload(reordered) }
        let advice = "keep BlueZ to one ATT bearer: `Channels = 1`"
        rig.tap.unusableDataAdvice.withValue { $0 = advice }
        let (error, directory) = try await Self.download(rig)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(error?.kind == .protocolViolation)
        #expect(error?.message.contains("not valid CBOR") == true, "\(String(describing: error))")
        #expect(error?.message.hasSuffix(advice) == true, "\(String(describing: error))")
        #expect(error?.message.contains("firmware may be broken") == false)
        #expect(try Self.leftovers(directory).isEmpty)

        // A link without advice keeps the generic words.
        let plain = Self.rig { _ in .replyPayload(reordered) }
        let (generic, other) = try await Self.download(plain)
        defer { try? FileManager.default.removeItem(at: other) }
        #expect(generic?.message.contains("the firmware may be broken or the link corrupting data") == true)
    }

    /// In virtual time: the answer at offset 0 arrives on the wall clock (the in-memory link), and from
    /// the request at offset 3 on only timers move the download, so a starved machine asks the same
    /// number of times (a wall-clock 6 s stall once saw one request of 200 ms under load).
    @Test(.timeLimit(.minutes(10))) func aDeviceThatStopsSendingDataIsAStall() async throws {
        let clock = ManualClock()
        let device = SimulatedDevice(configuration: SimulatorConfiguration())
        let tap = ManagerTapTransport(InMemorySimulatorTransport(device: device))
        let client = McuMgrClient(transport: tap, configuration: .init(timeout: .milliseconds(200)), clock: McuMgrClock(clock))
        tap.rule.withValue { rule in
            rule = { packet in
                guard packet.header.group == .fileSystem, packet.header.command.rawValue == 0 else { return .forward(packet.bytes) }
                return smpBody(packet)["off"]?.int == 0
                    ? .reply(.textMap(["off": 0, "data": .bytes([1, 2, 3]), "len": 10])) : .drop
            }
        }
        func askedAt3() -> [SMPPacket] {
            tap.sent.filter { $0.header.group == .fileSystem && smpBody($0)["off"]?.int == 3 }
        }
        let driver = Task {
            while !Task.isCancelled, askedAt3().isEmpty { try? await Task.sleep(for: .milliseconds(5)) }
            while !Task.isCancelled {
                await clock.waitForSleepers { !$0.isEmpty }
                if let next = clock.pendingDeadlines.first { clock.advance(to: next) }
                await Task.yield()
            }
        }
        defer { driver.cancel() }
        let directory = try makeManagerTestDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var error: McuMgrError?
        do {
            _ = try await FileSystemManager(client: client).download(
                "/lfs1/x.bin", to: directory.appendingPathComponent("out.bin"), configuration: .init(stallTimeout: .seconds(6)))
        } catch let failure as McuMgrError {
            error = failure
        }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("stalled") == true)
        #expect(error?.message.contains("offset 3 of 10") == true)
        #expect(try Self.leftovers(directory).isEmpty)
        // Requests that timed out were asked again before giving up: 6 s of 200 ms requests.
        #expect(askedAt3().count >= 10, "\(askedAt3().count)")
    }

    @Test func theDeadlineBoundsTheWholeDownload() async throws {
        // Busy forever: each answer comes, none has data.
        let rig = Self.rig { _ in .reply(.textMap(["rc": 10])) }
        let (error, directory) = try await Self.download(
            rig, configuration: .init(stallTimeout: .seconds(3600), deadline: .milliseconds(500)))
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(error?.kind == .timeout, "\(String(describing: error))")
        #expect(error?.message.contains("did not finish within") == true)
        #expect(try Self.leftovers(directory).isEmpty)
    }
}
