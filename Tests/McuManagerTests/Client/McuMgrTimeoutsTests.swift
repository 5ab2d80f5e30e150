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
}
