import Foundation
import McuManager
import McuMgrCore
@testable import McuMgrUDP
import Testing
import TestSupport

/// The UDP transport's link over real loopback sockets: one packet per datagram from the device, bad
/// datagrams reported as drops, an ICMP refusal or another socket error as a closed link that says why.
/// Each test waits for the events it expects (a condition, not a time).
@Suite("UDP transport link")
struct UDPTransportLinkTests {
    static func packet(_ payloadSize: Int, sequence: UInt8, using random: inout SplitMix64) -> [UInt8] {
        SMPHeader(
            operation: .writeResponse, length: UInt16(payloadSize), group: .image, sequence: sequence,
            command: McuMgrCommand(rawValue: 1)
        ).bytes + random.bytes(payloadSize)
    }

    /// A "device": a UDP socket on 127.0.0.1 that learns the transport's address from its first datagram.
    final class Device: @unchecked Sendable {
        let fd: Int32
        let port: Int
        private var peer = sockaddr_storage()
        private var peerLength = socklen_t(0)

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            guard bound else {
                close(fd)
                throw McuMgrError(.transport, "test device: cannot bind")
            }
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        /// Waits for the transport's first datagram (it tells the device where to answer).
        func receive() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 65536)
            peerLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = withUnsafeMutablePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &peerLength) }
            }
            return Array(buffer.prefix(max(0, count)))
        }

        func send(_ bytes: [UInt8]) {
            _ = withUnsafePointer(to: &peer) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes, bytes.count, 0, $0, peerLength) }
            }
        }

        deinit { close(fd) }
    }

    /// The transport open to `device`, the recorder of its events, after one request reached the device.
    static func connected(to device: Device) async throws -> (UDPTransport, TransportEventRecorder) {
        let transport = UDPTransport(configuration: .init(host: "127.0.0.1", port: device.port))
        let recorder = TransportEventRecorder()
        try await transport.open(recorder.handler)
        try transport.send(SMPHeader(operation: .read, length: 0, group: .os, sequence: 0, command: McuMgrCommand(rawValue: 0)).bytes)
        #expect(device.receive().count == 8)
        return (transport, recorder)
    }

    @Test func eachDatagramFromTheDeviceIsOnePacketAndBadOnesAreDrops() async throws {
        var random = SplitMix64(seed: 0x55)
        let a = Self.packet(0, sequence: 1, using: &random), b = Self.packet(1444, sequence: 2, using: &random)
        let c = Self.packet(40, sequence: 3, using: &random)
        let device = try Device()
        let (transport, recorder) = try await Self.connected(to: device)
        for bytes in [a, Array(b.prefix(7)), b, Array(c.dropLast()), a + c, c, []] { device.send(bytes) }
        let expected: [SeenEvent] = [
            .packet(a), .dropped(.invalidHeader(length: 7)), .packet(b), .dropped(.truncatedPacket(announced: 40, received: 39)),
            .dropped(.lengthOverrun(announced: 0, received: 48)), .packet(c), .dropped(.invalidHeader(length: 0)),
        ]
        #expect(await waitUntil(timeout: .seconds(30)) { recorder.events.count >= expected.count })
        #expect(recorder.events == expected)
        await transport.close()
        #expect(recorder.events.count == expected.count, "a close we make reports nothing: the transport closed it")
    }

    @Test func theLargestAndRandomDatagramsNeverCrash() async throws {
        var random = SplitMix64(seed: 0x77)
        let device = try Device()
        let (transport, recorder) = try await Self.connected(to: device)
        // The largest datagram UDP carries, then random ones, then a good packet: one event each.
        let largest = Self.packet(UDPTransport.largestDatagram - SMPHeader.size, sequence: 0, using: &random)
        device.send(largest)
        for _ in 0..<200 { device.send(random.bytes(Int(random.next(below: 64)))) }
        let good = Self.packet(3, sequence: 1, using: &random)
        device.send(good)
        #expect(await waitUntil(timeout: .seconds(30)) { recorder.events.last == .packet(good) })
        let events = recorder.events
        #expect(events.count == 202, "one event per datagram")
        #expect(events.first == .packet(largest))
        await transport.close()
    }

    /// Nothing listens on the port: the kernel's ICMP "port unreachable" ends the link with a hint.
    @Test func anICMPRefusalClosesTheLinkWithAHint() async throws {
        let port = try { () throws -> Int in try Device().port }()  // bound, then closed: nothing listens
        let transport = UDPTransport(configuration: .init(host: "127.0.0.1", port: port))
        let recorder = TransportEventRecorder()
        try await transport.open(recorder.handler)
        try transport.send(SMPHeader(operation: .read, length: 0, group: .os, sequence: 0, command: McuMgrCommand(rawValue: 0)).bytes)
        #expect(await waitUntil(timeout: .seconds(30)) { !recorder.events.isEmpty })
        #expect(
            recorder.events == [
                .closed(
                    .transport,
                    "udp:127.0.0.1:\(port) refused the request (ICMP port unreachable): nothing listens on that port; check the address and port (default 1337) and that the device runs SMP over UDP"
                )
            ])
        #expect(throws: McuMgrError.self) { try transport.send([0]) }
        await transport.close()
    }

    @Test func otherSocketErrorsSayWhatToDo() {
        let name = "udp:192.0.2.7:1337"
        let unreachable = PacketSocketLink.End(
            reason: "reading from the link failed: Network is unreachable", error: SystemCallError("recv", code: ENETUNREACH))
        #expect(UDPTransport.message(for: unreachable, name: name) == "UDP socket error for \(name): reading from the link failed: Network is unreachable")
        let tooLarge = PacketSocketLink.End(reason: "writing to the link failed", error: SystemCallError("send", code: EMSGSIZE))
        #expect(UDPTransport.message(for: tooLarge, name: name).contains("lower the MTU"))
    }
}
