import Foundation
import Testing

/// `smp` against `smp-sim` over a real pty and a real UDP socket: one test per command group, each
/// parameterized over both links, each with a fresh simulated device.
@Suite("smp CLI against smp-sim", .serialized, .timeLimit(.minutes(10)))
struct CLIGroupTests {
    @Test("os echo prints the text", arguments: Link.allCases)
    func echo(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await session.smp("os", "echo", "hi"))
            #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "hi")
        }
    }

    @Test("os reset, params, info, datetime, tasks, mempool, bootloader", arguments: Link.allCases)
    func osGroup(link: Link) async throws {
        try await withSimulator(link) { session in
            let params = expectSuccess(try await session.smp("--json", "os", "params"))
            if let object = jsonObject(params) {
                #expect(jsonInt(object["buf_size"]) == 2048, "\(params)")
                #expect(jsonInt(object["buf_count"]) == 4, "\(params)")
            }
            let humanParams = expectSuccess(try await session.smp("os", "params"))
            #expect(humanParams.stdout.contains("2048"), "\(humanParams)")

            let info = expectSuccess(try await session.smp("os", "info"))
            #expect(info.stdout.contains("Zephyr"), "\(info)")

            let datetime = expectSuccess(try await session.smp("os", "datetime"))
            #expect(
                datetime.stdout.range(of: #"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"#, options: .regularExpression) != nil,
                "\(datetime)")

            let tasks = expectSuccess(try await session.smp("os", "tasks"))
            #expect(!tasks.stdout.isEmpty, "\(tasks)")
            let mempool = expectSuccess(try await session.smp("os", "mempool"))
            #expect(!mempool.stdout.isEmpty, "\(mempool)")
            let bootloader = expectSuccess(try await session.smp("os", "bootloader"))
            #expect(bootloader.stdout.contains("MCUboot"), "\(bootloader)")

            expectSuccess(try await session.smp("os", "reset"))
            // The device answers again after it rebooted.
            let echo = expectSuccess(try await session.smpOnceAnswering("os", "echo", "back"))
            #expect(echo.stdout.contains("back"))
        }
    }

    @Test("image list, human and --json", arguments: Link.allCases)
    func imageList(link: Link) async throws {
        try await withSimulator(link) { session in
            let human = expectSuccess(try await session.smp("image", "list"))
            #expect(human.stdout.contains("1.0.0"), "\(human)")
            let json = expectSuccess(try await session.smp("--json", "image", "list"))
            guard let object = jsonObject(json), let images = object["images"] as? [[String: Any]] else {
                Issue.record("no images array: \(json)")
                return
            }
            let primary = images.first { jsonInt($0["slot"]) == 0 }
            #expect(primary != nil, "\(json)")
            if let primary {
                #expect(primary["version"] as? String == "1.0.0", "\(json)")
                let hash = primary["hash"] as? String ?? ""
                #expect(hash.count == 64 && hash == hash.lowercased() && hash.allSatisfy(\.isHexDigit), "\(json)")
                #expect(primary["active"] as? Bool == true, "\(json)")
                #expect(primary["confirmed"] as? Bool == true, "\(json)")
            }
        }
    }

    @Test(
        "image upload of an imgtool image, test, reset, runs the new version, confirm",
        .enabled(if: TestEnvironment.hasVenv, Comment(rawValue: TestEnvironment.venvMissingReason)),
        arguments: Link.allCases)
    func imageUpgrade(link: Link) async throws {
        try await withSimulator(link) { session in
            let image = try await makeMCUbootImage(in: session.directory, version: "1.2.3", bodySize: 48 * 1024)
            expectSuccess(try await session.smp(["image", "upload", image.path], timeout: 120))
            let listed = expectSuccess(try await session.smp("--json", "image", "list"))
            let secondary = (jsonObject(listed)?["images"] as? [[String: Any]])?.first { jsonInt($0["slot"]) == 1 }
            #expect(secondary?["version"] as? String == "1.2.3", "\(listed)")
            guard let hash = secondary?["hash"] as? String else {
                Issue.record("no slot 1 hash after the upload: \(listed)")
                return
            }
            #expect(hash == image.digest, "the device's image hash differs from imgtool's digest \(image.digest)")
            expectSuccess(try await session.smp("image", "test", hash))
            let pending = expectSuccess(try await session.smp("--json", "image", "list"))
            let pendingSlot = (jsonObject(pending)?["images"] as? [[String: Any]])?.first { jsonInt($0["slot"]) == 1 }
            #expect(pendingSlot?["pending"] as? Bool == true, "\(pending)")

            expectSuccess(try await session.smp("os", "reset"))
            let after = expectSuccess(try await session.smpOnceAnswering("--json", "image", "list"))
            let running = (jsonObject(after)?["images"] as? [[String: Any]])?.first { jsonInt($0["slot"]) == 0 }
            #expect(running?["version"] as? String == "1.2.3", "\(after)")
            #expect(running?["active"] as? Bool == true, "\(after)")
            #expect(running?["confirmed"] as? Bool != true, "a test swap runs unconfirmed: \(after)")
            #expect(running?["hash"] as? String == hash, "\(after)")

            expectSuccess(try await session.smp("image", "confirm"))
            let confirmed = expectSuccess(try await session.smp("--json", "image", "list"))
            let final = (jsonObject(confirmed)?["images"] as? [[String: Any]])?.first { jsonInt($0["slot"]) == 0 }
            #expect(final?["version"] as? String == "1.2.3", "\(confirmed)")
            #expect(final?["confirmed"] as? Bool == true, "\(confirmed)")
        }
    }

    @Test("stat list and stat read", arguments: Link.allCases)
    func stats(link: Link) async throws {
        try await withSimulator(link) { session in
            let list = expectSuccess(try await session.smp("stat", "list"))
            #expect(list.stdout.contains("smp_svr_stats"), "\(list)")
            let read = expectSuccess(try await session.smp("stat", "read", "smp_svr_stats"))
            #expect(read.stdout.contains("ticks"), "\(read)")
            let unknown = try await session.smp("stat", "read", "no_such_group")
            expectStatus(unknown, SMPExit.device)
        }
    }

    @Test("settings write, read, delete", arguments: Link.allCases)
    func settings(link: Link) async throws {
        try await withSimulator(link) { session in
            expectSuccess(try await session.smp("settings", "write", "e2e/greeting", "hello-e2e"))
            let read = expectSuccess(try await session.smp("settings", "read", "e2e/greeting"))
            #expect(read.stdout.contains("hello-e2e"), "\(read)")
            expectSuccess(try await session.smp("settings", "delete", "e2e/greeting"))
            let gone = try await session.smp("settings", "read", "e2e/greeting")
            expectStatus(gone, SMPExit.device)
        }
    }

    @Test("fs upload and download of 1 MiB round-trip byte for byte; fs hash and fs stat", arguments: Link.allCases)
    func fileRoundTrip(link: Link) async throws {
        try await withSimulator(link) { session in
            let payload = randomBytes(1 << 20)
            let local = session.directory.path("up.bin")
            try payload.write(to: URL(fileURLWithPath: local))
            expectSuccess(try await session.smp(["fs", "upload", local, "/lfs1/e2e.bin"], timeout: 180))

            let stat = expectSuccess(try await session.smp("fs", "stat", "/lfs1/e2e.bin"))
            #expect(stat.stdout.contains("1048576"), "\(stat)")
            let hash = expectSuccess(try await session.smp("fs", "hash", "/lfs1/e2e.bin"))
            let crc = String(format: "%08x", crc32(payload))
            #expect(hash.stdout.lowercased().contains(crc), "expected IEEE CRC32 \(crc): \(hash)")
            let sha = expectSuccess(try await session.smp("fs", "hash", "--type", "sha256", "/lfs1/e2e.bin"))
            let expectedSHA = try await sha256Hex(ofFile: local)
            #expect(sha.stdout.lowercased().contains(expectedSHA), "expected SHA-256 \(expectedSHA): \(sha)")

            let back = session.directory.path("down.bin")
            expectSuccess(try await session.smp(["fs", "download", "/lfs1/e2e.bin", back], timeout: 180))
            let downloaded = try Data(contentsOf: URL(fileURLWithPath: back))
            #expect(downloaded.count == payload.count)
            #expect(downloaded == payload, "the downloaded file differs from the uploaded one")
        }
    }

    @Test("shell exec -- kernel version", arguments: Link.allCases)
    func shell(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await session.smp("shell", "exec", "--", "kernel", "version"))
            #expect(result.stdout.contains("Zephyr version 3.7.0"), "\(result)")
        }
    }

    /// A shell command slower than the resend timeout (smp-sim's `kernel sleep`, which holds the device
    /// before it answers, as Zephyr's does) goes out once: the device would run a copy too.
    @Test("shell exec of a command slower than the resend timeout goes out once", arguments: Link.allCases)
    func slowShellCommandGoesOutOnce(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await session.smp("-v", "shell", "exec", "--", "kernel", "sleep", "1500"))
            #expect(result.stderr.components(separatedBy: "-> write shell(9)").count == 2, "one request: \(result)")
            #expect(!result.stderr.contains("resend seq"), "\(result)")
            // One that outlasts --timeout ends there, and says that it was not sent again and may have run.
            let late = try await session.smp("--timeout", "1", "shell", "exec", "--", "kernel", "sleep", "3000")
            expectStatus(late, SMPExit.timeout)
            #expect(late.stderr.contains("was not sent again") && late.stderr.contains("it may have run"), "\(late)")
        }
    }

    @Test("shell exec --help shows the command's help; after -- it goes to the device")
    func shellExecHelp() async throws {
        let help = expectSuccess(try await runSMP(["shell", "exec", "--help"]))
        #expect(help.stdout.contains("USAGE: smp shell exec"), "\(help)")
    }

    /// Mynewt's crash test: the device faults before it answers and reboots. `smp` sends the request once
    /// (a copy would crash the device again once it is back), says what no answer means here, and the
    /// device's log holds exactly one crash.
    @Test("crash test is sent once: one crash, and the timeout says why", arguments: Link.allCases)
    func crashTestCrashesTheDeviceOnce(link: Link) async throws {
        try await withSimulator(link) { session in
            let crash = try await session.smp("--timeout", "3", "-v", "crash", "test", "div0")
            expectStatus(crash, SMPExit.timeout)
            #expect(crash.stderr.contains("no answer to crash test div0, as from a device that faults"), "\(crash)")
            #expect(!crash.stderr.contains("resend seq"), "\(crash)")
            let log = expectSuccess(try await session.smp(["log", "show"], timeout: 60))
            #expect(log.stdout.components(separatedBy: "Crash test: div0").count == 2, "one crash: \(log)")
        }
    }

    /// Link limits fixed in the device URI that the device cannot take (lines of 200 characters into its
    /// 128-byte line buffers, which drop them): nothing comes back, and the error names those options
    /// before the usual advice. Without them, the same echo goes through.
    @Test("a device URI that fixes lines the device drops is named in the timeout")
    func fixedLinkOptionsTheDeviceDropsAreNamed() async throws {
        try await withSimulator(.serial, extraArguments: ["--rx-lines", "2"]) { session in
            let text = String(repeating: "0123456789", count: 18)
            let result = try await ProcessRunner.run(
                TestEnvironment.smp, ["--device", session.device + "?line=200&gap=15", "--timeout", "2", "os", "echo", text], timeout: 60)
            expectStatus(result, SMPExit.timeout)
            #expect(result.stderr.contains("The device URI fixes line=200, gap=15, and smp sends exactly that"), "\(result)")
            #expect(result.stderr.contains("Try without them"), "\(result)")
            let plain = expectSuccess(try await session.smp("os", "echo", text))
            #expect(plain.stdout == text + "\n")
        }
    }

    @Test("enum list names the groups", arguments: Link.allCases)
    func enumeration(link: Link) async throws {
        try await withSimulator(link) { session in
            let result = expectSuccess(try await session.smp("enum", "list"))
            // OS (0), image (1) and file system (8) by name or number.
            let text = result.stdout.lowercased()
            #expect(text.contains("os") || text.contains("0"), "\(result)")
            #expect(text.contains("image") || text.contains("1"), "\(result)")
            #expect(text.contains("fs") || text.contains("file") || text.contains("8"), "\(result)")
        }
    }

    @Test("basic erase-storage", arguments: Link.allCases)
    func eraseStorage(link: Link) async throws {
        try await withSimulator(link) { session in
            expectSuccess(try await session.smp("basic", "erase-storage"))
        }
    }
}

