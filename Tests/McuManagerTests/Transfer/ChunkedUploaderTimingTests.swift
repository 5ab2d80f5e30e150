import Foundation
import McuManager
import McuMgrCore
import Testing
import TestSupport

/// The upload runner's timing in virtual time: busy pauses, the erase floor of the first chunk and the
/// resend timeout of the others, checked at the exact instant each chunk goes out.
@Suite("ChunkedUploader: busy pauses and resends in virtual time", .timeLimit(.minutes(10)))
struct ChunkedUploaderTimingTests {
    /// A device that takes every chunk it gets (its next offset is the chunk's end), except what `refuse`
    /// says: answer busy (rc 10) or nothing (lost), by the chunk's offset and how often it came.
    final class Device: @unchecked Sendable {
        enum Refusal { case busy, lost }
        private let lock = NSLock()
        private var seen: [Int: Int] = [:]
        private let refuse: @Sendable (_ offset: Int, _ time: Int) -> Refusal?

        init(refuse: @escaping @Sendable (_ offset: Int, _ time: Int) -> Refusal?) { self.refuse = refuse }

        func answer(_ packet: SMPPacket) -> CBOR? {
            guard let body = try? CBOR(decoding: packet.payload), let offset = body["off"]?.int,
                let data = body["data"]?.byteString
            else { return ["rc": 3] }
            let time = lock.withLock { () -> Int in
                seen[offset, default: 0] += 1
                return seen[offset]!
            }
            switch refuse(offset, time) {
            case .busy: return ["rc": 10]
            case .lost: return nil
            case nil: return ["off": .unsigned(UInt64(offset + data.count))]
            }
        }
    }

    static let session = SMPSessionConfiguration(
        adaptiveRetransmit: true, retransmitFloor: .milliseconds(250), initialRetransmit: .seconds(1),
        maximumRetransmits: 16)

    /// 150 bytes in chunks of 64: offsets 0, 64, 128, one in flight, no `os params`.
    static func upload(
        _ device: Device, clock: ManualClock, busyRetryDelay: Duration = .milliseconds(100)
    ) -> (VirtualTimeLink, Task<UploadResult, any Error>) {
        let link = VirtualTimeLink(clock: clock, session: session) { device.answer($0) }
        let client = McuMgrClient(transport: link, clock: McuMgrClock(clock))
        var configuration = UploadConfiguration(pipelineDepth: 1, maximumChunkSize: 64, busyRetryDelay: busyRetryDelay)
        configuration.deviceBufferSize = 512
        let uploader = ChunkedUploader(client: client, target: ImageUploadTarget(image: 0, sha: nil), configuration: configuration)
        let task = Task { try await uploader.upload(DataUploadSource(Data((0..<150).map { UInt8($0) }))) }
        return (link, task)
    }

    static func offsets(_ log: [VirtualTimeLink.Write]) -> [Int] {
        log.compactMap { (try? CBOR(decoding: $0.packet.payload))?["off"]?.int }
    }

    @Test func aBusyChunkIsSentAgainExactlyTheBusyDelayLater() async throws {
        let clock = ManualClock()
        let device = Device { offset, time in offset == 64 && time <= 2 ? .busy : nil }
        let (link, task) = Self.upload(device, clock: clock, busyRetryDelay: .milliseconds(100))
        // Offsets 0 and 64 at once; 64 is busy: again at 100 ms, busy again: again at 200 ms. The busy
        // pause is the only sleeper once the answer is handled (the chunk's resend timer, 250 ms, is gone).
        for at: Duration in [.milliseconds(100), .milliseconds(200)] {
            await clock.waitForSleepers { $0 == [at] }
            let before = link.log.count
            clock.advance(to: at - .milliseconds(1))
            #expect(link.log.count == before, "nothing before \(at)")
            clock.advance(to: at)
        }
        let result = try await task.value
        #expect(Self.offsets(link.log) == [0, 64, 64, 64, 128])
        #expect(link.log.map(\.at) == [.zero, .zero, .milliseconds(100), .milliseconds(200), .milliseconds(200)])
        #expect(result.duration == .milliseconds(200), "the upload's duration is virtual time too")
    }

    @Test func theFirstChunkWaitsForTheEraseFloorAndLaterChunksForTheResendTimeout() async throws {
        let clock = ManualClock()
        let device = Device { offset, time in (offset == 0 || offset == 64) && time == 1 ? .lost : nil }
        let (link, task) = Self.upload(device, clock: clock)
        // The resend timeout is 1 s (no round trip measured yet), but the chunk at offset 0 may erase the
        // slot: not resent before the transport's erase floor (2 s, a quarter of its 40 s timeout at most).
        await clock.waitForSleepers { $0 == [.seconds(2)] }
        clock.advance(to: .seconds(1))
        #expect(link.log.count == 1, "not resent at the 1 s resend timeout")
        clock.advance(to: .seconds(2) - .milliseconds(1))
        #expect(link.log.count == 1)
        clock.advance(to: .seconds(2))
        // Offset 64, lost once, is resent at the resend timeout: 1 s after it went out.
        await clock.waitForSleepers { $0 == [.seconds(3)] }
        clock.advance(to: .seconds(3) - .milliseconds(1))
        #expect(link.log.count == 3)
        clock.advance(to: .seconds(3))
        let result = try await task.value
        #expect(Self.offsets(link.log) == [0, 0, 64, 64, 128])
        #expect(link.log.map(\.at) == [.zero, .seconds(2), .seconds(2), .seconds(3), .seconds(3)])
        #expect(result.duration == .seconds(3))
    }

    @Test func theRateAppearsAfterHalfASecondAndIsTheBytesOverTheVirtualTime() async throws {
        let clock = ManualClock()
        let link = VirtualTimeLink(clock: clock, session: Self.session)
        let client = McuMgrClient(transport: link, clock: McuMgrClock(clock))
        var configuration = UploadConfiguration(pipelineDepth: 1, maximumChunkSize: 64)
        configuration.deviceBufferSize = 512
        let uploader = ChunkedUploader(client: client, target: ImageUploadTarget(image: 0, sha: nil), configuration: configuration)
        let reports = LockedValue<[TransferProgress]>([])
        let task = Task {
            try await uploader.upload(DataUploadSource(Data(repeating: 0x5A, count: 640))) { progress in
                reports.withValue { $0.append(progress) }
            }
        }
        // Ten chunks of 64 bytes, each answered 100 ms after it went out: 640 B/s throughout.
        var writes = link.writes.makeAsyncIterator()
        for chunk in 1...10 {
            let write = try #require(await writes.next())
            #expect(write.at == .milliseconds(100 * (chunk - 1)))
            clock.advance(by: .milliseconds(100))
            link.answer(write.packet, with: ["off": .unsigned(UInt64(64 * chunk))])
        }
        let result = try await task.value
        #expect(result.duration == .seconds(1))
        let seen = reports.value
        #expect(seen.map(\.bytesTransferred) == (1...10).map { 64 * $0 })
        // No rate before the estimator's half second, then exactly the bytes over the virtual time.
        #expect(seen.prefix(4).allSatisfy { $0.bytesPerSecond == nil }, "\(seen.map(\.bytesPerSecond))")
        for progress in seen.dropFirst(4) {
            let rate = try #require(progress.bytesPerSecond)
            #expect(abs(rate - 640) < 1e-6, "\(progress.bytesTransferred) bytes: \(rate) B/s")
        }
    }
}
