#if canImport(Glibc)
import Glibc
#endif
import McuMgrDBus
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The SOCK_SEQPACKET descriptors of BlueZ's AcquireWrite / AcquireNotify (one ATT payload per
/// packet), served by a thread of its own: packets read from `readFD` go to `onPacket`; `send` writes
/// packets to `writeFD` at once when the socket takes them, else queues them for the thread, and never
/// blocks. A hang-up or error on either descriptor (the link dropped,
/// BlueZ or the peer released it) ends the link and calls `onClose` with the reason, once.
final class PacketSocketLink: @unchecked Sendable {
    private let readFD: Int32?
    private let writeFD: Int32?
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let onPacket: @Sendable ([UInt8]) -> Void
    private let onClose: @Sendable (String?) -> Void
    private let receiveSize: Int

    private let lock = NIOLock()
    private var queue: [[UInt8]] = []
    private var queueHead = 0
    private var stopping = false
    private var finished = false

    /// - Parameters:
    ///   - readFD: where packets arrive (notifications, or writes on a peripheral); owned from now on.
    ///   - writeFD: where packets go; owned from now on. May equal `readFD`.
    ///   - receiveSize: the largest packet expected (larger ones would be cut by the socket).
    init(
        readFD: Int32?, writeFD: Int32?, receiveSize: Int = 65536, onPacket: @escaping @Sendable ([UInt8]) -> Void,
        onClose: @escaping @Sendable (String?) -> Void
    ) throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw PacketSocketError("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds + [readFD, writeFD].compactMap({ $0 }) {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        self.readFD = readFD
        self.writeFD = writeFD
        self.wakeRead = fds[0]
        self.wakeWrite = fds[1]
        self.onPacket = onPacket
        self.onClose = onClose
        self.receiveSize = receiveSize
        startDetachedThread(name: "ble socket") { [self] in self.run() }
    }

    /// Writes packets to `writeFD`, in order: at once on the caller's thread while nothing waits in the
    /// queue and the socket takes them (no wake-up of the link's thread on the way of a request), the
    /// rest queued for the link's thread.
    /// - Returns: false when the link has ended.
    @discardableResult
    func send(_ packets: [[UInt8]]) -> Bool {
        lock.lock()
        guard !stopping, !finished else {
            lock.unlock()
            return false
        }
        var sent = 0
        // A packet the thread is writing counts as queued until written, so order holds; the
        // descriptors stay open until `finished` is set, under this lock.
        if queueHead == queue.count, let writeFD {
            while sent < packets.count {
                let written = packets[sent].withUnsafeBytes {
                    Glibc.send(writeFD, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
                if written >= 0 {
                    sent += 1
                } else if errno != EINTR {
                    break  // Full, or failed: the link's thread writes the rest, or reports the failure.
                }
            }
        }
        guard sent < packets.count else {
            lock.unlock()
            return true
        }
        queue.append(contentsOf: packets[sent...])
        lock.unlock()
        wake()
        return true
    }

    /// Whether the link still runs.
    var isOpen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !stopping && !finished
    }

    /// Ends the link without calling `onClose`; closes the descriptors.
    func close() {
        lock.lock()
        stopping = true
        lock.unlock()
        wake()
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: receiveSize)
        var reason: String?
        loop: while true {
            lock.lock()
            if stopping {
                lock.unlock()
                break loop
            }
            let pending = queue.count - queueHead
            lock.unlock()

            // Write what the socket takes.
            if pending > 0, let writeFD {
                while true {
                    lock.lock()
                    guard queueHead < queue.count else {
                        queue.removeAll(keepingCapacity: true)
                        queueHead = 0
                        lock.unlock()
                        break
                    }
                    let packet = queue[queueHead]
                    lock.unlock()
                    let written = packet.withUnsafeBytes { Glibc.send(writeFD, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
                    if written >= 0 {
                        lock.lock()
                        queueHead += 1
                        lock.unlock()
                        continue
                    }
                    if errno == EINTR { continue }
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS { break }
                    reason = "writing to the link failed: \(String(cString: strerror(errno)))"
                    break loop
                }
            }

            lock.lock()
            let stillPending = queueHead < queue.count
            lock.unlock()
            var fds: [pollfd] = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if let readFD { fds.append(pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)) }
            if let writeFD, writeFD != readFD {
                fds.append(pollfd(fd: writeFD, events: stillPending ? Int16(POLLOUT) : 0, revents: 0))
            } else if let writeFD, stillPending, let index = fds.firstIndex(where: { $0.fd == writeFD }) {
                fds[index].events |= Int16(POLLOUT)
            }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                reason = "poll failed: \(String(cString: strerror(errno)))"
                break
            }
            if fds[0].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &sink, sink.count) > 0 {}
            }
            for entry in fds.dropFirst() {
                if entry.fd == readFD, entry.revents & Int16(POLLIN) != 0 {
                    // Drain every packet that is there.
                    while true {
                        let count = recv(entry.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                        if count > 0 {
                            onPacket(Array(buffer[0..<count]))
                            continue
                        }
                        if count == 0 {
                            reason = "the other side released the link"
                            break loop
                        }
                        if errno == EINTR { continue }
                        if errno == EAGAIN || errno == EWOULDBLOCK { break }
                        reason = "reading from the link failed: \(String(cString: strerror(errno)))"
                        break loop
                    }
                }
                if entry.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0, entry.revents & Int16(POLLIN) == 0 || entry.fd != readFD {
                    reason = "the link was closed (hang-up)"
                    break loop
                }
            }
        }
        lock.lock()
        finished = true
        let local = stopping
        lock.unlock()
        if let readFD { Glibc.close(readFD) }
        if let writeFD, writeFD != readFD { Glibc.close(writeFD) }
        if !local { onClose(reason) }
    }

    deinit {
        // The wake-up pipe lives as long as the object, so `send` and `close` never write to a
        // descriptor number that was closed and reused.
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }
}

struct PacketSocketError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
