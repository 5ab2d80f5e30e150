import Testing

@testable import McuMgrSimulator

/// Zephyr's uart_mcumgr receive line buffers (2 x 128 bytes by default), one line per event, times in
/// milliseconds; the device reads every 20 ms. The cases are the ones measured on native_sim_serial 4.4.0.
@Suite("Serial line buffers")
struct SerialLineBuffersTests {
    static func ms(_ value: Double) -> UInt64 { UInt64(value * 1_000_000) }

    static func line(_ length: Int, continuation: Bool = false) -> [UInt8] {
        (continuation ? [0x04, 0x14] : [0x06, 0x09]) + [UInt8](repeating: UInt8(ascii: "A"), count: length - 3) + [0x0A]
    }

    @Test func aLineOfUpToTheBufferSizeIsTakenALongerOneDropped() {
        var buffers = SerialLineBuffers(lineSize: 128, lineCount: 2)
        #expect(buffers.receive(Self.line(127), at: 0) == [])
        #expect(buffers.receive(Self.line(131), at: 0) == [.lineTooLong])
        #expect(buffers.release(upTo: Self.ms(20)) == [Self.line(127)])
    }

    @Test func twoLinesBackToBackAreTakenAThirdIsDropped() {
        var buffers = SerialLineBuffers(lineSize: 128, lineCount: 2)
        let lines = [Self.line(127), Self.line(127, continuation: true), Self.line(60, continuation: true)]
        #expect(buffers.receive(Array(lines.joined()), at: Self.ms(1)) == [.insufficientBuffers])
        #expect(buffers.nextRelease == Self.ms(20))
        #expect(buffers.release(upTo: Self.ms(19)) == [])
        #expect(buffers.release(upTo: Self.ms(20)) == [lines[0], lines[1]])
    }

    @Test func aSecondBurstIsTakenOnlyAfterTheReadThatTookTheFirst() {
        // Two lines right behind the device's read at 20 ms, two more 12 ms later: still before the
        // next read, so no buffer is free (native_sim loses most such frames).
        var early = SerialLineBuffers(lineSize: 128, lineCount: 2)
        let burst = Self.line(127) + Self.line(127, continuation: true)
        #expect(early.receive(burst, at: Self.ms(21)) == [])
        #expect(early.release(upTo: Self.ms(33)) == [])
        #expect(early.receive(burst, at: Self.ms(33)) == [.insufficientBuffers, .insufficientBuffers])
        // 30 ms later: after the read at 40 ms, which freed both buffers; taken at the read at 60 ms.
        var paced = SerialLineBuffers(lineSize: 128, lineCount: 2)
        #expect(paced.receive(burst, at: Self.ms(21)) == [])
        #expect(paced.release(upTo: Self.ms(51)).count == 2)
        #expect(paced.receive(burst, at: Self.ms(51)) == [])
        #expect(paced.nextRelease == Self.ms(60))
    }

    @Test func linesTenMillisecondsApartAreAllTaken() {
        var buffers = SerialLineBuffers(lineSize: 128, lineCount: 2)
        var taken: [[UInt8]] = []
        for index in 0..<5 {
            let time = Self.ms(3 + 10 * Double(index))
            taken += buffers.release(upTo: time)
            #expect(buffers.receive(Self.line(127, continuation: index > 0), at: time) == [])
        }
        taken += buffers.release(upTo: Self.ms(60))
        #expect(taken.count == 5)
    }

    @Test func aRequestsLastLineHoldsItsBufferUntilTheAnswer() {
        var buffers = SerialLineBuffers(lineSize: 128, lineCount: 2)
        #expect(buffers.receive(Self.line(127) + Self.line(60, continuation: true), at: Self.ms(1)) == [])
        #expect(buffers.release(upTo: Self.ms(20)).count == 2)
        // The second line completed a request answered later (the device was busy): at 50 ms.
        buffers.holdProcessedBuffer(until: Self.ms(50))
        // A two-line frame before the answer: one buffer free, the second line is dropped.
        #expect(buffers.receive(Self.line(127) + Self.line(60, continuation: true), at: Self.ms(22)) == [.insufficientBuffers])
        #expect(buffers.release(upTo: Self.ms(40)).count == 1)
        // After the answer both buffers are free.
        #expect(buffers.receive(Self.line(127) + Self.line(60, continuation: true), at: Self.ms(51)) == [])
    }

    @Test func aPartialLineKeepsItsBuffer() {
        var buffers = SerialLineBuffers(lineSize: 128, lineCount: 2)
        let first = Self.line(100)
        #expect(buffers.receive(Array(first.prefix(50)), at: 0) == [])
        #expect(buffers.buffersInUse == 1)
        #expect(buffers.receive(Array(first.dropFirst(50)), at: Self.ms(25)) == [])
        #expect(buffers.release(upTo: Self.ms(39)) == [])
        #expect(buffers.release(upTo: Self.ms(40)) == [first])
    }
}
