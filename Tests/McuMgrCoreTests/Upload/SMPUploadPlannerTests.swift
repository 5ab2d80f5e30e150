import Testing
import TestSupport

@testable import McuMgrCore

@Suite struct SMPUploadPlannerTests {
    @Test func sequentialUploadCoversTheFileExactly() {
        var p = SMPUploadPlanner(totalSize: 1000)
        var covered = 0
        while let chunk = p.nextChunk(maximumLength: 300) {
            #expect(chunk.offset == covered)
            covered = chunk.end
            #expect(p.acknowledge(chunk, deviceOffset: chunk.end) == .accepted)
        }
        #expect(covered == 1000)
        #expect(p.isComplete)
    }

    @Test func windowLimitsOutstandingChunks() {
        var p = SMPUploadPlanner(totalSize: 10_000, window: 3)
        let chunks = (0..<5).compactMap { _ in p.nextChunk(maximumLength: 100) }
        #expect(chunks.count == 3)
        _ = p.acknowledge(chunks[0], deviceOffset: 100)
        #expect(p.nextChunk(maximumLength: 100)?.offset == 300)
    }

    @Test func alignmentRoundsDownExceptTheLastChunk() {
        var p = SMPUploadPlanner(totalSize: 1003, alignment: 8)
        let first = p.nextChunk(maximumLength: 501)!
        #expect(first.length == 496)
        _ = p.acknowledge(first, deviceOffset: first.end)
        let second = p.nextChunk(maximumLength: 600)!
        #expect(second.length == 507, "last chunk takes the unaligned remainder")
    }

    @Test func unexpectedOffsetDrainsThenContinuesFromDevice() {
        var p = SMPUploadPlanner(totalSize: 1000, window: 3)
        let a = p.nextChunk(maximumLength: 100)!
        let b = p.nextChunk(maximumLength: 100)!
        let c = p.nextChunk(maximumLength: 100)!
        // The device lost `a`: it still expects 0.
        #expect(p.acknowledge(a, deviceOffset: 0) == .resynchronising(deviceOffset: 0))
        #expect(p.nextChunk(maximumLength: 100) == nil, "wait for in-flight chunks to drain")
        _ = p.acknowledge(b, deviceOffset: 0)
        _ = p.acknowledge(c, deviceOffset: 0)
        #expect(p.nextChunk(maximumLength: 100)?.offset == 0)
    }

    @Test func deviceAheadSkipsForward() {
        // Resume: the device already holds 600 bytes from an earlier session.
        var p = SMPUploadPlanner(totalSize: 1000)
        let first = p.nextChunk(maximumLength: 100)!
        #expect(p.acknowledge(first, deviceOffset: 600) == .resynchronising(deviceOffset: 600))
        #expect(p.confirmedOffset == 600)
        #expect(p.nextChunk(maximumLength: 100)?.offset == 600)
    }

    @Test func deviceReportsCompletionEarly() {
        var p = SMPUploadPlanner(totalSize: 1000)
        let first = p.nextChunk(maximumLength: 100)!
        _ = p.acknowledge(first, deviceOffset: 1000)
        #expect(p.isComplete)
        #expect(p.nextChunk(maximumLength: 100) == nil)
    }

    @Test func lyingOffsetIsReported() {
        var p = SMPUploadPlanner(totalSize: 1000)
        let first = p.nextChunk(maximumLength: 100)!
        #expect(p.acknowledge(first, deviceOffset: 5000) == .invalidOffset(5000))
    }

    @Test func lostChunkRestartsFromConfirmed() {
        var p = SMPUploadPlanner(totalSize: 1000, window: 2)
        let a = p.nextChunk(maximumLength: 100)!
        let b = p.nextChunk(maximumLength: 100)!
        _ = p.acknowledge(a, deviceOffset: 100)
        p.chunkLost(b)
        #expect(p.nextChunk(maximumLength: 100)?.offset == 100)
    }

    @Test func randomisedDeviceBehaviourAlwaysConverges() {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let total = Int.random(in: 1...5000, using: &rng)
            var p = SMPUploadPlanner(totalSize: total, window: Int.random(in: 1...4, using: &rng))
            var deviceOffset = 0
            var steps = 0
            var pending: [SMPUploadPlanner.Chunk] = []
            while !p.isComplete, steps < 10_000 {
                steps += 1
                while let c = p.nextChunk(maximumLength: Int.random(in: 1...700, using: &rng)) { pending.append(c) }
                guard !pending.isEmpty else { break }
                let c = pending.removeFirst()
                // The device accepts only contiguous data and sometimes loses a chunk.
                if c.offset == deviceOffset, Int.random(in: 0..<10, using: &rng) > 0 { deviceOffset = c.end }
                _ = p.acknowledge(c, deviceOffset: deviceOffset)
            }
            #expect(p.isComplete, "total \(total) stalled at \(p.confirmedOffset)")
            #expect(deviceOffset == total)
        }
    }

    @Test func chunkSizerFillsTheMessageExactly() {
        // An image continuation chunk: header 8 + map(2) + "off" + uint + "data" + bstr.
        for limit in [64, 128, 255, 256, 257, 300, 1024, 2048, 70_000] {
            let offset = 100_000
            let empty = SMPHeader.size + CBOR.textMap(["off": .int(offset), "data": .bytes([])]).encoded.count
            let n = SMPChunkSizer.maximumDataLength(messageLimit: limit, sizeWithEmptyData: empty)
            let size = SMPHeader.size + CBOR.textMap(["off": .int(offset), "data": .bytes(Array(repeating: 0, count: n))]).encoded.count
            #expect(size <= limit)
            let bigger = SMPHeader.size + CBOR.textMap(["off": .int(offset), "data": .bytes(Array(repeating: 0, count: n + 1))]).encoded.count
            #expect(bigger > limit, "limit \(limit): \(n) is not the largest")
        }
        #expect(SMPChunkSizer.maximumDataLength(messageLimit: 10, sizeWithEmptyData: 20) == 0)
    }
}
