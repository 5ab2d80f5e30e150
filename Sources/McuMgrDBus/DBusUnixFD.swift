#if canImport(Glibc)
import Glibc
#endif
import McuManager
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A file descriptor passed over D-Bus (`h`).
///
/// A descriptor received in a message belongs to this object and is closed when it goes away, unless
/// `take()` hands it over. A descriptor wrapped for sending with `borrowing:` is not closed (libdbus
/// sends a duplicate).
public final class DBusUnixFD: @unchecked Sendable, Hashable {
    private let lock = NIOLock()
    private var fd: Int32
    private var owned: Bool

    /// Wraps a descriptor this object now owns (closes it on deinit).
    public init(owning fd: Int32) {
        self.fd = fd
        self.owned = true
    }

    /// Wraps a descriptor for sending; the caller keeps ownership.
    public init(borrowing fd: Int32) {
        self.fd = fd
        self.owned = false
    }

    /// The descriptor number (-1 once taken).
    public var rawValue: Int32 {
        lock.lock()
        defer { lock.unlock() }
        return fd
    }

    /// Hands the descriptor to the caller, who must close it; later calls return -1.
    public func take() -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        let out = fd
        fd = -1
        owned = false
        return out
    }

    deinit {
        if owned, fd >= 0 { SystemCall.close(fd) }
    }

    public static func == (a: DBusUnixFD, b: DBusUnixFD) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
