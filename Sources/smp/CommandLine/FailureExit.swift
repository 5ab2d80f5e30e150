import ArgumentParser
import McuManager

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How `smp` ends when parsing or a command fails: a misspelled group or command is named with the
/// nearest known one; under `--json` every failure, usage errors included, is one error object on
/// stdout (README "JSON output") and stderr stays silent; otherwise the argument parser's own report.
enum FailureExit {
    static func exit(with error: Error, arguments: [String]) -> Never {
        if let code = error as? ExitCode {
            // The command reported its failure itself (CommandRunner.report) or chose this code (shell exec).
            processExit(code.rawValue)
        }
        if let error = error as? McuMgrError {
            CommandRunner.report(error, json: Terminal.jsonRequested)
            processExit(ExitStatus.code(for: error.kind))
        }
        let code = SMP.exitCode(for: error)
        if code == .success {
            SMP.exit(withError: error)  // --help, --version: their text, exit 0
        }
        if let unknown = UnknownNameDiagnosis.message(for: arguments) {
            CommandRunner.report(McuMgrError(.usage, unknown), json: Terminal.jsonRequested)
            processExit(ExitStatus.usage)
        }
        guard Terminal.jsonRequested else { SMP.exit(withError: error) }
        let message = SMP.message(for: error)
        if code.rawValue == ExitStatus.usage {
            CommandRunner.report(McuMgrError(.usage, message + " (see `smp --help`)"), json: true)
        } else {
            CommandRunner.report(kind: "other", message: message, exitCode: code.rawValue, json: true)
        }
        processExit(code.rawValue)
    }
}

/// Ends the process with `code` (the C library's exit, which `FailureExit.exit(with:)` hides by name).
private func processExit(_ code: Int32) -> Never { exit(code) }
