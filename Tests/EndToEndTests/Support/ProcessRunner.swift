import Foundation
import TestSupport

/// What a finished child process left behind.
struct ProcessResult: Sendable, CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var stdoutData: Data
    /// True when the hard timeout killed the process.
    var timedOut: Bool
    /// Wall-clock run time in seconds.
    var duration: Double
    var commandLine: String

    var description: String {
        "`\(commandLine)` exited \(status)\(timedOut ? " (killed by the test's timeout)" : "") after "
            + String(format: "%.2f s", duration) + "\n--- stdout:\n\(stdout)\n--- stderr:\n\(stderr)"
    }
}

/// Runs a program to completion with a hard timeout, capturing stdout, stderr and the exit code.
enum ProcessRunner {
    /// - Parameter input: the child's standard input (the test writes to its other end); nil: /dev/null.
    static func run(
        _ executable: URL, _ arguments: [String], timeout: Double = 60, environment: [String: String] = [:],
        currentDirectory: URL? = nil, input: Pipe? = nil
    ) async throws -> ProcessResult {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    continuation.resume(
                        returning: try runBlocking(
                            executable, arguments, timeout: timeout, environment: environment,
                            currentDirectory: currentDirectory, input: input))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    static func runBlocking(
        _ executable: URL, _ arguments: [String], timeout: Double, environment: [String: String],
        currentDirectory: URL?, input: Pipe? = nil
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["COLUMNS"] = env["COLUMNS"] ?? "200"
        env.removeValue(forKey: "SMP_DEVICE")
        for (key, value) in environment { env[key] = value }
        process.environment = env
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        childSpawnLock.lock()
        var spawnLocked = true
        defer { if spawnLocked { childSpawnLock.unlock() } }
        let stdoutPipe = Pipe()
        let stderrPipe = Pipe()
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = input ?? FileHandle.nullDevice

        let readers = DispatchGroup()
        let output = LockedBox((Data(), Data()))
        for (index, pipe) in [stdoutPipe, stderrPipe].enumerated() {
            readers.enter()
            let handle = pipe.fileHandleForReading
            DispatchQueue.global().async {
                let data = handle.readDataToEndOfFile()
                output.withValue { if index == 0 { $0.0 = data } else { $0.1 = data } }
                readers.leave()
            }
        }
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let start = Date()
        do {
            try process.runWithSignalsUnblocked()
        } catch {
            try? stdoutPipe.fileHandleForWriting.close()
            try? stderrPipe.fileHandleForWriting.close()
            throw E2EError("could not start \(executable.path): \(error)")
        }
        // The child has its own copies; close ours so reads end at the child's exit.
        try? stdoutPipe.fileHandleForWriting.close()
        try? stderrPipe.fileHandleForWriting.close()
        try? input?.fileHandleForReading.close()
        childSpawnLock.unlock()
        spawnLocked = false

        var timedOut = false
        var reaped = true
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            // Bounded: Foundation learns of the exit through a socket that a child spawned at the same
            // moment by another test can inherit; a test must fail then, never hang the suite.
            reaped = exited.wait(timeout: .now() + 10) == .success
        }
        _ = readers.wait(timeout: .now() + 5)
        let (out, err) = output.value
        return ProcessResult(
            status: reaped ? process.terminationStatus : -1,
            stdout: String(decoding: out, as: UTF8.self),
            stderr: String(decoding: err, as: UTF8.self),
            stdoutData: out,
            timedOut: timedOut,
            duration: Date().timeIntervalSince(start),
            commandLine: ([executable.lastPathComponent] + arguments).joined(separator: " "))
    }
}

/// A value behind a lock, shared with reader threads.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.lock(); defer { lock.unlock() }; return stored }
    func withValue<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&stored)
    }
}

/// Reads `handle` on a thread of its own until end of file and hands each complete line (without its
/// newline) to `line`, then calls `end`. For the output of processes a test started.
func readLines(from handle: FileHandle, line: @escaping @Sendable (String) -> Void, end: @escaping @Sendable () -> Void = {}) {
    Thread.detachNewThread {
        var pending = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: 0x0A) {
                line(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending = Data(pending[(newline + 1)...])
            }
        }
        end()
    }
}
