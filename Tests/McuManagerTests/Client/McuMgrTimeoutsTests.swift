import McuManager
import Testing

/// One meaning of `--timeout`: every wait follows from the wait for one answer.
@Suite struct McuMgrTimeoutsTests {
    @Test func theDefaults() {
        let timeouts = McuMgrTimeouts()
        #expect(!timeouts.isGiven)
        #expect(timeouts.answer == .seconds(10))
        #expect(timeouts.chunk == .seconds(10))
        #expect(timeouts.firstChunk == .seconds(40))
        #expect(timeouts.downloadStall == .seconds(30))
        #expect(timeouts.atLeast(McuMgrTimeouts.imageEraseFloor) == .seconds(75))
        #expect(timeouts.atLeast(McuMgrTimeouts.fileHashFloor) == .seconds(60))
        #expect(timeouts.atLeast(McuMgrTimeouts.reconnectFloor) == .seconds(30))
        // The library's own defaults are the same.
        #expect(McuMgrClient.Configuration().timeout == timeouts.answer)
        #expect(UploadConfiguration().firstChunkTimeout == timeouts.firstChunk)
        #expect(UploadConfiguration().chunkTimeout == timeouts.chunk)
        #expect(FirmwareUpgradeManager.Options().firstChunkTimeout == timeouts.firstChunk)
        #expect(FileDownloadConfiguration().stallTimeout == timeouts.downloadStall)
    }

    @Test func aGivenAnswerTimeSetsEveryWait() {
        let short = McuMgrTimeouts(answer: .seconds(2))
        #expect(short.isGiven)
        #expect(short.firstChunk == .seconds(2), "the first chunk waits no longer than asked")
        #expect(short.downloadStall == .seconds(6))
        #expect(short.atLeast(McuMgrTimeouts.imageEraseFloor) == .seconds(75), "an erase keeps its floor")
        let long = McuMgrTimeouts(answer: .seconds(120))
        #expect(long.atLeast(McuMgrTimeouts.imageEraseFloor) == .seconds(120))
        #expect(long.firstChunk == .seconds(120))
    }

    @Test func aHashWaitsForWhatTheDeviceHashesAndIsNotAskedForAgainSooner() {
        // 1 s, and the bytes at the slowest rate a device hashes (64 KiB/s).
        #expect(McuMgrTimeouts.hashResendFloor(bytes: 0) == .seconds(1))
        #expect(McuMgrTimeouts.hashResendFloor(bytes: 4096) == .milliseconds(1_063), "in whole milliseconds, rounded up")
        #expect(McuMgrTimeouts.hashResendFloor(bytes: 1 << 20) == .seconds(17))
        #expect(McuMgrTimeouts.hashResendFloor(bytes: nil) == .seconds(10), "a whole file of unknown size")
        // Two resend floors, at least the answer time: one resend when the request or its answer is lost.
        #expect(McuMgrTimeouts().hash(bytes: 4096) == .seconds(10))
        #expect(McuMgrTimeouts().hash(bytes: 1 << 20) == .seconds(34))
        #expect(McuMgrTimeouts(answer: .seconds(60)).hash(bytes: 1 << 20) == .seconds(60))
        // The requests that carry a floor of their own.
        #expect(FileHashRequest(name: "/lfs1/f", length: 1 << 20).resendFloor == .seconds(17))
        #expect(FileHashRequest(name: "/lfs1/f").resendFloor == .seconds(10))
        #expect(ImageEraseRequest(slot: 1).resendFloor == .seconds(40))
        #expect(EraseStorageRequest().resendFloor == .seconds(15))
        #expect(EchoRequest(text: "x").resendFloor == nil, "others: the link's resend timeout alone")
    }
}
