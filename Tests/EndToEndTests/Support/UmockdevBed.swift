import Foundation
import Testing

/// A umockdev test bed run by Tests/Harness/umockdev_bed.py (Debian's /usr/bin/python3 with
/// gir1.2-umockdev-1.0): fake USB serial boards under an emulated /sys and /dev, programs run under
/// the preload, optional byte relay from a fake tty to an `smp-sim` pty. Each bed is its own process.
enum UmockdevBed {
    static let python = "/usr/bin/python3"
    static let harness = TestEnvironment.repositoryRoot.appendingPathComponent("Tests/Harness/umockdev_bed.py")

    /// Whether umockdev and its Python bindings are installed.
    static let isAvailable: Bool = {
        guard FileManager.default.isExecutableFile(atPath: python) else { return false }
        let result = try? ProcessRunner.runBlocking(
            URL(fileURLWithPath: python),
            ["-c", "import gi; gi.require_version('UMockdev', '1.0'); from gi.repository import UMockdev; import ctypes; ctypes.CDLL('libumockdev-preload.so.0')"],
            timeout: 20, environment: [:], currentDirectory: nil)
        return result?.status == 0
    }()

    /// Scripts/test.sh requires the rig (it installs it); elsewhere the tests skip with this reason.
    static let isRequired = ProcessInfo.processInfo.environment["SMP_TEST_REQUIRE_UMOCKDEV"] == "1"
    static let missingReason =
        "needs umockdev (apt: umockdev libumockdev-dev gir1.2-umockdev-1.0 python3-gi; run Scripts/setup.sh)"
    static var shouldRun: Bool { isAvailable || isRequired }

    struct Report {
        var results: [String: ProcessResult]
        var log: [String]
        var error: String?
        var raw: ProcessResult

        subscript(name: String) -> ProcessResult {
            results[name] ?? ProcessResult(
                status: -1, stdout: "", stderr: "no result named \(name); harness: \(raw)", stdoutData: Data(),
                timedOut: false, duration: 0, commandLine: name)
        }
    }

    /// Runs a bed with `spec` (see the harness's docstring) and returns what its steps printed.
    static func run(_ spec: [String: Any], timeout: Double = 120, environment: [String: String] = [:]) async throws -> Report {
        if !isAvailable { throw E2EError("\(missingReason) (required by Scripts/test.sh)") }
        try TestEnvironment.requireBinaries()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let specURL = directory.url.appendingPathComponent("spec.json")
        try JSONSerialization.data(withJSONObject: spec).write(to: specURL)
        let raw = try await ProcessRunner.run(
            URL(fileURLWithPath: python), [harness.path, specURL.path], timeout: timeout,
            environment: ["XDG_CONFIG_HOME": directory.path("config")].merging(environment) { $1 })
        guard raw.status == 0, let object = try? JSONSerialization.jsonObject(with: raw.stdoutData) as? [String: Any] else {
            throw E2EError("the umockdev harness failed: \(raw)")
        }
        var results: [String: ProcessResult] = [:]
        for (name, value) in object["results"] as? [String: [String: Any]] ?? [:] {
            let stdout = value["stdout"] as? String ?? ""
            results[name] = ProcessResult(
                status: Int32(jsonInt(value["status"]) ?? -1), stdout: stdout, stderr: value["stderr"] as? String ?? "",
                stdoutData: Data(stdout.utf8), timedOut: value["timed_out"] as? Bool ?? false, duration: 0,
                commandLine: name)
        }
        return Report(
            results: results, log: object["log"] as? [String] ?? [], error: object["error"] as? String, raw: raw)
    }

    // MARK: The fake devices

    static func nordic(relayTo pty: String? = nil, plugged: Bool = true) -> [String: Any] {
        var device: [String: Any] = [
            "id": "nordic", "vendor": "1915", "product": "520f", "serial": "D1A2B3C4E5F60718",
            "manufacturer": "Nordic Semiconductor", "product_name": "nRF52840 USB CDC", "driver": "cdc_acm",
            "port": "1-1", "ttys": [["name": "ttyACM0", "interface": 0]], "plugged": plugged,
        ]
        if let pty { device["relay_to"] = pty }
        return device
    }

    static var jlink: [String: Any] { [
        "id": "jlink", "vendor": "1366", "product": "1051", "serial": "001050234567", "manufacturer": "SEGGER",
        "product_name": "J-Link", "driver": "cdc_acm", "port": "1-2",
        "ttys": [["name": "ttyACM1", "interface": 0], ["name": "ttyACM2", "interface": 2]],
    ] }

    static var ftdi: [String: Any] { [
        "id": "ftdi", "vendor": "0403", "product": "6001", "serial": "A10KXYZ9", "manufacturer": "FTDI",
        "product_name": "FT232R USB UART", "driver": "ftdi_sio", "port": "2-1",
        "ttys": [["name": "ttyUSB0", "interface": 0]],
    ] }

    /// A step running `smp ARGS`.
    static func smp(_ name: String, _ arguments: [String], timeout: Double = 30) -> [String: Any] {
        ["run": [TestEnvironment.smp.path] + arguments, "name": name, "timeout": timeout]
    }
}
