import Foundation

/// Where the end-to-end tests find the built tools, the repository and the Python venv.
enum TestEnvironment {
    /// The repository root, from this file's path (Tests/EndToEndTests/Support/...).
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The directory holding `smp` and `smp-sim`: `$SMP_BIN_DIR`, else the directory of the running test
    /// bundle (e.g. `.build/debug`), else `<repo>/.build/debug`.
    static let binaryDirectory: URL = {
        let fileManager = FileManager.default
        var candidates: [URL] = []
        if let dir = ProcessInfo.processInfo.environment["SMP_BIN_DIR"], !dir.isEmpty {
            candidates.append(URL(fileURLWithPath: dir))
        }
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").standardizedFileURL
        candidates.append(executable.deletingLastPathComponent())
        // macOS: the bundle is .build/debug/X.xctest/Contents/MacOS/X.
        candidates.append(URL(fileURLWithPath: Bundle.main.bundlePath).deletingLastPathComponent())
        candidates.append(repositoryRoot.appendingPathComponent(".build/debug"))
        for candidate in candidates
        where fileManager.isExecutableFile(atPath: candidate.appendingPathComponent("smp-sim").path) {
            return candidate
        }
        return candidates.last!
    }()

    static var smp: URL { binaryDirectory.appendingPathComponent("smp") }
    static var smpSim: URL { binaryDirectory.appendingPathComponent("smp-sim") }

    /// The Python venv with smpmgr, smpclient and imgtool: `$SMP_TEST_VENV`, else `<repo>/.venv`.
    static let venv: URL? = {
        let fileManager = FileManager.default
        if let path = ProcessInfo.processInfo.environment["SMP_TEST_VENV"], !path.isEmpty {
            return fileManager.fileExists(atPath: path + "/bin/python") ? URL(fileURLWithPath: path) : nil
        }
        let local = repositoryRoot.appendingPathComponent(".venv")
        return fileManager.fileExists(atPath: local.path + "/bin/python") ? local : nil
    }()

    static var hasVenv: Bool { venv != nil }
    static let venvMissingReason =
        "needs the Python venv (smpmgr, smpclient, imgtool): run Scripts/setup.sh or set SMP_TEST_VENV"

    static func venvTool(_ name: String) -> URL {
        venv!.appendingPathComponent("bin").appendingPathComponent(name)
    }

    /// Whether the tools were built; tests fail with a clear message when not.
    static func requireBinaries() throws {
        for tool in [smp, smpSim] where !FileManager.default.isExecutableFile(atPath: tool.path) {
            throw E2EError("\(tool.path) is missing: run `swift build` first (or set SMP_BIN_DIR)")
        }
    }
}

/// A failure in the test harness itself.
struct E2EError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fresh temporary directory, removed by `remove()`.
struct TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("smp-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        url = base
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// The size of the temporary file `smp fs download` writes beside `destination` (`.NAME.XXXX.download`)
/// while the download runs; nil while there is none.
func partialDownloadSize(of destination: String) -> Int? {
    let url = URL(fileURLWithPath: destination)
    let folder = url.deletingLastPathComponent().path
    let prefix = "." + url.lastPathComponent + "."
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder),
        let name = names.first(where: { $0.hasPrefix(prefix) && $0.hasSuffix(".download") }),
        let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
    else { return nil }
    return (attributes[.size] as? NSNumber)?.intValue
}

/// Random bytes for upload payloads.
func randomBytes(_ count: Int) -> Data {
    var generator = SystemRandomNumberGenerator()
    var bytes = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        var word = generator.next()
        for _ in 0..<min(8, count - index) {
            bytes[index] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            index += 1
        }
    }
    return Data(bytes)
}
