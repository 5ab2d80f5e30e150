import ArgumentParser
import Dispatch
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT (Ctrl-C) and SIGTERM for every command: the first one cancels the running command (requests
/// in flight are abandoned, a download's temporary file is removed, a firmware upgrade stops after its
/// current step) and the tool exits with 130; a second one, or a command that has not stopped 10 s
/// later, ends the process at once with 130.
enum Interruption {
    private static let state = InterruptionState()

    /// Whether a signal arrived.
    static var happened: Bool { state.signalled }

    /// Runs `body` in a task that the first SIGINT or SIGTERM cancels.
    static func run(_ body: @escaping @Sendable () async -> Void) async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let work = Task { await body() }
        var sources: [DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if state.signal() {
                    work.cancel()
                    DispatchQueue.global().asyncAfter(deadline: .now() + 10) {
                        writeUnbuffered("error: interrupted; the command did not stop in 10 s\n", to: STDERR_FILENO)
                        _exit(ExitStatus.cancelled)
                    }
                } else {
                    _exit(ExitStatus.cancelled)
                }
            }
            source.resume()
            sources.append(source)
        }
        await work.value
        for source in sources { source.cancel() }
    }
}

private final class InterruptionState: @unchecked Sendable {
    private let lock = NIOLock()
    private var count = 0

    var signalled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return count > 0
    }

    /// Records a signal; true for the first one.
    func signal() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count == 1
    }
}
