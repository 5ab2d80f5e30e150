#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Packet sockets served by a thread of their own: the SOCK_SEQPACKET descriptors of BlueZ's
/// AcquireWrite / AcquireNotify (one ATT payload per packet), and a connected UDP socket (one SMP
/// datagram per packet). Packets read from `readFD` go to `onPacket`; `send` writes packets to `writeFD`
/// at once when the socket takes them, else queues them for the thread, and never blocks. A hang-up or
/// error on either descriptor (the link dropped, BlueZ or the peer released it, ICMP refused a
/// datagram) ends the link and calls `onClose` with the reason, once.
package final class PacketSocketLink: @unchecked Sendable {
    /// Why the link ended.
    package struct End: Sendable {
        /// What happened, for a message; nil when nothing was said.
        package var reason: String?
        /// The failed system call, when one ended the link (e.g. ECONNREFUSED on a UDP socket).
        package var error: SystemCallError?

        package init(reason: String?, error: SystemCallError?) {
            self.reason = reason
            self.error = error
        }
    }

    private let readFD: Int32?
    private let writeFD: Int32?
    private let wakePipe: WakePipe
    private let onPacket: @Sendable ([UInt8]) -> Void
    private let onClose: @Sendable (End) -> Void
    private let receiveSize: Int
    private let emptyPacketEnds: Bool

    private let lock = NIOLock()
    private var queue: [[UInt8]] = []
    private var queueHead = 0
    private var stopping = false
    private var finished = false

    /// - Parameters:
    ///   - readFD: where packets arrive (notifications, or writes on a peripheral); owned from now on.
    ///   - writeFD: where packets go; owned from now on. May equal `readFD`.
    ///   - receiveSize: the largest packet expected (larger ones would be cut by the socket).
    ///   - emptyPacketEnds: a read of 0 bytes means the peer released the link (a SOCK_SEQPACKET
    ///     socket); false where it is an empty datagram (UDP), which goes to `onPacket` like any other.
    package init(
        readFD: Int32?, writeFD: Int32?, receiveSize: Int = 65536, emptyPacketEnds: Bool = true,
        onPacket: @escaping @Sendable ([UInt8]) -> Void, onClose: @escaping @Sendable (End) -> Void
    ) throws {
        do throws(SystemCallError) {
            wakePipe = try WakePipe()
        } catch {
            throw PacketSocketError("\(error.call): \(error)")
        }
        for fd in [readFD, writeFD].compactMap({ $0 }) { try? SystemCall.makeNonBlockingAndCloseOnExec(fd) }
        self.readFD = readFD
        self.writeFD = writeFD
        self.onPacket = onPacket
        self.onClose = onClose
        self.receiveSize = receiveSize
        self.emptyPacketEnds = emptyPacketEnds
        startDetachedThread(name: "packet socket") { [self] in self.run() }
    }

    /// Writes packets to `writeFD`, in order: at once on the caller's thread while nothing waits in the
    /// queue and the socket takes them (no wake-up of the link's thread on the way of a request), the
    /// rest queued for the link's thread.
    /// - Returns: false when the link has ended.
    @discardableResult
    package func send(_ packets: [[UInt8]]) -> Bool {
        lock.lock()
        guard !stopping, !finished else {
            lock.unlock()
            return false
        }
        var sent = 0
        // A packet the thread is writing counts as queued until written, so order holds; the
        // descriptors stay open until `finished` is set, under this lock.
        if queueHead == queue.count, let writeFD {
            // Full, or failed: the link's thread writes the rest, or reports the failure.
            while sent < packets.count, (try? SystemCall.send(writeFD, packets[sent], flags: Int32(MSG_DONTWAIT))) != nil {
                sent += 1
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
    package var isOpen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return !stopping && !finished
    }

    /// Ends the link without calling `onClose`; closes the descriptors.
    package func close() {
        lock.lock()
        stopping = true
        lock.unlock()
        wake()
    }

    private func wake() {
        wakePipe.wake()
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: receiveSize)
        var reason: String?
        var failure: SystemCallError?
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
                    do throws(SystemCallError) {
                        guard try SystemCall.send(writeFD, packet, flags: Int32(MSG_DONTWAIT)) != nil else { break }
                    } catch {
                        reason = "writing to the link failed: \(error)"
                        failure = error
                        break loop
                    }
                    lock.lock()
                    queueHead += 1
                    lock.unlock()
                }
            }

            lock.lock()
            let stillPending = queueHead < queue.count
            lock.unlock()
            var fds: [pollfd] = [pollfd(fd: wakePipe.readEnd, events: Int16(POLLIN), revents: 0)]
            if let readFD { fds.append(pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)) }
            if let writeFD, writeFD != readFD {
                fds.append(pollfd(fd: writeFD, events: stillPending ? Int16(POLLOUT) : 0, revents: 0))
            } else if let writeFD, stillPending, let index = fds.firstIndex(where: { $0.fd == writeFD }) {
                fds[index].events |= Int16(POLLOUT)
            }
            do throws(SystemCallError) {
                _ = try SystemCall.poll(&fds, timeout: -1)
            } catch {
                reason = "poll failed: \(error)"
                failure = error
                break
            }
            if fds[0].revents != 0 { wakePipe.drain() }
            for entry in fds.dropFirst() {
                // A pending socket error (POLLERR: on UDP an ICMP error) is what the next read returns.
                if entry.fd == readFD, entry.revents & Int16(POLLIN | POLLERR) != 0 {
                    // Drain every packet that is there.
                    while true {
                        let count: Int?
                        do throws(SystemCallError) {
                            count = try SystemCall.receive(entry.fd, into: &buffer, flags: Int32(MSG_DONTWAIT))
                        } catch {
                            reason = "reading from the link failed: \(error)"
                            failure = error
                            break loop
                        }
                        guard let count else { break }
                        if count == 0, emptyPacketEnds {
                            reason = "the other side released the link"
                            break loop
                        }
                        onPacket(Array(buffer[0..<count]))
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
        if let readFD { SystemCall.close(readFD) }
        if let writeFD, writeFD != readFD { SystemCall.close(writeFD) }
        if !local { onClose(End(reason: reason, error: failure)) }
    }

    deinit {
        // The wake-up pipe lives as long as the object, so `send` and `close` never write to a
        // descriptor number that was closed and reused.
        wakePipe.close()
    }
}

package struct PacketSocketError: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}
