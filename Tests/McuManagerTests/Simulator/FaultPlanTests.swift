import McuMgrCore
import Testing

@testable import McuMgrSimulator

/// The seeded fault plan the simulator's front ends apply: parsing, replay, rates, and the triggers.
@Suite("Fault plan")
struct FaultPlanTests {
    /// An SMP write request of `group`/`command` with a CBOR body.
    static func request(group: UInt16, command: UInt8, body: [UInt8]) -> [UInt8] {
        SMPHeader(
            version: .v2, operation: .write, flags: 0, length: UInt16(body.count), group: McuMgrGroup(group),
            sequence: 0, command: McuMgrCommand(command)
        ).bytes + body
    }

    /// `{"off": off, "data": h''}` (off < 24).
    static func imageChunk(off: UInt8, size: Int = 0) -> [UInt8] {
        request(group: 1, command: 1, body: [0xA2, 0x63, 0x6F, 0x66, 0x66, off, 0x64, 0x64, 0x61, 0x74, 0x61, 0x59,
                                              UInt8(size >> 8), UInt8(size & 0xFF)] + Array(repeating: 0x55, count: size))
    }

    @Test("parses every key; the description round-trips; bad values say what to write")
    func parsing() throws {
        let profile = try FaultProfile(
            parsing: "loss=0.1,dup=0.02,reorder=0.02,delay=5,jitter=10ms,corrupt=1e-4,noise=0.05,drop-lines=0.01,reset-after=100000,resets=3,reset-in-erase=1,silent-after=50,seed=7")
        #expect(profile.requestLoss == 0.1 && profile.responseLoss == 0.1)
        #expect(profile.duplication == 0.02 && profile.reordering == 0.02)
        #expect(profile.delay == .milliseconds(5) && profile.jitter == .milliseconds(10))
        #expect(profile.corruption == 1e-4 && profile.noise == 0.05 && profile.lineLoss == 0.01)
        #expect(profile.resetEveryUploadBytes == 100_000 && profile.resetCount == 3 && profile.resetsInErase == 1)
        #expect(profile.silentAfterRequests == 50 && profile.seed == 7)
        #expect(try FaultProfile(parsing: profile.description) == profile)
        #expect(try FaultProfile(parsing: "loss-in=0.3").responseLoss == 0)
        #expect(try FaultProfile(parsing: "").isEmpty)
        #expect(try FaultProfile(parsing: "none").isEmpty)
        #expect(try !FaultProfile(parsing: "seed=3,dup=0.1").isEmpty)
        #expect(try FaultProfile(parsing: "seed=3").isEmpty)
        for (bad, hint) in [("loss=2", "probability"), ("loss", "KEY=VALUE"), ("wobble=1", "unknown fault"),
                            ("delay=-1", "milliseconds"), ("seed=x", "whole number"), ("loss=1", "silent-after")] {
            #expect(throws: FaultProfileError.self) { try FaultProfile(parsing: bad) }
            do { _ = try FaultProfile(parsing: bad) } catch {
                #expect("\(error)".contains(hint), "\(bad): \(error)")
            }
        }
    }

    /// The fates of `count` requests and answers under `profile`.
    static func trace(_ profile: FaultProfile, count: Int) -> [String] {
        var plan = FaultPlan(profile)
        var bytes = [UInt8](repeating: 0, count: 64)
        return (0..<count).map { _ in
            let changed = plan.corrupt(&bytes)
            return "\(plan.request(imageChunk(off: 1))) \(plan.answer()) \(changed) \(plan.noiseLine() != nil) \(plan.keepLine())"
        }
    }

    @Test("the same seed replays the same faults; another seed does not")
    func replay() throws {
        let profile = try FaultProfile(parsing: "loss=0.2,dup=0.1,reorder=0.1,jitter=20,corrupt=0.01,noise=0.2,drop-lines=0.1,seed=7")
        #expect(Self.trace(profile, count: 500) == Self.trace(profile, count: 500))
        var other = profile
        other.seed = 8
        #expect(Self.trace(profile, count: 500) != Self.trace(other, count: 500))
    }

