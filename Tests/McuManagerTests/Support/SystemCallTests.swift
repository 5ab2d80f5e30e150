#if canImport(Glibc)
import Glibc
#endif
import Foundation
import McuManager
import Testing

/// `SystemCall`, the one wrapper of the transports' and files' system calls: EINTR is retried, any
/// other failure is a `SystemCallError` naming the call, and a descriptor that would block answers nil
/// (or EAGAIN from `writeAll`) as the transports expect.
/// The SIGUSR1s that `aReadInterruptedByASignalIsMadeAgain`'s handler caught.
nonisolated(unsafe) private var signalsCaught: sig_atomic_t = 0

@Suite("SystemCall")
struct SystemCallTests {
    /// A C-style call that fails with `errno` `code` the first `failures` times, then returns `result`.
    final class FailingCall {
        var calls = 0
        let failures: Int
        let code: Int32
        let result: Int

        init(failing failures: Int, with code: Int32, then result: Int) {
            self.failures = failures
            self.code = code
            self.result = result
        }

        func callAsFunction() -> Int {
            calls += 1
            guard calls > failures else {
                errno = code
                return -1
            }
            return result
        }
    }

    @Test func anInterruptedCallIsMadeAgainUntilItSucceeds() throws {
        let call = FailingCall(failing: 2, with: EINTR, then: 7)
        #expect(try SystemCall.retryingOnInterrupt("read") { call() } == 7)
        #expect(call.calls == 3)
    }

