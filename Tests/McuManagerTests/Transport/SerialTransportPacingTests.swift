import Foundation
import McuManager
import McuMgrCore
import McuMgrSerial
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The serial transport on a real pty: frames longer than the device's line buffers go out in bursts.
@Suite("Serial transport: frames cut to the device's line buffers", .serialized)
struct SerialTransportPacingTests {
    /// A pty pair; the transport opens the slave by path, the test reads the master.
    final class Pty {
        let master: Int32
        let slave: Int32
        let path: String
        init() throws {
            var master: Int32 = -1
            var slave: Int32 = -1
            guard openpty(&master, &slave, nil, nil, nil) == 0 else { throw CocoaError(.fileNoSuchFile) }
            var t = termios()
            tcgetattr(master, &t)
            cfmakeraw(&t)
            tcsetattr(master, TCSANOW, &t)
            self.master = master
            self.slave = slave
            path = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(slave)")
        }
        deinit {
            close(master)
            close(slave)
        }

        /// Bytes that arrive within `seconds`.
        func read(for seconds: Double, until enough: Int = .max) -> [UInt8] {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            let end = Date().addingTimeInterval(seconds)
            while Date() < end, bytes.count < enough {
                var fds = [pollfd(fd: master, events: Int16(POLLIN), revents: 0)]
                let wait = Int32(max(1, end.timeIntervalSinceNow * 1000))
                guard poll(&fds, 1, wait) > 0 else { continue }
                let n = Glibc.read(master, &buffer, buffer.count)
                if n > 0 { bytes += buffer[0..<n] }
            }
            return bytes
        }
    }

    static func lines(_ bytes: [UInt8]) -> [[UInt8]] {
        bytes.split(separator: 0x0A).map(Array.init)
    }

    @Test func aFiveLineFrameArrivesWholeInBursts() async throws {
        let pty = try Pty()
        let transport = SerialTransport(
            configuration: .init(path: pty.path, lines: 2, lineGap: .milliseconds(100)))
        try await transport.open { _ in }
        defer { Task { await transport.close() } }
        let packet = SMPPacket(
            header: SMPHeader(version: .v2, operation: .write, length: 0, group: .os, sequence: 1, command: McuMgrCommand(0)),
            payload: Array(repeating: 0x61, count: 372)
        ).bytes
        let frame = ConsoleSerialCodec(maximumLineLength: 127).encode(packet)
        #expect(frame.count == 5)
        try transport.send(packet)
        // The whole frame arrives, in order, over a real pty; when each burst goes out (two lines, a gap,
        // two lines, ...) is `SerialTransportPacingTimingTests`, in virtual time.
        let bytes = pty.read(for: 30, until: frame.reduce(0) { $0 + $1.count })
        #expect(Self.lines(bytes) == frame.map { Array($0.dropLast()) })
    }

    @Test func aFrameWithinTheLineBuffersGoesOutAtOnce() async throws {
        let pty = try Pty()
        let transport = SerialTransport(configuration: .init(path: pty.path, lines: 2, lineGap: .seconds(5)))
        try await transport.open { _ in }
        defer { Task { await transport.close() } }
        #expect(transport.linkLimits.maximumPacketSize == 182)
        let packet = SMPPacket(
            header: SMPHeader(version: .v2, operation: .write, length: 0, group: .os, sequence: 2, command: McuMgrCommand(0)),
            payload: Array(repeating: 0x62, count: 182 - 8)
        ).bytes
        try transport.send(packet)
        let bytes = pty.read(for: 2, until: ConsoleSerialCodec(maximumLineLength: 127).encodedSize(ofPacket: packet.count))
        #expect(Self.lines(bytes).count == 2)
    }

    @Test func linkLimitsStartFromZephyrsDefaultsAndHonourOptions() {
        let plain = SerialTransport(configuration: .init(path: "/dev/null"))
        #expect(plain.linkLimits.consoleLines == .zephyrDefault)
        #expect(plain.linkLimits.maximumPacketSize == 182)
        // A request holds the lines of its frame until answered: Zephyr's 2 lines hold one frame that
        // fills them, or two one-line requests (a download's), as the device's buffers allow.
        #expect(plain.linkLimits.framesInFlight == 2 && plain.linkLimits.framesFollowConsoleLines)
        #expect(plain.linkLimits.window == 1)  // nothing known of the device: one at a time
        let known = plain.linkLimits.refined(deviceBufferSize: 384, deviceBufferCount: 4)
        #expect(known.window(forPacket: 182) == 1 && known.window(forPacket: 89) == 2 && known.window == 2)
        #expect(known.description.hasPrefix("packet 182 B, 1 frame in flight (2 of one line), framing 4 B"))
        #expect(plain.linkLimits.refined(deviceBufferCount: 2).window(forPacket: 40) == 1)
        // Console framing spends 4 bytes of the device's buffer on length and CRC; 2 s erase resend floor.
        #expect(plain.linkLimits.framingOverhead == 4)
        #expect(plain.linkLimits.refined(deviceBufferSize: 2475).packetSize == 182)
        #expect(plain.linkLimits.refined(deviceBufferSize: 100).packetSize == 96)
        #expect(plain.linkLimits.eraseResendFloor == .seconds(2))
        #expect(plain.needsConsoleProbe)
        let fixed = SerialTransport(configuration: .init(path: "/dev/null", lineLength: 511, lines: 4, window: 2))
        #expect(!fixed.needsConsoleProbe)
        #expect(fixed.linkLimits.consoleLines == .init(length: 511, count: 4))
        #expect(fixed.linkLimits.framesInFlight == 2)
        #expect(fixed.linkLimits.session.window == 2)
        #expect(fixed.linkLimits.window == 2)
        #expect(fixed.linkLimits.refined(deviceBufferCount: 4).window == 2)
        // window= is taken as given, whatever the frames' lines.
        #expect(!fixed.linkLimits.framesFollowConsoleLines)
        #expect(fixed.linkLimits.refined(deviceBufferCount: 4).window(forPacket: 1500) == 2)
        // Resends: measured from round trips, unless a fixed interval is set (`retransmit=`).
        #expect(plain.linkLimits.session.retransmitInterval == nil && plain.linkLimits.session.adaptiveRetransmit)
        var slow = SerialTransport.Configuration(path: "/dev/null")
        slow.retransmitInterval = .seconds(5)
        #expect(SerialTransport(configuration: slow).linkLimits.session.retransmitInterval == .seconds(5))
        // Learning keeps what the user fixed.
        let half = SerialTransport(configuration: .init(path: "/dev/null", lines: 3))
        half.learnConsoleLines(.init(length: 511, count: 8), final: true)
        #expect(half.currentConsoleLines == .init(length: 511, count: 3))
        #expect(!half.needsConsoleProbe)
        let raw = SerialTransport(configuration: .init(path: "/dev/null", framing: .raw))
        #expect(!raw.needsConsoleProbe)
        #expect(raw.linkLimits.consoleLines == nil)
        #expect(raw.linkLimits.framingOverhead == 0)
    }
}
