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
/// interrupted calls are retried (`SystemCall`).
package final class LocalFile {
    private var descriptor: Int32

    /// Opens `path` for reading.
    package init(readingFrom path: String) throws {
        descriptor = try SystemCall.open(path, O_RDONLY | O_CLOEXEC)
        if let status = try? SystemCall.status(descriptor), status.st_mode & S_IFMT == S_IFDIR {
            close()
            throw SystemCallError("open", code: EISDIR)
        }
    }

    /// Opens the existing file at `path` for writing from its start.
    package init(writingTo path: String) throws {
        descriptor = try SystemCall.open(path, O_WRONLY | O_CLOEXEC)
    }

    deinit { close() }

    /// The file's size in bytes.
    package func size() throws -> Int {
        Int(try SystemCall.status(descriptor).st_size)
    }

    /// Up to `length` bytes at `offset`: fewer only at the end of the file.
    package func read(offset: Int, length: Int) throws -> Data {
        var bytes = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let count = try bytes.withUnsafeMutableBytes { buffer in
                try SystemCall.pread(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
            }
            if count == 0 { break }
            done += count
        }
        return Data(bytes.prefix(done))
    }

    /// Writes all of `data` after what was written before.
    package func write(_ data: Data) throws {
        try data.withUnsafeBytes { try SystemCall.writeAll(descriptor, $0) }
    }

    /// Closes the file; later calls do nothing.
    package func close() {
        guard descriptor >= 0 else { return }
        SystemCall.close(descriptor)
        descriptor = -1
    }
}
