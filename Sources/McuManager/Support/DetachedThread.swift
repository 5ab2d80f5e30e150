#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `body` on a new detached POSIX thread named `name` (the kernel keeps its first 15 bytes),
/// for the blocking loops of the D-Bus connection and the Bluetooth LE sockets. The thread ends when
/// `body` returns.
package func startDetachedThread(name: String? = nil, _ body: @escaping @Sendable () -> Void) {
    final class Start {
        let name: String?
        let body: @Sendable () -> Void
        init(name: String?, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, nil, { argument in
        let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
        if let name = start.name { nameCurrentThread(name) }
        start.body()
        return nil
    }, start)
    guard result == 0 else {
        Unmanaged<Start>.fromOpaque(start).release()
        preconditionFailure("pthread_create failed: \(String(cString: strerror(result)))")
    }
    pthread_detach(thread)
}

/// Names the calling thread (as `ps -L` and debuggers show it) by writing `/proc/thread-self/comm`,
/// which is what `pthread_setname_np` does on Linux; a kernel without it leaves the name unchanged.
private func nameCurrentThread(_ name: String) {
    var name = name
    while name.utf8.count > 15 { name.removeLast() }
    guard let fd = try? SystemCall.open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC) else { return }
    _ = try? name.withUTF8 { try SystemCall.write(fd, UnsafeRawBufferPointer($0)) }
    SystemCall.close(fd)
}
