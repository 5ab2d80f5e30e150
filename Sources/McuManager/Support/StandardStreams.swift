/// Writes all of `text` to `descriptor` (`STDOUT_FILENO`, `STDERR_FILENO`) at once, without a buffer
/// in between, as `FileHandle.standardOutput.write` did; interrupted writes are retried and a closed
/// pipe ends the text silently.
package func writeUnbuffered(_ text: String, to descriptor: Int32) {
    var text = text
    text.withUTF8 { bytes in _ = try? SystemCall.writeAll(descriptor, UnsafeRawBufferPointer(bytes)) }
}
