import Foundation
import Testing

/// `smp` with default options against smp-sim's pty emulating Zephyr's uart_mcumgr line buffers (lines
/// dropped when too long or when more arrive than the device holds, freed on its 10 ms tick): every
/// configuration takes a 4 KiB upload and gives it back, and a 184-character echo answers where the
/// device's SMP buffer holds it (a 197-byte request does not fit 96 bytes: the device drops it).
@Suite("Link sizing against Zephyr's serial buffer configurations")
struct LinkSizingEndToEndTests {
    static let configurations: [[String]] = [
        ["--rx-line-size", "128", "--rx-lines", "2", "--buf-size", "384"],  // Zephyr's defaults
        ["--rx-line-size", "128", "--rx-lines", "2", "--buf-size", "96"],
        ["--rx-line-size", "512", "--rx-lines", "2", "--buf-size", "1024"],  // like native_sim_serial_fs
        ["--rx-line-size", "512", "--rx-lines", "32", "--buf-size", "2048"],
    ]

    @Test(arguments: 0..<4)
    func defaultOptionsFitTheDevice(index: Int) async throws {
        try TestEnvironment.requireBinaries()
        try await withSimulator(.serial, extraArguments: Self.configurations[index] + ["--fs-blocks", "0"]) { session in
            let content = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ index) })
            let local = try DFUPackages.write(content, "f.bin", in: session.directory)
            let up = expectSuccess(try await session.smp(["-v", "fs", "upload", local, "/lfs1/f.bin"], timeout: 120))
            #expect(!up.stderr.contains("resend"), "a frame the device could not hold: \(up.stderr.suffix(1500))")
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
