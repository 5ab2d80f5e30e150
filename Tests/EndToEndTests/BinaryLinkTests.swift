import Foundation
import Testing

/// The shipped executables link FoundationEssentials, never the whole of Foundation with ICU (which
/// made a static `smp` three times larger): one `import Foundation` in a shipped module brings it back.
@Suite struct BinaryLinkTests {
    @Test(arguments: ["smp", "smp-sim"])
    func noFoundationOrICU(_ name: String) async throws {
        try TestEnvironment.requireBinaries()
        let binary = TestEnvironment.binaryDirectory.appendingPathComponent(name).path
        let ldd = try await ProcessRunner.run(URL(fileURLWithPath: "/usr/bin/ldd"), [binary], timeout: 30)
        #expect(ldd.status == 0, "\(ldd)")
        #expect(ldd.stdout.contains("libFoundationEssentials"), "\(ldd.stdout)")
        for library in ["libFoundation.so", "libFoundationInternationalization", "_FoundationICU"] {
            #expect(!ldd.stdout.contains(library), "\(name) links \(library): a shipped module imports Foundation instead of FoundationEssentials")
        }
    }
}
