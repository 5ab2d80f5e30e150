import Foundation
import McuManager
import McuMgrCore
import Testing
import TestSupport

/// The download runner's timing in virtual time: a busy answer's pause and the stall timeout, at the
/// exact instants.
@Suite("FileSystemManager.download: busy pauses and the stall in virtual time", .timeLimit(.minutes(10)))
struct FileDownloadTimingTests {
    static let file = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    /// Answers downloads of `file` in 100-byte chunks, except what `refuse` says for an offset and the
    /// how-many-th request for it: busy (rc 10), or nothing.
    static func link(clock: ManualClock, refuse: @escaping @Sendable (_ offset: Int, _ time: Int) -> CBOR??) -> VirtualTimeLink {
        let seen = LockedValue<[Int: Int]>([:])
        let session = SMPSessionConfiguration(
            adaptiveRetransmit: true, retransmitFloor: .milliseconds(250), initialRetransmit: .seconds(1), maximumRetransmits: 16)
        return VirtualTimeLink(clock: clock, session: session) { packet in
            guard packet.header.group == .fileSystem, packet.header.command.rawValue == 0,
                let offset = (try? CBOR(decoding: packet.payload))?["off"]?.int
            else { return ["rc": 8] }
            let time = seen.withValue { seen -> Int in
                seen[offset, default: 0] += 1
                return seen[offset]!
            }
            if let refusal = refuse(offset, time) { return refusal }
            let end = min(file.count, offset + 100)
            let data = CBOR.bytes(Array(file[offset..<end]))
            return offset == 0
                ? ["off": .unsigned(UInt64(offset)), "data": data, "len": .unsigned(UInt64(file.count))]
                : ["off": .unsigned(UInt64(offset)), "data": data]
        }
    }

    static func offsets(_ log: [VirtualTimeLink.Write]) -> [Int] {
        log.compactMap { (try? CBOR(decoding: $0.packet.payload))?["off"]?.int }
    }

    @Test func aBusyAnswerIsAskedAgainExactlyTheBusyPauseLater() async throws {
        let clock = ManualClock()
        let link = Self.link(clock: clock) { offset, time in offset == 100 && time == 1 ? .some(["rc": 10]) : .none }
        let client = McuMgrClient(transport: link, clock: McuMgrClock(clock))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("download-timing-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = directory.appendingPathComponent("f.bin")
        let task = Task { try await FileSystemManager(client: client).download("/lfs1/f.bin", to: local, verify: false) }
        await clock.waitForSleepers { $0 == [.milliseconds(100)] }
        clock.advance(to: .milliseconds(99))
        #expect(Self.offsets(link.log) == [0, 100], "nothing before the pause is over")
        clock.advance(to: .milliseconds(100))
        let result = try await task.value
        #expect(result.bytes == 300)
        #expect(FileManager.default.contents(atPath: local.path) == Self.file)
        #expect(Self.offsets(link.log) == [0, 100, 100, 200])
        #expect(link.log.map(\.at) == [.zero, .zero, .milliseconds(100), .milliseconds(100)])
    }

    @Test func theHashThatChecksTheDownloadIsAskedForAgainAfterTheDeviceCouldHaveHashedTheFile() async throws {
        let clock = ManualClock()
        let hashes = LockedValue(0)
        let session = SMPSessionConfiguration(
            adaptiveRetransmit: true, retransmitFloor: .milliseconds(25), initialRetransmit: .seconds(1), maximumRetransmits: 7)
        let link = VirtualTimeLink(clock: clock, session: session) { packet in
            guard packet.header.group == .fileSystem else { return ["rc": 8] }
            switch packet.header.command.rawValue {
            case 0:
                let offset = (try? CBOR(decoding: packet.payload))?["off"]?.int ?? 0
                let data = CBOR.bytes(Array(Self.file[offset..<min(Self.file.count, offset + 100)]))
                return offset == 0
                    ? ["off": 0, "data": data, "len": .unsigned(UInt64(Self.file.count))] : ["off": .unsigned(UInt64(offset)), "data": data]
            case 2:
                // The first hash request (or its answer) is lost; the copy is answered.
                guard hashes.withValue({ $0 += 1; return $0 }) > 1 else { return nil }
                return ["type": "sha256", "len": .unsigned(UInt64(Self.file.count)), "output": .bytes(SHA256.hash(data: Self.file))]
            default:
                return ["rc": 8]
            }
        }
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("download-timing-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = directory.appendingPathComponent("f.bin")
        let task = Task { try await FileSystemManager(client: client).download("/lfs1/f.bin", to: local) }
        // Every answer so far took no time: the link's own resend timeout is its 25 ms floor. The hash is
        // asked for again when the device could have hashed the 300 bytes at 64 KiB/s, and a second.
        let floor = McuMgrTimeouts.hashResendFloor(bytes: Self.file.count)
        #expect(floor > .seconds(1))
        #expect(floor == .milliseconds(1_005))
        await clock.waitForSleepers { $0 == [floor] }
        clock.advance(to: floor - .milliseconds(1))
        #expect(hashes.withValue { $0 } == 1, "not asked again before the floor")
        clock.advance(to: floor)
        let result = try await task.value
        #expect(result.bytes == 300)
        #expect(result.verification == .sha256)
        #expect(hashes.withValue { $0 } == 2)
        #expect(link.log.filter { $0.packet.header.command.rawValue == 2 }.map(\.at) == [.zero, floor])
    }

    @Test func noDataForTheStallTimeoutEndsTheDownloadThenAndNotBefore() async throws {
        let clock = ManualClock()
        let link = Self.link(clock: clock) { offset, _ in offset == 100 ? .some(nil) : .none }
        let client = McuMgrClient(transport: link, configuration: .init(timeout: .seconds(10)), clock: McuMgrClock(clock))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("download-timing-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let local = directory.appendingPathComponent("f.bin")
        var writes = link.writes.makeAsyncIterator()
        let task = Task {
            try await FileSystemManager(client: client).download(
                "/lfs1/f.bin", to: local, verify: false, configuration: .init(stallTimeout: .seconds(3)))
        }
        // Offset 0 is answered at once and the request for offset 100 goes out at 0. Until that request
        // is written, the client may still be handling the first answer, and the first request's resend
        // timer (1 s) already sleeps: time moved to it would shift the whole download by a second.
        while let write = await writes.next(), (try? CBOR(decoding: write.packet.payload))?["off"]?.int != 100 {}
        // The request for offset 100 waits for the rest of the stall timeout (3 s), resent within it: time
        // moves from one resend to the next until the next is due at 3 s or later (each resend re-arms
        // the client's only timer, so a sleeper past the last instant is the next one).
        var now = Duration.zero
        while true {
            let after = now
            await clock.waitForSleepers { deadlines in deadlines.contains { $0 > after } }
            guard let next = clock.pendingDeadlines.filter({ $0 > after }).min(), next < .seconds(3) else { break }
            now = next
            clock.advance(to: next)
        }
        clock.advance(to: .milliseconds(2999))
        #expect(Self.offsets(link.log).allSatisfy { $0 <= 100 })
        clock.advance(to: .seconds(3))
        // A download that never ends (time moved wrongly) is cancelled with the test at its time limit.
        let error = await #expect(throws: McuMgrError.self) {
            try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("stalled: no data for 3.0 s at offset 100 of 300") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: local.path), "no partial file")
        #expect(Self.offsets(link.log).filter { $0 == 100 }.count > 1, "resent within the stall timeout")
    }
}
