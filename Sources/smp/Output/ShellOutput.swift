/// What `smp shell exec` prints of the device's answer.
enum ShellOutput {
    /// The command's own output: the device's text without the one line break (CR LF, or LF) that
    /// Zephyr's shell prints before every command's output (the Enter that ends the command line, as
    /// the real firmware answers `kernel version`: "\r\nZephyr version 4.4.0\r\n"). Nothing else changes.
    static func commandOutput(_ output: String) -> String {
        var bytes = Substring(output).utf8[...]
        if bytes.starts(with: "\r\n".utf8) {
            bytes = bytes.dropFirst(2)
        } else if bytes.first == UInt8(ascii: "\n") {
            bytes = bytes.dropFirst()
        }
        return String(Substring(bytes))
    }
}
