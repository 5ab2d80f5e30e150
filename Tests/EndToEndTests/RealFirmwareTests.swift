import Foundation
import Testing

/// `smp` with its default options against the real, unmodified Zephyr 4.4.0 / MCUboot builds of the
/// shared firmware directory (native_sim on a pty and on UDP, QEMU guests behind socat): the judge of
/// what the client must handle. Each build runs through Scripts/firmware-rig.sh in its own directory
/// and is stopped in all paths. Every `smp` run has a hard timeout, so a hang fails its test.
///
/// Facts the expectations rest on (../shared/firmware/README.md and measurements): the default serial
/// builds hold two 128-byte receive lines (a frame of more lines is dropped unless the lines are paced),
/// the file system is LittleFS at /lfs1 with files of at most 4 KiB, hashing an empty file answers
/// FILE_EMPTY (16), the native_sim builds have no image group, MCUboot's serial recovery answers image list
/// and image upload (and echo with ENOTSUP).
@Suite(
    "smp against real Zephyr firmware", .serialized, .enabled(if: FirmwareRig.isAvailable, FirmwareRig.skipReason))
struct RealFirmwareTests {
    /// The three native_sim builds.
    static let nativeBuilds: [FirmwareRig.Build] = [.serial, .serialFS, .udp]

    /// SMP buffers each build reports in `os params`.
    static func expectedParams(_ build: FirmwareRig.Build) -> (size: Int, count: Int)? {
        switch build {
        case .serial, .m0: return (384, 4)
        case .serialFS, .mps2: return (1024, 4)
        case .udp: return (2048, 2)
        case .mps2Recovery: return nil
        }
    }

    /// 184 characters: 3 console lines, one more than the default serial builds hold at once.
    static let longText = String((0..<184).map { index in Character(UnicodeScalar(UInt8(97 + index % 26))) })

    // MARK: The native_sim builds: one device per build for all its checks

