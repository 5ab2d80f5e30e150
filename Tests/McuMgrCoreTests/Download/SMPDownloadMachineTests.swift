import Testing
import TestSupport

@testable import McuMgrCore

/// The download machine, tested by the actions it returns for each event, in virtual time.
@Suite struct SMPDownloadMachineTests {
    typealias Action = SMPDownloadMachine.Action

    static let t0 = SMPInstant.zero
    static func at(_ milliseconds: Int) -> SMPInstant { SMPInstant.zero + .milliseconds(milliseconds) }
    static let timeout = Duration.seconds(10)

    static func machine(
        depth: Int? = nil, link: Int = 8, stall: Duration = .seconds(30), deadline: Duration? = nil, maximum: Int = 1 << 20
    ) -> SMPDownloadMachine {
        SMPDownloadMachine(
            limits: .init(
                depth: depth, linkFramesInFlight: link, maximumLength: maximum, stallTimeout: stall, deadline: deadline,
                requestTimeout: timeout))
    }

    /// The offsets of the send actions.
    static func sends(_ actions: [Action]) -> [Int] {
        actions.compactMap { if case .send(let offset, _) = $0 { offset } else { nil } }
    }

    @Test func theFirstRequestGoesAloneThenTheKnownDepthFills() {
        var m = Self.machine(depth: 3)
        #expect(m.start(now: Self.t0) == [.send(offset: 0, timeout: Self.timeout)])
        let first = m.answered(requested: 0, dataCount: 100, length: 550, now: Self.at(20))
        #expect(first == [.write(offset: 0, skip: 0, count: 100)] + [100, 200, 300].map { .send(offset: $0, timeout: Self.timeout) })
        // Out of order: 200 waits for 100.
        #expect(m.answered(requested: 200, dataCount: 100, length: nil, now: Self.at(30)) == [.send(offset: 400, timeout: Self.timeout)])
        #expect(m.answered(requested: 100, dataCount: 100, length: nil, now: Self.at(31))
            == [.write(offset: 100, skip: 0, count: 100), .write(offset: 200, skip: 0, count: 100), .send(offset: 500, timeout: Self.timeout)])
        #expect(m.written == 300)
        #expect(m.answered(requested: 300, dataCount: 100, length: nil, now: Self.at(40)) == [.write(offset: 300, skip: 0, count: 100)])
        #expect(m.answered(requested: 500, dataCount: 50, length: nil, now: Self.at(41)) == [])
        #expect(m.answered(requested: 400, dataCount: 100, length: nil, now: Self.at(42))
            == [.write(offset: 400, skip: 0, count: 100), .write(offset: 500, skip: 0, count: 50), .finished(length: 550)])
        #expect(m.isComplete)
        #expect(m.requestsSent == 6)
    }

    @Test func aLongFileAsksForTheDevicesBuffersOnceAShortOneDoesNot() {
        var long = Self.machine()
        _ = long.start(now: Self.t0)
        #expect(long.answered(requested: 0, dataCount: 100, length: 1000, now: Self.at(10)) == [.write(offset: 0, skip: 0, count: 100), .askForBuffers])
        #expect(Self.sends(long.buffers(framesInFlight: 3, now: Self.at(20))) == [100, 200, 300])

        var short = Self.machine()
        _ = short.start(now: Self.t0)
        #expect(short.answered(requested: 0, dataCount: 100, length: 500, now: Self.at(10)) == [.write(offset: 0, skip: 0, count: 100), .send(offset: 100, timeout: Self.timeout)])

        // A link that holds one frame (a serial console) never asks.
        var serial = Self.machine(link: 1)
        _ = serial.start(now: Self.t0)
        #expect(serial.answered(requested: 0, dataCount: 100, length: 100_000, now: Self.at(10)) == [.write(offset: 0, skip: 0, count: 100), .send(offset: 100, timeout: Self.timeout)])

        // A device that does not say goes one request at a time; the link bounds what it says.
        var silent = Self.machine()
        _ = silent.start(now: Self.t0)
        _ = silent.answered(requested: 0, dataCount: 100, length: 1000, now: Self.at(10))
        #expect(Self.sends(silent.buffers(framesInFlight: nil, now: Self.at(20))) == [100])
        var bounded = Self.machine(link: 2)
        _ = bounded.start(now: Self.t0)
        _ = bounded.answered(requested: 0, dataCount: 100, length: 1000, now: Self.at(10))
        #expect(Self.sends(bounded.buffers(framesInFlight: 7, now: Self.at(20))) == [100, 200])
    }

    @Test func aShortAnswerLeavesAGapThatIsAskedForAndOverlapsAreWrittenOnce() {
        var m = Self.machine(depth: 2)
        _ = m.start(now: Self.t0)
        #expect(Self.sends(m.answered(requested: 0, dataCount: 100, length: 400, now: Self.at(1))) == [100, 200])
        // 100 comes back with 60 bytes: 160..<200 is missing and asked for first.
        #expect(m.answered(requested: 100, dataCount: 60, length: nil, now: Self.at(2))
            == [.write(offset: 100, skip: 0, count: 60), .send(offset: 160, timeout: Self.timeout)])
        // The gap's answer is a whole chunk: 160..<260 overlaps 200..<300.
        #expect(m.answered(requested: 200, dataCount: 100, length: nil, now: Self.at(3)) == [.send(offset: 300, timeout: Self.timeout)])
        #expect(m.answered(requested: 160, dataCount: 100, length: nil, now: Self.at(4))
            == [.write(offset: 160, skip: 0, count: 100), .write(offset: 200, skip: 60, count: 100)])
        #expect(m.written == 300)
        #expect(m.answered(requested: 300, dataCount: 100, length: nil, now: Self.at(5)) == [.write(offset: 300, skip: 0, count: 100), .finished(length: 400)])
    }

    @Test func aLostRequestIsAskedAgainAndHalvesTheWindowWhichGrowsBack() {
        var m = Self.machine(depth: 4)
        _ = m.start(now: Self.t0)
        #expect(Self.sends(m.answered(requested: 0, dataCount: 10, length: 1000, now: Self.at(1))) == [10, 20, 30, 40])
        #expect(m.window == 4)
        // 10 is lost: asked again, the window halves to 2 (three still in flight: nothing more now).
        #expect(m.lost(offset: 10, now: Self.at(100)) == [])
        #expect(m.window == 2)
        #expect(m.losses == 1)
        #expect(Self.sends(m.answered(requested: 20, dataCount: 10, length: nil, now: Self.at(101))) == [])
        // Two clean answers (a window's worth) grow it to 3: the lost offset goes first.
        #expect(Self.sends(m.answered(requested: 30, dataCount: 10, length: nil, now: Self.at(102))) == [10, 50])
        #expect(m.window == 3)
        #expect(m.answered(requested: 10, dataCount: 10, length: nil, now: Self.at(103)).prefix(3)
            == [.write(offset: 10, skip: 0, count: 10), .write(offset: 20, skip: 0, count: 10), .write(offset: 30, skip: 0, count: 10)])
    }

    @Test func aBusyDeviceIsAskedAgainAfterAPause() {
        var m = Self.machine(depth: 1)
        _ = m.start(now: Self.t0)
        #expect(m.busy(offset: 0, now: Self.at(5)) == [.sendAfter(.milliseconds(100), offset: 0, timeout: Self.timeout)])
        #expect(m.answered(requested: 0, dataCount: 10, length: 10, now: Self.at(120)) == [.write(offset: 0, skip: 0, count: 10), .finished(length: 10)])
    }

    @Test func timeoutsShrinkToTheStallAndTheDeadlineThenFail() {
        var m = Self.machine(depth: 1, stall: .seconds(15))
        _ = m.start(now: Self.t0)
        _ = m.answered(requested: 0, dataCount: 10, length: 100, now: Self.at(0))
        // Asked again at 10 s: 5 s of the stall timeout are left.
        #expect(m.lost(offset: 10, now: Self.at(10_000)) == [.send(offset: 10, timeout: .seconds(5))])
        #expect(m.lost(offset: 10, now: Self.at(15_000)) == [.fail(.stalled(for: .seconds(15), written: 10, length: 100))])
        #expect(m.lost(offset: 10, now: Self.at(16_000)) == [], "nothing after a failure")

        var d = Self.machine(depth: 1, deadline: .seconds(4))
        #expect(d.start(now: Self.t0) == [.send(offset: 0, timeout: .seconds(4))])
        _ = d.answered(requested: 0, dataCount: 10, length: 100, now: Self.at(1000))
        #expect(d.lost(offset: 10, now: Self.at(4000)) == [.fail(.deadline(.seconds(4), written: 10, length: 100))])
    }

    @Test func answersThatCannotBeTrustedEndTheDownload() {
        func firstAnswer(dataCount: Int, length: Int?, maximum: Int = 1 << 20) -> [Action] {
            var m = Self.machine(depth: 2, maximum: maximum)
            _ = m.start(now: Self.t0)
            return m.answered(requested: 0, dataCount: dataCount, length: length, now: Self.at(1))
        }
        #expect(firstAnswer(dataCount: 10, length: nil) == [.fail(.noLength)])
        #expect(firstAnswer(dataCount: 10, length: 2000, maximum: 1000) == [.fail(.tooLarge(length: 2000, limit: 1000))])
        #expect(firstAnswer(dataCount: 0, length: 50) == [.fail(.noData(offset: 0, length: 50))])
        #expect(firstAnswer(dataCount: 60, length: 50) == [.fail(.pastTheEnd(length: 50))])
        #expect(firstAnswer(dataCount: 0, length: 0) == [.finished(length: 0)])

        var m = Self.machine(depth: 2)
        _ = m.start(now: Self.t0)
        _ = m.answered(requested: 0, dataCount: 10, length: 100, now: Self.at(1))
        #expect(m.answered(requested: 10, dataCount: 10, length: 90, now: Self.at(2)) == [.fail(.lengthChanged(from: 100, to: 90))])
    }

    /// A device that answers in any order, loses requests, sends short pieces now and then: whatever
    /// happens, the machine writes every byte exactly once, in order, and finishes.
    @Test(arguments: 0..<200)
    func randomDevicesGetEveryByteWrittenOnceInOrder(seed: Int) {
        var random = SplitMix64(seed: UInt64(seed))
        let length = Int(random.next(below: 5000))
        let chunk = 1 + Int(random.next(below: 300))
        var m = Self.machine(depth: 1 + Int(random.next(below: 6)))
        var now = Self.t0
        var outstanding: [Int] = []
        var written = 0
        var finished = false
        func handle(_ actions: [Action]) {
            for action in actions {
                switch action {
                case .send(let offset, _), .sendAfter(_, let offset, _): outstanding.append(offset)
                case .write(let offset, let skip, let count):
                    #expect(offset + skip == written, "seed \(seed): written in order")
                    #expect(skip < count)
                    written = offset + count
                case .discard(let offset): #expect(offset < written)
                case .askForBuffers: Issue.record("the depth is known")
                case .finished(let total):
                    #expect(total == length)
                    finished = true
                case .fail(let failure): Issue.record("seed \(seed): \(failure)")
                }
            }
        }
        handle(m.start(now: now))
        var steps = 0
        while !finished, !outstanding.isEmpty, steps < 10_000 {
            steps += 1
            now = now + .milliseconds(1)
            let offset = outstanding.remove(at: Int(random.next(below: UInt64(outstanding.count))))
            switch random.next(below: 10) {
            case 0: handle(m.lost(offset: offset, now: now))
            case 1: handle(m.busy(offset: offset, now: now))
            default:
                var count = max(0, min(chunk, length - offset))
                if random.next(below: 8) == 0, count > 1 { count = 1 + Int(random.next(below: UInt64(count - 1))) }
                handle(m.answered(requested: offset, dataCount: count, length: offset == 0 || random.next(below: 2) == 0 ? length : nil, now: now))
            }
        }
        #expect(finished, "seed \(seed): finished in \(steps) steps")
        #expect(written == length)
    }
}
