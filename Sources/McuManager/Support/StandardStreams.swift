#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes all of `text` to `descriptor` (`STDOUT_FILENO`, `STDERR_FILENO`) at once, without a buffer
/// in between, as `FileHandle.standardOutput.write` did; interrupted writes are retried and a closed
/// pipe ends the text silently.
package func writeUnbuffered(_ text: String, to descriptor: Int32) {
    var text = text
    text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let count = write(descriptor, bytes.baseAddress! + done, bytes.count - done)
            if count < 0 {
                if errno == EINTR { continue }
                return
            }
            done += count
        }
    }
}
