import Foundation
import Testing

/// `smp` with default options against smp-sim's pty emulating Zephyr's uart_mcumgr line buffers (lines
/// dropped when too long or when more arrive than the device holds, freed on its 10 ms tick): every
/// configuration takes a 4 KiB upload and gives it back, and a 184-character echo answers where the
/// device's SMP buffer holds it (a 197-byte request does not fit 96 bytes: the device drops it).
///
/// Outcomes only: whether a frame was resent depends on this machine's speed (a late answer is resent
/// too, and a simulator that reads its pty late sees two paced bursts as one). That no frame exceeds what
/// the device holds is checked in virtual time for every Zephyr buffer configuration
/// (`LinkProbeTests.everyZephyrBufferConfigurationTakesAnUploadWithDefaultOptions`); here the line limits
/// smp learned must lie within the device's (a slow answer can only make it learn less, never more).
@Suite("Link sizing against Zephyr's serial buffer configurations")
struct LinkSizingEndToEndTests {
    static let configurations: [[String]] = [
        ["--rx-line-size", "128", "--rx-lines", "2", "--buf-size", "384"],  // Zephyr's defaults
        ["--rx-line-size", "128", "--rx-lines", "2", "--buf-size", "96"],
        ["--rx-line-size", "512", "--rx-lines", "2", "--buf-size", "1024"],  // like native_sim_serial_fs
        ["--rx-line-size", "512", "--rx-lines", "32", "--buf-size", "2048"],
        // Whole frames at once (the link probe's buf_count - 1): 3 x 3 lines of 511 B fit 32 lines, as on
        // native_sim_serial_fs; 3 x 12 lines of 127 B do not fit 30 (two answered: one frame in flight).
        ["--rx-line-size", "512", "--rx-lines", "32", "--buf-size", "1024"],
        ["--rx-line-size", "128", "--rx-lines", "30", "--buf-size", "1024"],
    ]

    /// The console line limits smp's `-v` log says it learned or adopted ("link probe: the device takes
    /// N lines of L B", "... still takes ...", "... took ... before"), not the frames it tried.
    static func learnedLines(_ log: String) -> [(count: Int, length: Int)] {
        log.split(separator: "\n").filter { $0.contains("link probe: the device t") || $0.contains("link probe: the device still takes") }.flatMap { line -> [(Int, Int)] in
            line.matches(of: /(\d+) lines of (\d+) B/).compactMap { match in
                guard let count = Int(match.output.1), let length = Int(match.output.2) else { return nil }
                return (count, length)
            }
        }
    }

    @Test(arguments: 0..<6)
    func defaultOptionsFitTheDevice(index: Int) async throws {
        try TestEnvironment.requireBinaries()
        try await withSimulator(.serial, extraArguments: Self.configurations[index] + ["--fs-blocks", "0"]) { session in
            let content = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ index) })
            let local = try DFUPackages.write(content, "f.bin", in: session.directory)
            let up = expectSuccess(try await session.smp(["-v", "fs", "upload", local, "/lfs1/f.bin"], timeout: 120))
            let arguments = Self.configurations[index]
            let lineSize = Int(arguments[1])!, lineCount = Int(arguments[3])!
            for (count, length) in Self.learnedLines(up.stderr) {
                #expect(count <= lineCount && length < lineSize, "learned \(count) lines of \(length) B: \(up.stderr.suffix(1500))")
            }
            let back = session.directory.path("back.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/f.bin", back], timeout: 120))
            #expect(FileManager.default.contents(atPath: back) == content)
            guard index != 1 else { return }
            let text = String(repeating: "e", count: 184)
            let echo = expectSuccess(try await session.smp(["os", "echo", text], timeout: 30))
            #expect(echo.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == text)
        }
    }
}
