import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A UDP relay between `smp` and a device on 127.0.0.1 that loses chosen answers: the device gets every
/// request, but the answer to the n-th fs upload request (group 8, command 0, write) is dropped, as when
/// a datagram is lost on its way back.
final class AnswerDroppingUDPRelay: @unchecked Sendable {
    let port: Int
    private let socketFD: CInt
    private let deviceFD: CInt
    private let lock = NSLock()
    private var uploads = 0
    private var pendingDrops: Set<UInt8> = []
    private var running = true
    private var thread: Thread?
    /// Answers dropped so far.
    private(set) var dropped = 0

    /// - Parameter dropAnswersTo: 1-based numbers of the fs upload requests whose answer is lost.
    init(devicePort: Int, dropAnswersTo: Set<Int>) throws {
        let socketFD = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        let deviceFD = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard socketFD >= 0, deviceFD >= 0 else { throw E2EError("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) }
        }
        guard bound == 0 else { throw E2EError("bind: \(errno)") }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketFD, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        var device = sockaddr_in()
        device.sin_family = sa_family_t(AF_INET)
        device.sin_addr.s_addr = inet_addr("127.0.0.1")
        device.sin_port = UInt16(devicePort).bigEndian
        let connected = withUnsafePointer(to: &device) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(deviceFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw E2EError("connect: \(errno)") }
        self.socketFD = socketFD
        self.deviceFD = deviceFD
        self.port = port
        let drops = dropAnswersTo
        let thread = Thread { [self] in relay(drops) }
        self.thread = thread
        thread.start()
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    private func relay(_ drops: Set<Int>) {
        var client = sockaddr_storage()
        var clientLength = socklen_t(0)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while isRunning {
            var fds = [pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0), pollfd(fd: deviceFD, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 100) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                clientLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                let n = withUnsafeMutablePointer(to: &client) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(socketFD, &buffer, buffer.count, 0, $0, &clientLength) }
                }
                if n >= 8 {
                    // An fs upload request (write, group 8, command 0): count it, and mark its sequence.
                    if buffer[0] & 0x07 == 2, buffer[4] == 0, buffer[5] == 8, buffer[7] == 0 {
                        lock.lock()
                        uploads += 1
                        if drops.contains(uploads) { pendingDrops.insert(buffer[6]) }
                        lock.unlock()
                    }
                    _ = send(deviceFD, buffer, n, 0)
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let n = recv(deviceFD, &buffer, buffer.count, 0)
                guard n >= 8, clientLength > 0 else { continue }
                lock.lock()
                let drop = buffer[4] == 0 && buffer[5] == 8 && buffer[7] == 0 && pendingDrops.remove(buffer[6]) != nil
                if drop { dropped += 1 }
                lock.unlock()
                if drop { continue }
                _ = withUnsafePointer(to: &client) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(socketFD, buffer, n, 0, $0, clientLength) }
                }
            }
        }
        close(socketFD)
        close(deviceFD)
    }

    func stop() {
        lock.lock()
        running = false
        lock.unlock()
    }
}
