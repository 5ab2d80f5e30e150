import Foundation
import TestSupport
import Testing

@testable import McuManager

#if canImport(Glibc)
import Glibc
#endif

/// PacketSocketLink over a SOCK_SEQPACKET socket pair: packets written at once and packets queued
/// behind a full socket arrive whole and in order, whatever thread sends them.
@Suite struct PacketSocketLinkTests {
    /// A link on one end of a socket pair with a small send buffer, and the other end.
    static func pair() throws -> (link: PacketSocketLink, peer: Int32, closed: LockedValue<String?>) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0 else { throw POSIXError(.EIO) }
        var size: Int32 = 4096
        _ = setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let closed = LockedValue<String?>(nil)
        let link = try PacketSocketLink(readFD: fds[0], writeFD: fds[0], onPacket: { _ in }, onClose: { end in closed.withValue { $0 = end.reason ?? "closed" } })
        return (link, fds[1], closed)
    }

    /// Reads `count` packets from `fd` (blocking), each as its first four bytes (a big-endian number).
    static func read(_ count: Int, from fd: Int32) -> [UInt32] {
        var numbers: [UInt32] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while numbers.count < count {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n >= 4 else { break }
            numbers.append(buffer[0..<4].reduce(0) { $0 << 8 | UInt32($1) })
        }
        return numbers
    }

    static func packet(_ number: Int) -> [UInt8] {
        let n = UInt32(number)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + [UInt8](repeating: 0xA5, count: 500)
    }

    @Test func packetsBeyondWhatTheSocketHoldsArriveInOrder() async throws {
        let (link, peer, closed) = try Self.pair()
        defer {
            link.close()
            Glibc.close(peer)
        }
        // Far more than the socket buffer holds while nobody reads: the first go at once, the rest queue.
        for number in 0..<400 { #expect(link.send([Self.packet(number)])) }
        #expect(Self.read(400, from: peer) == (0..<400).map(UInt32.init))
        // Once drained, sends write at once again, in order with what the thread wrote.
        #expect(link.send((400..<410).map(Self.packet)))
        #expect(Self.read(10, from: peer) == (400..<410).map(UInt32.init))
        #expect(closed.value == nil)
    }

    @Test func sendsFromManyTasksKeepEachTasksOrder() async throws {
        let (link, peer, _) = try Self.pair()
        defer {
            link.close()
            Glibc.close(peer)
        }
        let reader = Task.detached { Self.read(8 * 200, from: peer) }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<200 { link.send([Self.packet(task * 1000 + index)]) }
                }
            }
        }
        let numbers = await reader.value
        #expect(numbers.count == 1600)
        for task in 0..<8 {
            let mine = numbers.filter { $0 / 1000 == UInt32(task) }
            #expect(mine == (0..<200).map { UInt32(task * 1000 + $0) })
        }
    }

    @Test func aSendAfterThePeerLeftFailsWithTheReason() async throws {
        let (link, peer, closed) = try Self.pair()
        Glibc.close(peer)
        #expect(await waitUntil { closed.value != nil })
        #expect(link.send([Self.packet(1)]) == false)
        link.close()
    }

}
