import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A UDP relay on 127.0.0.1 between `smp` and a device that loses datagrams: at random (seeded, so a
/// failure replays), each direction on its own, as on the lossy network path of a field device; or as a
/// rule chooses (`LossRule`), e.g. the answer to one chosen request; or one that rewrites the traffic
/// (`Rewrite`): garbage, answers to requests never sent, silence.
final class LossyUDPProxy: @unchecked Sendable {
    /// Which way a datagram goes.
    enum Direction: Sendable { case toDevice, toClient }
    /// Decides whether to lose a datagram; called on the relay's thread, in order.
    typealias LossRule = (Direction, ArraySlice<UInt8>) -> Bool
    /// The datagrams to send on in place of one (none: it is lost); called on the relay's thread, in order.
    typealias Rewrite = (Direction, ArraySlice<UInt8>) -> [[UInt8]]

    /// The port `smp` talks to.
    let port: Int
    private let clientSocket: Int32
    private let deviceSocket: Int32
    private let rewrite: Rewrite
    private let lock = NSLock()
    private let life = RelayLife()
    private var clientAddress = sockaddr_in()
    private var haveClient = false
    private(set) var forwarded = 0
    private(set) var dropped = 0

    /// Loses `lossRate` of the datagrams in each direction, at random.
    convenience init(devicePort: Int, lossRate: Double, seed: UInt64 = 7) throws {
        var dice = SeededBytes(seed: seed)
        try self.init(devicePort: devicePort) { _, _ in dice.chance(lossRate) }
    }

    /// - Parameters:
    ///   - devicePort: the device's UDP port on 127.0.0.1.
    ///   - lose: whether to lose each datagram.
    convenience init(devicePort: Int, lose: @escaping LossRule) throws {
        try self.init(devicePort: devicePort) { direction, datagram in lose(direction, datagram) ? [] : [Array(datagram)] }
    }

    /// - Parameters:
    ///   - devicePort: the device's UDP port on 127.0.0.1.
    ///   - rewrite: what to send on for each datagram.
    init(devicePort: Int, rewrite: @escaping Rewrite) throws {
        func udpSocket() throws -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw E2EError("socket: errno \(errno)") }
            return fd
        }
        let clientSocket = try udpSocket()
        let deviceSocket = try udpSocket()
        guard let port = bindToLoopback(clientSocket) else { throw E2EError("bind: errno \(errno)") }
        var device = sockaddr_in()
        device.sin_family = sa_family_t(AF_INET)
        device.sin_addr.s_addr = inet_addr("127.0.0.1")
        device.sin_port = UInt16(devicePort).bigEndian
        let connected = withUnsafePointer(to: &device) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(deviceSocket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw E2EError("connect: errno \(errno)") }
        self.clientSocket = clientSocket
        self.deviceSocket = deviceSocket
        self.port = port
        self.rewrite = rewrite
        Thread { [self] in self.relay() }.start()
    }

    func stop() { life.stop() }

    private func relay() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var fds = [pollfd(fd: clientSocket, events: Int16(POLLIN), revents: 0), pollfd(fd: deviceSocket, events: Int16(POLLIN), revents: 0)]
        while life.isRunning {
            guard poll(&fds, 2, 50) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                var from = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(clientSocket, &buffer, buffer.count, 0, $0, &length) }
                }
                if n > 0 {
                    clientAddress = from
                    haveClient = true
                    for datagram in count(rewrite(.toDevice, buffer[0..<n])) { _ = send(deviceSocket, datagram, datagram.count, 0) }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let n = recv(deviceSocket, &buffer, buffer.count, 0)
                if n > 0, haveClient {
                    for datagram in count(rewrite(.toClient, buffer[0..<n])) {
                        _ = withUnsafePointer(to: &clientAddress) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                sendto(clientSocket, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                            }
                        }
                    }
                }
            }
        }
        close(clientSocket)
        close(deviceSocket)
        life.threadEnded()
    }

    /// Counts a datagram as dropped (nothing to send on) or forwarded; returns what to send.
    private func count(_ datagrams: [[UInt8]]) -> [[UInt8]] {
        lock.lock()
        if datagrams.isEmpty { dropped += 1 } else { forwarded += 1 }
        lock.unlock()
        return datagrams
    }
}