    @Test("rates come out as configured (within a wide margin over 20000 draws)")
    func rates() throws {
        var plan = FaultPlan(try FaultProfile(parsing: "loss=0.1,dup=0.05,reorder=0.02,seed=11"))
        var lost = 0, duplicated = 0, held = 0, dropped = 0
        let draws = 20_000
        for _ in 0..<draws {
            if plan.request(Self.imageChunk(off: 1)) == .lose { dropped += 1 }
            switch plan.answer() {
            case .send(0, _): lost += 1
            case .send(2, _): duplicated += 1
            case .holdForNext: held += 1
            default: break
            }
        }
        #expect((1600...2400).contains(dropped), "\(dropped) requests lost of \(draws) at 10%")
        #expect((1600...2400).contains(lost), "\(lost) answers lost of \(draws) at 10%")
        #expect((600...1200).contains(duplicated), "\(duplicated) duplicated at 5% of the rest")
        #expect((200...600).contains(held), "\(held) reordered at 2% of the rest")
    }

    @Test("byte corruption flips one bit in about rate x bytes, across calls")
    func corruption() throws {
        var plan = FaultPlan(try FaultProfile(parsing: "corrupt=1e-3,seed=5"))
        var changedBytes = 0
        var flagged = 0
        for _ in 0..<200 {
            let clean = (0..<1000).map { UInt8(truncatingIfNeeded: $0) }
            var bytes = clean
            flagged += plan.corrupt(&bytes)
            for (a, b) in zip(clean, bytes) where a != b {
                changedBytes += 1
                #expect((a ^ b).nonzeroBitCount == 1)
            }
        }
        #expect(changedBytes == flagged)
        #expect((100...320).contains(changedBytes), "\(changedBytes) of 200000 bytes at 1e-3")
        var none = FaultPlan(FaultProfile())
        var bytes = [UInt8](repeating: 7, count: 10_000)
        #expect(none.corrupt(&bytes) == 0 && bytes.allSatisfy { $0 == 7 })
    }

    @Test("a reset after every N upload bytes, `resets` times; not for other requests")
    func resetAfterBytes() throws {
        var plan = FaultPlan(try FaultProfile(parsing: "reset-after=1000,resets=3"))
        let echo = Self.request(group: 0, command: 0, body: [0xA1, 0x61, 0x64, 0x62, 0x68, 0x69] + [UInt8](repeating: 0, count: 600))
        for _ in 0..<10 { #expect(plan.request(echo) == .deliver) }
        let chunk = Self.imageChunk(off: 1, size: 300)
        let fates = (0..<20).map { _ in plan.request(chunk) }
        // 322 bytes a chunk: the 4th, 7th and 10th cross 1000, 2000, 3000; then no more resets.
        #expect(fates.enumerated().filter { $0.element == .reset }.map(\.offset) == [3, 6, 9], "\(fates)")
    }

    @Test("a reset during the erase of the first image upload only; then silence after N answers")
    func resetInEraseAndSilence() throws {
        var plan = FaultPlan(try FaultProfile(parsing: "reset-in-erase=1,silent-after=3"))
        #expect(plan.request(Self.imageChunk(off: 1)) == .deliver)
        #expect(plan.request(Self.imageChunk(off: 0)) == .reset)
        #expect(plan.request(Self.imageChunk(off: 0)) == .deliver)
        #expect(!plan.isSilent)
        #expect(plan.request(Self.imageChunk(off: 5)) == .deliver)
        // Three answered: silent from now on.
        #expect(plan.isSilent)
        #expect(plan.request(Self.imageChunk(off: 6)) == .silence)
        #expect(plan.request(Self.imageChunk(off: 0)) == .silence)
    }

    @Test("noise lines look like Zephyr log lines and end in a newline")
    func noise() throws {
        var plan = FaultPlan(try FaultProfile(parsing: "noise=1,seed=2"))
        for _ in 0..<50 {
            let drawn = plan.noiseLine()
            let line = try #require(drawn)
            #expect(line.last == 0x0A && line.dropLast().allSatisfy { $0 >= 0x20 && $0 < 0x7F })
            #expect(!line.contains(0x06) && !line.contains(0x04), "no frame markers in noise")
        }
    }
}