    /// One device per build keeps the suite short and waits for the UDP build's fixed port only once
    /// (the wait for a port another process holds counts against the time limit).
    @Test("native_sim: os echo (short, 184 characters), os params, stats, shell, image list, fs round trips",
        .timeLimit(.minutes(10)), arguments: nativeBuilds)
    func nativeSim(build: FirmwareRig.Build) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await FirmwareRig.with(build) { rig in
            try await Self.checkOS(rig)
            try await Self.checkStatistics(rig)
            if build != .serialFS { try await Self.checkShell(rig) }  // serial-fs is built without the shell group

            // No image group in these builds: a clear device error, not a hang.
            let images = try await rig.smp("image", "list")
            expectStatus(images, SMPExit.device)
            #expect(images.stderr.contains("ENOTSUP"), "\(images)")

            try await Self.checkFileRoundTrip(rig, in: directory)
            try await Self.checkEmptyFile(rig, in: directory)
        }
    }

    /// A 4 KiB file (LittleFS's largest here) up, down, stat and hash under /lfs1.
    static func checkFileRoundTrip(
        _ rig: FirmwareRig, in directory: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        // The round-trip budget: the first upload to this device (its rig's own cache) asks `os params`
        // once (a serial build also probes its console lines, and checks for an unfinished copy when the
        // file takes more than 8 chunks); the second, of other bytes, sends its chunks and one hash alone.
        let earlier = randomBytes(4096)
        let earlierFile = directory.path("earlier.bin")
        try earlier.write(to: URL(fileURLWithPath: earlierFile))
        let firstUpload = try await rig.smp(["-v", "fs", "upload", earlierFile, "/lfs1/rt.bin"], timeout: 60)
        expectSuccess(firstUpload, sourceLocation: sourceLocation)
        let first = Self.withoutTheLongWay(requestsSent(firstUpload.stderr), rig)
        let chunks = first.filter { $0 == "write 8/0" }.count
        #expect(first.filter { $0 == "read 0/6" }.count == 1, "\(first)", sourceLocation: sourceLocation)
        #expect(first.last == "read 8/2" && chunks > 0, "\(first)", sourceLocation: sourceLocation)
        if rig.build == .udp {
            #expect(first == ["read 0/6", "write 8/0", "write 8/0", "write 8/0", "read 8/2"], "\(first)", sourceLocation: sourceLocation)
        }

        let payload = randomBytes(4096)
        let local = directory.path("payload.bin")
        try payload.write(to: URL(fileURLWithPath: local))
        let upload = try await rig.smp(["-v", "fs", "upload", local, "/lfs1/rt.bin"], timeout: 60)
        expectSuccess(upload, sourceLocation: sourceLocation)
        guard upload.status == 0 else {
            Issue.record("4 KiB upload failed; the device's log ends:\n\(rig.deviceLog())", sourceLocation: sourceLocation)
            return
        }
        let known = Self.withoutTheLongWay(requestsSent(upload.stderr), rig)
        #expect(known.last == "read 8/2" && known.dropLast().allSatisfy { $0 == "write 8/0" }, "\(known)", sourceLocation: sourceLocation)
        if rig.build == .udp {
            #expect(known == ["write 8/0", "write 8/0", "write 8/0", "read 8/2"], "\(known)", sourceLocation: sourceLocation)
        }
        // Requests in flight as the device's line buffers hold them (uart_mcumgr frees a line buffer once
        // its request is handled): serial-fs's 32 lines of 512 B take three 1 KiB frames at once in long
        // lines (the first upload learned it), the default build's 2 lines one full frame or two one-line
        // download requests; UDP's 2 buffers one request.
        let (linkLine, uploadDepth, downloadDepth) =
            switch rig.build {
            case .serialFS: ("3 frames in flight", 3, 3)
            case .serial: ("1 frame in flight (2 of one line)", 1, 2)
            default: ("1 frame in flight", 1, 1)
            }
        #expect(upload.stderr.contains(linkLine), "\(upload.stderr)", sourceLocation: sourceLocation)
        #expect(mostInFlight(upload.stderr) == uploadDepth, "\(upload.stderr)", sourceLocation: sourceLocation)
        let back = directory.path("back.bin")
        let download = try await rig.smp(["-v", "fs", "download", "/lfs1/rt.bin", back], timeout: 60)
        expectSuccess(download, sourceLocation: sourceLocation)
        #expect(mostInFlight(download.stderr) == downloadDepth, "\(download.stderr)", sourceLocation: sourceLocation)
        #expect(
            FileManager.default.contents(atPath: back) == payload, "the downloaded bytes differ from the uploaded ones",
            sourceLocation: sourceLocation)

        let stat = expectSuccess(try await rig.smp("--json", "fs", "stat", "/lfs1/rt.bin"), sourceLocation: sourceLocation)
        #expect(jsonInt(jsonObject(stat)?["len"]) == 4096, "\(stat)", sourceLocation: sourceLocation)

        // The device's default hash (SHA-256 or CRC-32, whichever the build offers) against the local file's.
        let hash = expectSuccess(try await rig.smp("--json", "fs", "hash", "/lfs1/rt.bin"), sourceLocation: sourceLocation)
        if let object = jsonObject(hash, sourceLocation: sourceLocation), let type = object["type"] as? String {
            let expected = try await digest(local, type: type)
            let output = (object["output"] as? String)?.lowercased() ?? jsonInt(object["output"]).map(String.init)
            #expect(output == expected, "\(hash); local \(type) \(expected)", sourceLocation: sourceLocation)
            #expect(jsonInt(object["len"]) == 4096, "\(hash)", sourceLocation: sourceLocation)
        }
    }

    /// The requests of an `smp -v` run, in order, as `read 8/2` (operation, group/command): one per
    /// sequence number (a copy the session resent is the same request).
    static func requestsSent(_ stderr: String) -> [String] {
        var seen: Set<String> = []
        var requests: [String] = []
        let pattern = /-> (read|write) [a-z]+\((\d+)\) cmd (\d+) seq (\d+)\b/
        for line in stderr.split(separator: "\n") {
            guard let match = line.firstMatch(of: pattern), seen.insert(String(match.4)).inserted else { continue }
            requests.append("\(match.1) \(match.2)/\(match.3)")
        }
        return requests
    }

    /// The most requests of an `smp -v` run in flight at once: sent (a sequence number's first `->`) and
    /// not yet answered (its `<-`).
    static func mostInFlight(_ stderr: String) -> Int {
        var open: Set<Substring> = []
        var most = 0
        for line in stderr.split(separator: "\n") {
            if let sent = line.firstMatch(of: /-> (?:read|write) [a-z]+\(\d+\) cmd \d+ seq (\d+)\b/) {
                open.insert(sent.1)
                most = max(most, open.count)
            } else if let answered = line.firstMatch(of: /<- [a-z-]+ [a-z]+\(\d+\) cmd \d+ seq (\d+)\b/) {
                open.remove(answered.1)
            }
        }
        return most
    }

    /// An empty file up and down; the device answers FILE_EMPTY (fs error 16) to its hash, which a
    /// transfer's verification must accept (there is nothing to verify) and `fs hash` must report.
    static func checkEmptyFile(
        _ rig: FirmwareRig, in directory: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let local = directory.path("empty.bin")
        try Data().write(to: URL(fileURLWithPath: local))
        let upload = try await rig.smp(["fs", "upload", local, "/lfs1/empty.bin"], timeout: 60)
        expectSuccess(upload, sourceLocation: sourceLocation)
        let stat = expectSuccess(try await rig.smp("--json", "fs", "stat", "/lfs1/empty.bin"), sourceLocation: sourceLocation)
        #expect(jsonInt(jsonObject(stat)?["len"]) == 0, "\(stat)", sourceLocation: sourceLocation)
        let back = directory.path("empty-back.bin")
        expectSuccess(try await rig.smp(["fs", "download", "/lfs1/empty.bin", back], timeout: 60), sourceLocation: sourceLocation)
        #expect(
            FileManager.default.contents(atPath: back) == Data(), "the download of an empty file is not an empty file",
            sourceLocation: sourceLocation)
        let hash = try await rig.smp("fs", "hash", "/lfs1/empty.bin")
        expectStatus(hash, SMPExit.device, sourceLocation: sourceLocation)
        #expect(hash.stderr.contains("FILE_EMPTY"), "\(hash)", sourceLocation: sourceLocation)
    }

    // MARK: QEMU: MCUboot and firmware upgrades

    @Test("mps2 (QEMU): MCUboot with the app loaded; echo, params, stats, shell, image list", .timeLimit(.minutes(3)))
    func mps2App() async throws {
        let image = try SignedImageFile(FirmwareRig.file("mps2_an385_serial_recovery_buf1024.signed.bin"))
        try await FirmwareRig.with(.mps2) { rig in
            try await Self.checkOS(rig)
            try await Self.checkStatistics(rig)
            try await Self.checkShell(rig)
            let list = expectSuccess(try await rig.smp("--json", "image", "list"))
            let slot = Self.images(list).first { jsonInt($0["slot"]) == 0 }
            #expect(slot?["hash"] as? String == hex(image.hash), "\(list)")
            #expect(slot?["active"] as? Bool == true, "\(list)")
        }
    }

    @Test("mps2 (QEMU) MCUboot serial recovery: smp dfu of the 132 kB app; the app then answers", .timeLimit(.minutes(6)))
    func mps2SerialRecovery() async throws {
        let url = FirmwareRig.file("mps2_an385_serial_recovery_buf1024.signed.bin")
        let image = try SignedImageFile(url)
        try await FirmwareRig.with(.mps2Recovery) { rig in
            // MCUboot alone: this build answers echo with ENOTSUP (no CONFIG_BOOT_MGMT_ECHO; measured with
            // v1 and v2 requests and with smpclient), and an empty image list.
            let echo = try await rig.smp("os", "echo", "hi")
            expectStatus(echo, SMPExit.device)
            #expect(echo.stderr.contains("ENOTSUP"), "\(echo)")
            let before = expectSuccess(try await rig.smp("--json", "image", "list"))
            #expect(Self.images(before).isEmpty, "\(before)")

            let dfu = try await rig.smp(["dfu", url.path], timeout: 300)
            expectSuccess(dfu)
            #expect(dfu.status == 0, "device log:\n\(rig.deviceLog())")
            guard dfu.status == 0 else { return }

            // The application runs: it answers os params, which MCUboot's serial recovery does not.
            let params = expectSuccess(try await rig.smp("--json", "os", "params"))
            #expect(jsonInt(jsonObject(params)?["buf_size"]) == 1024, "\(params)")
            let after = expectSuccess(try await rig.smp("--json", "image", "list"))
            let slot = Self.images(after).first { jsonInt($0["slot"]) == 0 }
            #expect(slot?["hash"] as? String == hex(image.hash), "\(after); uploaded \(hex(image.hash))")
            #expect(slot?["active"] as? Bool == true, "\(after)")
        }
    }

    @Test("qemu_cortex_m0 (QEMU, MCUboot swap): groups, then smp dfu --mode test-and-confirm of the app as 2.0.0",
        .timeLimit(.minutes(8)))
    func cortexM0Upgrade() async throws {
        guard let venv = TestEnvironment.venv else {
            Issue.record("\(TestEnvironment.venvMissingReason) (imgtool signs the 2.0.0 image)")
            return
        }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let original = try SignedImageFile(FirmwareRig.file("qemu_cortex_m0_serial.signed.bin"))
        // The same application signed again as 2.0.0 (hash TLV only, no key), as the firmware README says.
        let body = directory.path("body.bin")
        try original.body.write(to: URL(fileURLWithPath: body))
        let updated = directory.path("app-2.0.0.signed.bin")
        let sign = try await ProcessRunner.run(
            venv.appendingPathComponent("bin/imgtool"),
            ["sign", "--header-size", "0x200", "--pad-header", "--align", "4", "--version", "2.0.0",
             "--slot-size", "0x1A000", body, updated], timeout: 60)
        try #require(sign.status == 0, "imgtool sign failed: \(sign)")
        let image = try SignedImageFile(URL(fileURLWithPath: updated))

        try await FirmwareRig.with(.m0) { rig in
            try await Self.checkOS(rig)
            try await Self.checkStatistics(rig)
            let before = expectSuccess(try await rig.smp("--json", "image", "list"))
            let running = Self.images(before).first { jsonInt($0["slot"]) == 0 }
            #expect(running?["version"] as? String == original.version, "\(before)")
            #expect(running?["hash"] as? String == hex(original.hash), "\(before)")

            let dfu = try await rig.smp(["dfu", updated, "--mode", "test-and-confirm"], timeout: 360)
            expectSuccess(dfu)
            #expect(dfu.status == 0, "device log:\n\(rig.deviceLog())")
            guard dfu.status == 0 else { return }

            let after = expectSuccess(try await rig.smp("--json", "image", "list"))
            let slot = Self.images(after).first { jsonInt($0["slot"]) == 0 }
            #expect(slot?["version"] as? String == "2.0.0", "\(after)")
            #expect(slot?["hash"] as? String == hex(image.hash), "\(after)")
            #expect(slot?["active"] as? Bool == true, "\(after)")
            #expect(slot?["confirmed"] as? Bool == true, "\(after)")
        }
    }

    // MARK: Checks shared by the builds

    static func checkOS(_ rig: FirmwareRig, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let short = try await rig.smp("os", "echo", "hi")
        expectSuccess(short, sourceLocation: sourceLocation)
        #expect(short.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "hi", "\(short)", sourceLocation: sourceLocation)

        let long = try await rig.smp("os", "echo", longText)
        expectSuccess(long, sourceLocation: sourceLocation)
        #expect(
            long.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == longText,
            "\(long)\ndevice log:\n\(rig.deviceLog())", sourceLocation: sourceLocation)

        let params = try await rig.smp("--json", "os", "params")
        expectSuccess(params, sourceLocation: sourceLocation)
        if let expected = expectedParams(rig.build), params.status == 0 {
            let object = jsonObject(params, sourceLocation: sourceLocation)
            #expect(jsonInt(object?["buf_size"]) == expected.size, "\(params)", sourceLocation: sourceLocation)
            #expect(jsonInt(object?["buf_count"]) == expected.count, "\(params)", sourceLocation: sourceLocation)
        }
    }

    /// The requests of an upload as if its hash had seen the whole file. A device may close the open file
    /// on its idle timer between two chunks (fs_mgmt's automatic idle close; a loaded flake-check run
    /// starved native_sim_serial_fs that long): it reopens it without the upload's length, so it never
    /// closes it at the end and its hash sees a shorter file. smp then takes the long way: it closes the
    /// file, asks its length and hashes it again (the outcome is checked by the caller as always).
    static func withoutTheLongWay(_ requests: [String], _ rig: FirmwareRig) -> [String] {
        withoutTheLongWay(requests, device: "\(rig.build)")
    }

    static func withoutTheLongWay(_ requests: [String], device: String) -> [String] {
        let longWay = ["read 8/2", "write 8/4", "read 8/1", "read 8/2"]
        guard Array(requests.suffix(longWay.count)) == longWay else { return requests }
        print("\(device): the device's first hash saw an open file; smp closed it and checked again")
        return Array(requests.dropLast(longWay.count - 1))
    }

    static func checkStatistics(_ rig: FirmwareRig, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let list = try await rig.smp("stat", "list")
        expectSuccess(list, sourceLocation: sourceLocation)
        #expect(list.stdout.contains("smp_svr_stats"), "\(list)", sourceLocation: sourceLocation)
        // smp_svr's own group: one counter, `ticks`, that its main loop increments.
        let read = try await rig.smp("--json", "stat", "read", "smp_svr_stats")
        expectSuccess(read, sourceLocation: sourceLocation)
        let fields = jsonObject(read, sourceLocation: sourceLocation)?["fields"] as? [String: Any]
        #expect(jsonInt(fields?["ticks"]) != nil, "\(read)", sourceLocation: sourceLocation)
    }

    static func checkShell(_ rig: FirmwareRig, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let result = try await rig.smp("shell", "exec", "--", "kernel", "version")
        expectSuccess(result, sourceLocation: sourceLocation)
        // The firmware answers "\r\nZephyr version 4.4.0\r\n": the shell's line break before the output is left out.
        #expect(result.stdout == "Zephyr version 4.4.0\r\n", "\(result)", sourceLocation: sourceLocation)
        // A command slower than the resend timeout (0.3 s on serial, 25 ms over UDP once round trips are
        // measured) goes out once: Zephyr runs every copy it gets, and a second `kernel sleep 1500` held
        // the next request 1.4 s on native_sim_serial.
        let slow = try await rig.smp("-v", "shell", "exec", "--", "kernel", "sleep", "1500")
        expectSuccess(slow, sourceLocation: sourceLocation)
        #expect(slow.stderr.components(separatedBy: "-> write shell(9)").count == 2, "one request: \(slow)", sourceLocation: sourceLocation)
        #expect(!slow.stderr.contains("resend seq"), "\(slow)", sourceLocation: sourceLocation)
    }

    static func images(_ result: ProcessResult) -> [[String: Any]] {
        (try? JSONSerialization.jsonObject(with: result.stdoutData) as? [String: Any])?["images"] as? [[String: Any]] ?? []
    }

    /// A local file's digest as `smp --json fs hash` prints it: SHA-256 in lowercase hex, CRC-32 as a decimal
    /// number (Debian's python3 hashlib and zlib: independent of the code under test).
    static func digest(_ path: String, type: String) async throws -> String {
        let script = type == "crc32"
            ? "import sys, zlib; print(zlib.crc32(open(sys.argv[1], 'rb').read()))"
            : "import sys, hashlib; print(hashlib.new(sys.argv[2], open(sys.argv[1], 'rb').read()).hexdigest())"
        let result = try await ProcessRunner.run(
            URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, path, type], timeout: 30)
        guard result.status == 0 else { throw E2EError("could not compute the \(type) of \(path): \(result)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