    @Test func anotherFailureThrowsTheCallsNameAndErrnoAtOnce() {
        let call = FailingCall(failing: 1, with: EACCES, then: 0)
        #expect {
            try SystemCall.retryingOnInterrupt("open") { call() }
        } throws: { error in
            let error = error as? SystemCallError
            return error?.call == "open" && error?.code == EACCES && error?.description == "Permission denied"
        }
        #expect(call.calls == 1)
    }

    @Test func aRealCallThatFailsNamesItself() {
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect {
            _ = try buffer.withUnsafeMutableBytes { try SystemCall.read(-1, into: $0) }
        } throws: { error in
            let error = error as? SystemCallError
            return error?.call == "read" && error?.code == EBADF && describeFileError(error!) == "Bad file descriptor"
        }
        #expect {
            _ = try SystemCall.open("/nonexistent/\(#function)", O_RDONLY)
        } throws: { error in
            (error as? SystemCallError)?.code == ENOENT
        }
    }

    /// What the reader thread of `aReadInterruptedByASignalIsMadeAgain` hands back.
    final class Reader: @unchecked Sendable {
        let lock = NSLock()
        var thread: pthread_t?
        var result: Result<Int, any Error>?
    }

    @Test func aReadInterruptedByASignalIsMadeAgain() async throws {
        // A handler without SA_RESTART: the kernel ends the blocked read with EINTR instead of
        // restarting it itself, as it does for the signals the Swift runtime and NIO catch.
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in signalsCaught += 1 }
        action.sa_flags = 0
        sigemptyset(&action.sa_mask)
        var previous = sigaction()
        #expect(sigaction(SIGUSR1, &action, &previous) == 0)
        defer { sigaction(SIGUSR1, &previous, nil) }
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer {
            SystemCall.close(readEnd)
            SystemCall.close(writeEnd)
        }
        let reader = Reader()
        Thread {
            // Threads may start with signals blocked (the runtime's own threads do): let SIGUSR1 in.
            var usr1 = sigset_t()
            sigemptyset(&usr1)
            sigaddset(&usr1, SIGUSR1)
            pthread_sigmask(SIG_UNBLOCK, &usr1, nil)
            reader.lock.withLock { reader.thread = pthread_self() }
            var byte: [UInt8] = [0]
            let result = Result { try byte.withUnsafeMutableBytes { try SystemCall.read(readEnd, into: $0) } }
            reader.lock.withLock { reader.result = result }
        }.start()

        // Wait until the reader is blocked in read(2) on the pipe: /proc names its call by number (x86-64
        // 0, arm64 63) and its arguments.
        #if arch(arm64)
        let read = 63
        #else
        let read = 0
        #endif
        let blockedInRead = "\(read) 0x\(String(readEnd, radix: 16)) "
        func readerIsBlocked() -> Bool {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return tasks.contains { task in
                (try? String(contentsOfFile: "/proc/self/task/\(task)/syscall", encoding: .utf8))?.hasPrefix(blockedInRead) ?? false
            }
        }
        var waited = 0
        while !readerIsBlocked(), waited < 500 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        try #require(readerIsBlocked(), "the reader never blocked in read")
        let caughtBefore = signalsCaught
        #expect(pthread_kill(try #require(reader.lock.withLock { reader.thread }), SIGUSR1) == 0)
        while signalsCaught == caughtBefore, waited < 1000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(signalsCaught == caughtBefore + 1)

        // Had the wrapper not made the call again, the reader would have ended with EINTR by now.
        #expect(try [UInt8(42)].withUnsafeBytes { try SystemCall.write(writeEnd, $0) } == 1)
        while reader.lock.withLock({ reader.result == nil }), waited < 1500 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(try reader.lock.withLock { reader.result }?.get() == 1)
    }

    @Test func writeAllWritesTheRestAfterPartialAndInterruptedWrites() throws {
        let payload = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        var written: [UInt8] = []
        var calls = 0
        try payload.withUnsafeBytes { bytes in
            try SystemCall.writeAll(bytes) { rest in
                calls += 1
                if calls % 3 == 0 {
                    errno = EINTR
                    return -1
                }
                let count = min(rest.count, 33)
                written += rest.prefix(count)
                return count
            }
        }
        #expect(written == payload)
        #expect(calls == 31 + 15)  // 31 writes of up to 33 bytes, and every third call interrupted
    }

    @Test func writeAllStopsAtAFailureOtherThanAnInterrupt() {
        var calls = 0
        #expect {
            try [UInt8](repeating: 1, count: 100).withUnsafeBytes { bytes in
                try SystemCall.writeAll(bytes) { rest in
                    calls += 1
                    if calls == 1 { return 60 }
                    errno = EPIPE
                    return -1
                }
            }
        } throws: { error in
            (error as? SystemCallError).map { $0.call == "write" && $0.code == EPIPE } ?? false
        }
        #expect(calls == 2)
    }

    @Test func writeAllThroughABlockingPipeDeliversEveryByteInOrder() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { SystemCall.close(readEnd) }
        // Four times what a pipe holds: the writer waits for the reader, which reads in small pieces.
        let payload = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let writer = Thread {
            _ = try? payload.withUnsafeBytes { try SystemCall.writeAll(writeEnd, $0) }
            SystemCall.close(writeEnd)
        }
        writer.start()
        var received: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: 1500)
        while true {
            let count = try piece.withUnsafeMutableBytes { try SystemCall.read(readEnd, into: $0) }
            if count == 0 { break }
            received += piece.prefix(count)
        }
        #expect(received == payload)
    }

    @Test func writeAllOnAFullNonBlockingPipeThrowsEAGAINAfterWritingWhatFits() throws {
        let pipe = try SystemCall.nonBlockingPipe()
        defer {
            SystemCall.close(pipe.read)
            SystemCall.close(pipe.write)
        }
        let payload = (0..<(1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 % 251) }
        #expect {
            try payload.withUnsafeBytes { try SystemCall.writeAll(pipe.write, $0) }
        } throws: { error in
            (error as? SystemCallError).map { $0.call == "write" && $0.code == EAGAIN } ?? false
        }
        var received: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: 4096)
        while let count = try piece.withUnsafeMutableBytes({ buffer -> Int? in
            do {
                return try SystemCall.read(pipe.read, into: buffer)
            } catch let error as SystemCallError where error.code == EAGAIN {
                return nil
            }
        }) {
            received += piece.prefix(count)
        }
        // What the pipe took is the payload's start (a pipe holds 64 KiB unless configured otherwise).
        #expect(received.count >= 4096 && received.count < payload.count)
        #expect(received[...] == payload.prefix(received.count))
    }

    @Test func aFullOrEmptyNonBlockingSocketAnswersNil() throws {
        let (ours, theirs) = try SystemCall.socketPair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
        defer {
            SystemCall.close(ours)
            SystemCall.close(theirs)
        }
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try SystemCall.receive(ours, into: &buffer) == nil)

        let packet = [UInt8](repeating: 0xA5, count: 512)
        var sent = 0
        while try SystemCall.send(ours, packet) != nil, sent < 100_000 { sent += 1 }
        #expect(sent > 0 && sent < 100_000)  // the socket's buffer filled and `send` said so with nil

        #expect(try SystemCall.receive(theirs, into: &buffer) == 64)  // one packet, cut to the buffer
        #expect(buffer == Array(packet.prefix(64)))
    }

    @Test func aGonePeerReadsAsTheEndAndFailsASendWithoutSIGPIPE() throws {
        let (ours, theirs) = try SystemCall.socketPair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
        defer { SystemCall.close(ours) }
        SystemCall.close(theirs)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try SystemCall.receive(ours, into: &buffer) == 0)
        // Without MSG_NOSIGNAL this would kill the test process with SIGPIPE.
        #expect {
            _ = try SystemCall.send(ours, [1, 2, 3])
        } throws: { error in
            (error as? SystemCallError).map { $0.call == "send" && $0.code == EPIPE } ?? false
        }
    }

    @Test func aWakePipeWakesAPollUntilDrainedAndNeverBlocksWhenFull() throws {
        let wakePipe = try WakePipe()
        defer { wakePipe.close() }
        var descriptors = [pollfd(fd: wakePipe.readEnd, events: Int16(POLLIN), revents: 0)]
        #expect(try SystemCall.poll(&descriptors, timeout: 0) == 0)
        // More wake-ups than the pipe holds: the ones that do not fit are not needed and do not block.
        for _ in 0..<70_000 { wakePipe.wake() }
        #expect(try SystemCall.poll(&descriptors, timeout: 0) == 1)
        #expect(descriptors[0].revents & Int16(POLLIN) != 0)
        wakePipe.drain()
        #expect(try SystemCall.poll(&descriptors, timeout: 0) == 0)
        #expect(descriptors[0].revents == 0)
    }
}
