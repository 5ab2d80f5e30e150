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

/// A failed system call: the call's name and `errno`.
package struct SystemCallError: Error, CustomStringConvertible {
    /// The C call, e.g. `open`.
    package var call: String
    /// `errno` after the call.
    package var code: Int32

    package init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    /// The C library's text for `code`, e.g. "No such file or directory".
    package var description: String { String(cString: strerror(code)) }
}

/// What went wrong with a file, in words for a message: the C library's text for the system error
/// underneath (`No such file or directory`), else the error's description.
package func describeFileError(_ error: any Error) -> String {
    if let error = error as? SystemCallError { return error.description }
    if let error = error as? POSIXError { return String(cString: strerror(error.code.rawValue)) }
    if let error = error as? CocoaError, let underlying = error.underlying as? POSIXError {
        return String(cString: strerror(underlying.code.rawValue))
    }
    return "\(error)"
}
