import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A UDP relay on 127.0.0.1 between `smp` and a device that loses datagrams: at random (seeded, so a
/// failure replays), each direction on its own, as on the lossy network path of a field device; or as a
/// rule chooses (`LossRule`), e.g. the answer to one chosen request.
final class LossyUDPProxy: @unchecked Sendable {
    /// Which way a datagram goes.
    enum Direction: Sendable { case toDevice, toClient }
    /// Decides whether to lose a datagram; called on the relay's thread, in order.
    typealias LossRule = (Direction, ArraySlice<UInt8>) -> Bool

    /// The port `smp` talks to.
    let port: Int
    private let clientSocket: Int32
    private let deviceSocket: Int32
    private let lose: LossRule
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
    init(devicePort: Int, lose: @escaping LossRule) throws {
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
        self.lose = lose
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
                    count(lose(.toDevice, buffer[0..<n])) { _ = send(deviceSocket, buffer, n, 0) }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let n = recv(deviceSocket, &buffer, buffer.count, 0)
                if n > 0, haveClient {
                    count(lose(.toClient, buffer[0..<n])) {
                        _ = withUnsafePointer(to: &clientAddress) {
                            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                                sendto(clientSocket, buffer, n, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                            }
                        }
                    }
                }
            }
        }
        close(clientSocket)
        close(deviceSocket)
    }

    private func count(_ lost: Bool, _ forward: () -> Void) {
        lock.lock()
        if lost { dropped += 1 } else { forwarded += 1 }
        lock.unlock()
        if !lost { forward() }
    }
}
