#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A local file read at offsets or written in order, through its file descriptor (no buffering);
/// interrupted calls are retried.
package final class LocalFile {
    private var descriptor: Int32

    /// Opens `path` for reading.
    package init(readingFrom path: String) throws {
        descriptor = try Self.open(path, O_RDONLY)
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR {
            close()
            throw SystemCallError("open", code: EISDIR)
        }
    }

    /// Opens the existing file at `path` for writing from its start.
    package init(writingTo path: String) throws {
        descriptor = try Self.open(path, O_WRONLY)
    }

    deinit { close() }

    private static func open(_ path: String, _ flags: Int32) throws -> Int32 {
        while true {
            let fd = systemOpen(path, flags | O_CLOEXEC)
            if fd >= 0 { return fd }
            if errno != EINTR { throw SystemCallError("open") }
        }
    }

    /// The file's size in bytes.
    package func size() throws -> Int {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw SystemCallError("fstat") }
        return Int(status.st_size)
    }

    /// Up to `length` bytes at `offset`: fewer only at the end of the file.
    package func read(offset: Int, length: Int) throws -> Data {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let count = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + done, length - done, off_t(offset + done))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw SystemCallError("pread")
            }
            if count == 0 { break }
            done += count
        }
        return Data(bytes.prefix(done))
    }

    /// Writes all of `data` after what was written before.
    package func write(_ data: Data) throws {
        try data.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let count = systemWrite(descriptor, buffer.baseAddress! + done, buffer.count - done)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw SystemCallError("write")
                }
                done += count
            }
        }
    }

    /// Closes the file; later calls do nothing.
    package func close() {
        guard descriptor >= 0 else { return }
        _ = systemClose(descriptor)
        descriptor = -1
    }
}

// The C calls under names that `LocalFile`'s own methods do not shadow.
private func systemOpen(_ path: String, _ flags: Int32) -> Int32 { open(path, flags) }
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int { write(fd, bytes, count) }
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
