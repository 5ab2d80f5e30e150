import Foundation
import Testing

/// What `smp` says about its own command line and how it shapes its output: misspelled groups and
/// commands named with the nearest known one, `--json` outcomes as one object on stdout with nothing
/// on stderr, `shell exec` output as the device printed it. Runs the real binary against `sim:`.
@Suite("smp command line: unknown names, --json outcomes, shell output", .timeLimit(.minutes(10)))
struct CommandLineTests {
    @Test(
        "a misspelled group or command is named, with the nearest known name",
        arguments: [
            (["--device", "sim:", "stats", "list"], "unknown group 'stats'", "did you mean 'stat'?"),
            (["stats", "list", "--device", "sim:"], "unknown group 'stats'", "did you mean 'stat'?"),
            (["-v", "--device", "sim:", "imgae", "list"], "unknown group 'imgae'", "did you mean 'image'?"),
            (["--device", "sim:", "os", "ech", "hi"], "unknown command 'ech' in `smp os`", "did you mean 'echo'?"),
            (["--device", "sim:", "settings", "raed", "bt/name"], "unknown command 'raed' in `smp settings`", "did you mean 'read'?"),
            (["--device", "sim:", "echo", "hi"], "unknown group 'echo'", "did you mean `smp os echo`?"),
        ])
    func unknownNames(arguments: [String], names: String, suggestion: String) async throws {
        let result = try await runSMP(arguments)
        expectStatus(result, SMPExit.usage)
        #expect(result.stderr.contains(names) && result.stderr.contains(suggestion), "\(result)")
        #expect(!result.stderr.contains("Unknown option"), "the parser's message about another token: \(result)")
        #expect(result.stdout.isEmpty, "\(result)")
    }

    @Test("a name far from every group gets the list of groups and no guess")
    func unknownNameWithoutGuess() async throws {
        let result = try await runSMP(["--device", "sim:", "zzzzzz", "list"])
        expectStatus(result, SMPExit.usage)
        #expect(result.stderr.contains("unknown group 'zzzzzz'"), "\(result)")
        #expect(!result.stderr.contains("did you mean"), "\(result)")
        #expect(result.stderr.contains("Groups: os, image, stat,"), "\(result)")
    }

    @Test("`smp help GROUP` and leaf commands' arguments are not taken for unknown names")
    func knownNamesPass() async throws {
        let help = try await runSMP(["help", "os"])
        expectSuccess(help)
        #expect(help.stdout.contains("echo"), "\(help)")
        // `dfu` takes a file name where a group takes a command: a missing file, not an unknown name.
        let dfu = try await runSMP(["--device", "sim:", "dfu", "/nonexistent/app.bin"])
        expectStatus(dfu, SMPExit.file)
        #expect(!dfu.stderr.contains("unknown"), "\(dfu)")
    }

    @Test(
        "--json: every failure is one error object on stdout with its exit code, and stderr stays empty",
        arguments: [
            (["--json", "--device", "sim:", "stats", "list"], "usage", SMPExit.usage),
            (["--json", "--device", "sim:", "os", "echo"], "usage", SMPExit.usage),
            (["--json", "--device", "sim:", "--bogus", "os", "echo", "hi"], "usage", SMPExit.usage),
            (["--json", "--device", "sim:", "--timeout", "0", "os", "echo", "hi"], "usage", SMPExit.usage),
            (["--json", "--device", "bogus:thing", "os", "echo", "hi"], "usage", SMPExit.usage),
            (["--json", "--device", "sim:", "stat", "read", "no_such_group"], "device", SMPExit.device),
            (["--json", "--device", "sim:", "fs", "upload", "/nonexistent/file.bin", "/lfs1/f"], "file", SMPExit.file),
            (["--json", "--device", "serial:/dev/does-not-exist-e2e", "os", "echo", "hi"], "transport", SMPExit.transport),
        ])
    func jsonFailures(arguments: [String], kind: String, status: Int32) async throws {
        let result = try await runSMP(arguments)
        expectStatus(result, status)
        #expect(result.stderr.isEmpty, "stderr under --json: \(result)")
        #expect(result.stdout.hasSuffix("}\n") && result.stdout.filter { $0 == "\n" }.count == 1, "not one line: \(result)")
        let error = jsonObject(result)?["error"] as? [String: Any]
        #expect(error?["kind"] as? String == kind, "\(result)")
        #expect(jsonInt(error?["exit_code"]).map(Int32.init) == status, "\(result)")
        let message = error?["message"] as? String ?? ""
        #expect(message.count > 10, "\(result)")
    }

    @Test("--json success: the device's answer as one object, nothing on stderr")
    func jsonSuccess() async throws {
        let result = try await runSMP(["--json", "--device", "sim:", "os", "echo", "hi"])
        expectSuccess(result)
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(jsonObject(result)?["r"] as? String == "hi", "\(result)")
    }

    @Test("shell exec prints the device's output exactly, with no blank line before it")
    func shellOutput() async throws {
        let result = try await runSMP(["--device", "sim:", "shell", "exec", "--", "kernel", "version"])
        expectSuccess(result)
        #expect(result.stdout == "Zephyr version 3.7.0\n", "\(result)")
        let echo = try await runSMP(["--device", "sim:", "shell", "exec", "--", "echo", "a", "b"])
        #expect(echo.stdout == "a b\n", "\(echo)")
    }

    @Test("shell exec of a failing command: its output, and its code as the exit code, with and without --json")
    func shellFailure() async throws {
        let result = try await runSMP(["--device", "sim:", "shell", "exec", "--", "nosuchcommand"])
        expectStatus(result, 1)
        #expect(result.stdout == "nosuchcommand: command not found\n", "\(result)")
        let json = try await runSMP(["--json", "--device", "sim:", "shell", "exec", "--", "nosuchcommand"])
        expectStatus(json, 1)
        #expect(json.stderr.isEmpty, "\(json)")
        #expect(jsonInt(jsonObject(json)?["ret"]) == -8, "\(json)")
    }
}