/// IEEE CRC-32 (the fs hash default, `crc32`).
func crc32(_ data: Data) -> UInt32 {
    var table = [UInt32](repeating: 0, count: 256)
    for i in 0..<256 {
        var c = UInt32(i)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        table[i] = c
    }
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in data { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
    return crc ^ 0xFFFF_FFFF
}

/// An MCUboot image made by imgtool, with the digest imgtool reports for it.
struct MCUbootImageFile {
    var path: String
    /// SHA-256 over header, body and protected TLVs (lowercase hex), from `imgtool verify`.
    var digest: String
}

/// Makes an unsigned MCUboot image of random data with imgtool from the venv.
func makeMCUbootImage(in directory: TemporaryDirectory, version: String, bodySize: Int) async throws -> MCUbootImageFile {
    let body = directory.path("app-\(version).bin")
    let signed = directory.path("app-\(version).signed.bin")
    try randomBytes(bodySize).write(to: URL(fileURLWithPath: body))
    let result = try await ProcessRunner.run(
        TestEnvironment.venvTool("imgtool"),
        [
            "sign", "--header-size", "0x200", "--align", "4", "--slot-size", "0x60000", "--version", version,
            "--pad-header", body, signed,
        ], timeout: 60)
    guard result.status == 0 else { throw E2EError("imgtool sign failed: \(result)") }
    let verify = try await ProcessRunner.run(TestEnvironment.venvTool("imgtool"), ["verify", signed], timeout: 60)
    guard verify.status == 0,
        let line = verify.stdout.split(separator: "\n").first(where: { $0.hasPrefix("Image digest: ") })
    else { throw E2EError("imgtool verify failed: \(verify)") }
    return MCUbootImageFile(path: signed, digest: String(line.dropFirst("Image digest: ".count)).lowercased())
}

/// SHA-256 of a local file (lowercase hex), by coreutils' sha256sum.
func sha256Hex(ofFile path: String) async throws -> String {
    let result = try await ProcessRunner.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [path], timeout: 30)
    guard result.status == 0, let hex = result.stdout.split(separator: " ").first else {
        throw E2EError("sha256sum failed: \(result)")
    }
    return String(hex)
}
