#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls of our transports and files, in one place: each repeats its C call while a signal
/// interrupts it (EINTR) and throws `SystemCallError` with the call's name and `errno` when it fails,
/// so no caller writes its own loop or reads `errno` itself. The transports and the D-Bus layer live
/// in targets of their own; all of them depend on this one, hence `package`.
package enum SystemCall {
    /// `call()` again while it returns -1 with `errno` EINTR: a signal whose handler ran (one that
    /// a library or the host program installed without SA_RESTART) ended the call before it did
    /// anything, and it is safe to make again. Any other -1 throws the call's `name` and `errno`.
    package static func retryingOnInterrupt<Value: FixedWidthInteger & SignedInteger>(
        _ name: String, _ call: () -> Value
    ) throws(SystemCallError) -> Value {
        while true {
            let result = call()
            if result != -1 { return result }
            let code = errno
            if code != EINTR { throw SystemCallError(name, code: code) }
        }
    }

    /// As `retryingOnInterrupt`, but nil when a non-blocking descriptor would block (EAGAIN,
    /// EWOULDBLOCK, or `alsoWouldBlock`): the caller waits for it, or lets its event loop write later.
    package static func unlessItWouldBlock<Value: FixedWidthInteger & SignedInteger>(
        _ name: String, alsoWouldBlock: Int32 = EAGAIN, _ call: () -> Value
    ) throws(SystemCallError) -> Value? {
        do {
            return try retryingOnInterrupt(name, call)
        } catch where error.code == EAGAIN || error.code == EWOULDBLOCK || error.code == alsoWouldBlock {
            return nil
        }
    }

    /// Opens `path` (`flags` as open(2) takes them; `mode` for a file that `O_CREAT` creates).
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemCallError) -> Int32 {
        try retryingOnInterrupt("open") { cOpen(path, flags, mode) }
    }

    /// Closes `fd`, once: never retried and never failing. On Linux the descriptor is released even when
    /// close(2) reports EINTR, so a second close could close the descriptor another thread has just
    /// been given under the same number; and an error from close (a write-back that failed on a
    /// network file system) leaves nothing to retry, so it is ignored as it always was.
    package static func close(_ fd: Int32) {
        _ = cClose(fd)
    }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try retryingOnInterrupt("read") { cRead(fd, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes at `offset`, leaving the file position alone; 0 at the end.
    package static func pread(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
    ) throws(SystemCallError) -> Int {
        try retryingOnInterrupt("pread") { cPread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes what `fd` takes of `bytes` at once: all of it, or a part after a signal or when a pipe or
    /// socket buffer is nearly full.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        try retryingOnInterrupt("write") { cWrite(fd, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes`, however many writes that takes (a pipe takes at most its free space at
    /// once). On a non-blocking descriptor that is full, throws EAGAIN with part of `bytes` written.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        try writeAll(bytes) { cWrite(fd, $0.baseAddress, $0.count) }
    }

    /// The loop of `writeAll(_:_:)` over any call that writes like write(2) (the bytes it took, or -1
    /// and `errno`); the tests drive it with one that takes a few bytes at a time.
    package static func writeAll(
        _ bytes: UnsafeRawBufferPointer, with write: (UnsafeRawBufferPointer) -> Int
    ) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[done...])
            // write(2) takes at least one byte of a non-empty buffer, or fails.
            done += try retryingOnInterrupt("write") { write(rest) }
        }
    }

    /// Sends one packet or datagram on a socket, with MSG_NOSIGNAL always: a peer that went away
    /// fails the call with EPIPE instead of killing the process with SIGPIPE. Nil when the socket's
    /// buffer is full (EAGAIN, or ENOBUFS: the interface's queue, which UDP reports instead); the
    /// caller queues the packet and writes it when the socket drains.
    package static func send(_ fd: Int32, _ packet: [UInt8], flags: Int32 = 0) throws(SystemCallError) -> Int? {
        try unlessItWouldBlock("send", alsoWouldBlock: ENOBUFS) {
            cSend(fd, packet, packet.count, flags | Int32(MSG_NOSIGNAL))
        }
    }

    /// Receives one packet into `buffer` (a longer one is cut); 0 when the peer shut the socket down,
    /// nil when nothing is waiting on a non-blocking socket.
    package static func receive(_ fd: Int32, into buffer: inout [UInt8], flags: Int32 = 0) throws(SystemCallError) -> Int? {
        let capacity = buffer.count
        return try unlessItWouldBlock("recv") { cRecv(fd, &buffer, capacity, flags) }
    }

    /// Waits until one of `descriptors` is ready or `timeout` milliseconds pass (-1: no limit); the
    /// number of ready descriptors, their `revents` set. An interrupted wait returns 0 with no `revents`,
    /// as if the time ran out, instead of waiting again: every caller polls in a loop that checks its
    /// own state and computes a fresh timeout first, which waiting again with the old one would skip.
    package static func poll(_ descriptors: inout [pollfd], timeout: Int32) throws(SystemCallError) -> Int {
        let ready = cPoll(&descriptors, nfds_t(descriptors.count), timeout)
        if ready >= 0 { return Int(ready) }
        let code = errno
        guard code == EINTR else { throw SystemCallError("poll", code: code) }
        for index in descriptors.indices { descriptors[index].revents = 0 }
        return 0
    }

    /// A new socket (`type` may carry SOCK_NONBLOCK and SOCK_CLOEXEC).
    package static func socket(_ domain: Int32, _ type: Int32, _ protocol: Int32 = 0) throws(SystemCallError) -> Int32 {
        try retryingOnInterrupt("socket") { cSocket(domain, type, `protocol`) }
    }

    /// Two connected sockets (`type` may carry SOCK_CLOEXEC).
    package static func socketPair(_ domain: Int32, _ type: Int32) throws(SystemCallError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        _ = try retryingOnInterrupt("socketpair") { cSocketpair(domain, type, 0, &fds) }
        return (fds[0], fds[1])
    }

    /// Sets an integer socket option.
    package static func setSocketOption(_ fd: Int32, _ level: Int32, _ option: Int32, to value: Int32) throws(SystemCallError) {
        var value = value
        _ = try retryingOnInterrupt("setsockopt") {
            cSetsockopt(fd, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Connects a datagram socket, which only records the peer and never blocks. Not for stream
    /// sockets: an interrupted stream connect goes on in the background, and a second call fails.
    package static func connectDatagram(
        _ fd: Int32, to address: UnsafePointer<sockaddr>, length: Int
    ) throws(SystemCallError) {
        _ = try retryingOnInterrupt("connect") { cConnect(fd, address, socklen_t(length)) }
    }

    /// A pipe whose ends are non-blocking and closed on exec: (read end, write end). (pipe2(2) would
    /// set both flags at once, but Swift's Glibc module leaves it out.)
    package static func nonBlockingPipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        _ = try retryingOnInterrupt("pipe") { cPipe(&fds) }
        for fd in fds { try? makeNonBlockingAndCloseOnExec(fd) }
        return (fds[0], fds[1])
    }

    /// Makes a descriptor non-blocking and closed on exec (one BlueZ passed over D-Bus, a pipe's end).
    package static func makeNonBlockingAndCloseOnExec(_ fd: Int32) throws(SystemCallError) {
        let flags = try retryingOnInterrupt("fcntl") { cFcntl(fd, F_GETFL) }
        _ = try retryingOnInterrupt("fcntl") { cFcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        _ = try retryingOnInterrupt("fcntl") { cFcntl(fd, F_SETFD, FD_CLOEXEC) }
    }

    /// What fstat(2) tells of `fd`.
    package static func status(_ fd: Int32) throws(SystemCallError) -> stat {
        var status = stat()
        _ = try retryingOnInterrupt("fstat") { fstat(fd, &status) }
        return status
    }
}

/// A pipe that wakes a thread waiting in `SystemCall.poll` on its read end (the D-Bus I/O thread, a
/// BLE socket's thread): other threads `wake()` it after queueing work, the woken thread `drain()`s it.
package struct WakePipe: Sendable {
    package let readEnd: Int32
    package let writeEnd: Int32

    package init() throws(SystemCallError) {
        (readEnd, writeEnd) = try SystemCall.nonBlockingPipe()
    }

    /// Makes the read end readable. A full pipe (EAGAIN) is readable already.
    package func wake() {
        _ = try? withUnsafeBytes(of: UInt8(1)) { try SystemCall.write(writeEnd, $0) }
    }

    /// Reads every wake-up that is there, so that the next poll waits again.
    package func drain() {
        var sink = [UInt8](repeating: 0, count: 256)
        while let count = try? sink.withUnsafeMutableBytes({ try SystemCall.read(readEnd, into: $0) }), count > 0 {}
    }

    /// Closes both ends.
    package func close() {
        SystemCall.close(readEnd)
        SystemCall.close(writeEnd)
    }
}

// The C calls under names that `SystemCall`'s own methods do not shadow.
private func cOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func cClose(_ fd: Int32) -> Int32 { close(fd) }
private func cRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func cPread(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ offset: off_t) -> Int {
    pread(fd, buffer, count, offset)
}
private func cWrite(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, bytes, count) }
private func cSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    send(fd, bytes, count, flags)
}
private func cRecv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    recv(fd, buffer, count, flags)
}
private func cPoll(_ fds: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32) -> Int32 {
    poll(fds, count, timeout)
}
private func cSocket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 { socket(domain, type, proto) }
private func cSocketpair(_ domain: Int32, _ type: Int32, _ proto: Int32, _ fds: UnsafeMutablePointer<Int32>) -> Int32 {
    socketpair(domain, type, proto, fds)
}
private func cSetsockopt(_ fd: Int32, _ level: Int32, _ option: Int32, _ value: UnsafeRawPointer, _ length: socklen_t) -> Int32 {
    setsockopt(fd, level, option, value, length)
}
private func cConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
private func cPipe(_ fds: UnsafeMutablePointer<Int32>) -> Int32 { pipe(fds) }
private func cFcntl(_ fd: Int32, _ command: Int32) -> Int32 { fcntl(fd, command) }
private func cFcntl(_ fd: Int32, _ command: Int32, _ value: Int32) -> Int32 { fcntl(fd, command, value) }
