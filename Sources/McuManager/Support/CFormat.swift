#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// `printf`-style formatting by the C library (`vsnprintf`): for the numeric conversions this
    /// package prints (`%d`, `%02x`, `%.1f`, ...) the same text as Foundation's `String(format:)`,
    /// which the binaries do without (they link only FoundationEssentials).
    package init(cFormat format: String, _ arguments: any CVarArg...) {
        var capacity = 64
        while true {
            var buffer = [CChar](repeating: 0, count: capacity)
            let written = withVaList(arguments) { vsnprintf(&buffer, capacity, format, $0) }
            guard written >= 0 else {
                preconditionFailure("invalid format string \"\(format)\"")
            }
            if Int(written) < capacity {
                self = String(decoding: buffer.prefix(Int(written)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                return
            }
            capacity = Int(written) + 1
        }
    }
}
