import Testing

@testable import McuMgrSimulator

/// Zephyr's SMP UDP receive side with 2 buffers (native_sim_udp), times in milliseconds of the 10 ms tick.
@Suite("UDP receive queue")
struct UDPReceiveQueueTests {
    static func ms(_ value: Double) -> UInt64 { UInt64(value * 1_000_000) }

    /// Takes every queued datagram at `time`, retrying when told to wait; returns which were answered.
    static func drain(_ queue: inout UDPReceiveQueue, count: Int, at time: UInt64) -> [Int] {
        var answered: [Int] = []
        var now = time
        var index = 0
        while index < count {
            switch queue.take(at: now) {
            case .answer: answered.append(index); index += 1
            case .drop: index += 1
            case .wait(let until): now = until
            }
        }
        return answered
    }

    @Test func everyOtherDatagramOfABurstIsAnswered() {
        var queue = UDPReceiveQueue(bufferCount: 2)
        #expect(Self.drain(&queue, count: 20, at: Self.ms(3)) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18])
    }

    @Test func aSecondRequestBeforeTheAnswerIsDroppedAfterItIsTaken() {
        var queue = UDPReceiveQueue(bufferCount: 2)
        #expect(queue.take(at: Self.ms(1)) == .answer(at: Self.ms(10)))
        #expect(queue.take(at: Self.ms(6)) == .drop)
        #expect(queue.take(at: Self.ms(7)) == .wait(until: Self.ms(10)))
        // Stop and wait: sent when the answer arrives, taken.
        #expect(queue.take(at: Self.ms(10)) == .answer(at: Self.ms(20)))
    }

    @Test func fourBuffersHoldTwoRequests() {
        var queue = UDPReceiveQueue(bufferCount: 4)
        #expect(Self.drain(&queue, count: 6, at: Self.ms(3)) == [0, 1, 3, 4])
    }
}
