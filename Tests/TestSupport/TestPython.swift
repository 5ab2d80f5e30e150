import Foundation
import Testing

/// Locates a Python interpreter for cross-checks against independent implementations (cbor2, smp,
/// imgtool), shared by the test targets.
///
/// Uses `SMP_TEST_PYTHON` if set, else `<package root>/.venv/bin/python` if it exists. The CI test
/// script always creates `.venv` in the package root, so tests that need Python run there.
public enum TestPython {
    /// The package root, found from this file's location (Tests/TestSupport/TestPython.swift).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The interpreter's path, or nil when none is configured.
    public static var path: String? {
        if let env = ProcessInfo.processInfo.environment["SMP_TEST_PYTHON"], !env.isEmpty {
            return FileManager.default.isExecutableFile(atPath: env) ? env : nil
        }
        let venv = packageRoot.appendingPathComponent(".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
    }

    /// True when the interpreter exists and can import `module`.
    public static func hasModule(_ module: String) -> Bool {
        guard path != nil else { return false }
        return (try? run(script: "import \(module)", input: "")) != nil
    }

    /// The reason shown when a test needing `module` is skipped.
    public static func skipReason(_ module: String) -> Comment {
        "needs a Python with \(module): set SMP_TEST_PYTHON or create .venv in the package root"
    }

    public struct Failure: Error, CustomStringConvertible {
        public var status: Int32
        public var stderr: String
        public var description: String { "python exited with status \(status): \(stderr)" }
    }

    /// Runs `script` (`python -c`) with `input` on stdin; returns stdout. Throws if Python fails.
    public static func run(script: String, input: String) throws -> String {
        guard let path else { throw Failure(status: -1, stderr: "no Python configured") }
        let tmp = FileManager.default.temporaryDirectory
        let token = UUID().uuidString
        let inURL = tmp.appendingPathComponent("smp-py-\(token).in")
        let errURL = tmp.appendingPathComponent("smp-py-\(token).err")
        defer {
            try? FileManager.default.removeItem(at: inURL)
            try? FileManager.default.removeItem(at: errURL)
        }
        // Files, not pipes, for stdin and stderr: no deadlock however much either side writes.
        try Data(input.utf8).write(to: inURL)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let stdin = try FileHandle(forReadingFrom: inURL)
        let stderr = try FileHandle(forWritingTo: errURL)
        defer {
            try? stdin.close()
            try? stderr.close()
        }
        let stdout = Pipe()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-c", script]
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.runHoldingSpawnLock()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = (try? String(contentsOf: errURL, encoding: .utf8)) ?? ""
            throw Failure(status: process.terminationStatus, stderr: message)
        }
        return String(decoding: output, as: UTF8.self)
    }
}
