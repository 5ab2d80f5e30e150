import Foundation
import McuManager
import McuMgrSimulator
import Testing
import ZIPFoundation

/// Firmware packages for the `smp dfu` end-to-end tests, written to a temporary directory: unsigned
/// MCUboot images made by McuMgrImageBuilder, nRF Connect SDK zips built with ZIPFoundation, SUIT
/// envelopes the simulated SUIT device understands.
enum DFUPackages {
    /// The simulator's default slot geometry (SimulatorConfiguration), for Direct-XIP builds.
    static let slotBase: UInt32 = SimulatorConfiguration().imageSlotBaseAddress
    static let slotSize: Int = SimulatorConfiguration().imageSlotSize

    /// An MCUboot image: version `major.minor.revision`, `size` bytes in all. With `linkedSlot` it is
    /// a Direct-XIP build (ROM-fixed, linked for that slot's address).
    static func image(
        version: (UInt8, UInt8, UInt16) = (1, 1, 0), size: Int = 24 * 1024, seed: UInt64 = 1, image: Int = 0,
        linkedSlot: Int? = nil
    ) throws -> (data: Data, hash: Data) {
        var rng = SeededBytes(seed: seed &* 31 &+ UInt64(image) &* 1009 &+ UInt64(linkedSlot ?? 7))
        let body = Data((0..<max(1, size - 0x200 - 48)).map { _ in rng.next() })
        var builder = McuMgrImageBuilder(
            version: McuMgrImageVersion(major: version.0, minor: version.1, revision: version.2))
        if let linkedSlot {
            builder.flags = .romFixed
            builder.loadAddress = slotBase &+ UInt32((image * 2 + linkedSlot) * slotSize)
        }
        let built = try builder.image(body: body)
        return (built.data, built.hash)
    }

    /// Writes `data` to `name` in `directory`; returns the path.
    @discardableResult
    static func write(_ data: Data, _ name: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.path(name)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A zip in memory with ZIPFoundation.
    static func zip(_ entries: [(String, Data)]) throws -> Data {
        let archive = try Archive(data: Data(), accessMode: .create)
        for (index, (path, data)) in entries.enumerated() {
            try archive.addEntry(
                with: path, type: .file, uncompressedSize: Int64(data.count),
                compressionMethod: index % 2 == 1 ? .deflate : .none
            ) { position, size in data.subdata(in: Int(position)..<(Int(position) + size)) }
        }
        return try #require(archive.data)
    }

    /// `dfu_application.zip` with an application core (image 0) and a network core (image 1) update.
    static func twoCoreZip(app: Data, net: Data) throws -> Data {
        let manifest = """
            {"format-version": 0, "time": 1786861789, "name": "app and net core", "files": [
              {"type": "application", "board": "nrf5340dk/nrf5340/cpuapp", "soc": "nrf5340", "load_address": 66048,
               "image_index": "0", "slot_index_primary": "1", "slot_index_secondary": "2", "version_MCUBOOT": "1.1.0",
               "size": \(app.count), "file": "app.signed.bin", "modtime": 1786861789},
              {"type": "application", "board": "nrf5340dk/nrf5340/cpunet", "soc": "nrf5340", "load_address": 16812032,
               "image_index": "1", "slot_index_primary": "3", "slot_index_secondary": "4",
               "size": \(net.count), "file": "ipc_radio.signed.bin", "modtime": 1786861789}
            ]}
            """
        return try zip([("manifest.json", Data(manifest.utf8)), ("app.signed.bin", app), ("ipc_radio.signed.bin", net)])
    }

    /// A Direct-XIP `dfu_application.zip`: the same image built for slot 0 and for slot 1.
    static func directXIPZip(slot0: Data, slot1: Data) throws -> Data {
        let manifest = """
            {"format-version": 0, "time": 1786861789, "name": "direct-xip", "files": [
              {"type": "application", "board": "nrf52840dk/nrf52840", "soc": "nrf52840", "load_address": 49152,
               "image_index": "0", "slot": "0", "version_MCUBOOT+XIP": "1.1.0", "size": \(slot0.count),
               "file": "zephyr.signed.bin", "modtime": 1786861789},
              {"type": "application", "board": "nrf52840dk/nrf52840", "soc": "nrf52840", "load_address": 532480,
               "image_index": "0", "slot": "1", "version_MCUBOOT+XIP": "1.1.0", "size": \(slot1.count),
               "file": "mcuboot_secondary_app.signed.bin", "modtime": 1786861789}
            ]}
            """
        return try zip([("manifest.json", Data(manifest.utf8)), ("zephyr.signed.bin", slot0), ("mcuboot_secondary_app.signed.bin", slot1)])
    }

    /// A SUIT `dfu_application.zip`: the envelope and a cache partition holding its detached resources.
    static func suitZip(_ envelope: SimulatedSUITEnvelope, cachePartition: Int = 1) throws -> Data {
        let manifest = """
            {"format-version": 1, "time": 1786861789, "name": "suit", "files": [
              {"type": "suit-envelope", "board": "nrf54h20dk/nrf54h20/cpuapp", "soc": "nrf54h20", "file": "root.suit",
               "size": \(envelope.bytes.count), "modtime": 1786861789},
              {"type": "cache", "image_index": "\(cachePartition)", "file": "dfu_cache_partition_\(cachePartition).bin"}
            ]}
            """
        return try zip([
            ("manifest.json", Data(manifest.utf8)), ("root.suit", Data(envelope.bytes)),
            ("dfu_cache_partition_\(cachePartition).bin", Data(SimulatedSUITEnvelope.cache(envelope.detachedResources))),
        ])
    }
}

/// Deterministic bytes and fault dice (SplitMix64).
struct SeededBytes {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476C_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: next64()) }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { p > 0 && Double(next64() >> 11) / Double(1 << 53) < p }
}

/// A relay thread's life: runs until `stop()`, which waits (at most 10 s) until the thread has seen it
/// and closed its descriptors (it polls with a short timeout and calls `threadEnded()` on its way out),
/// so that whoever opens the device next finds it free, however late the thread runs.
final class RelayLife: @unchecked Sendable {
    private let condition = NSCondition()
    private var running = true
    private var ended = false

    var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// The relay thread is done: its descriptors are closed.
    func threadEnded() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        defer { condition.unlock() }
        running = false
        let deadline = Date().addingTimeInterval(10)
        while !ended, condition.wait(until: deadline) {}
    }
}

/// One slot of `smp image list --json`.
struct ListedSlot: Sendable, CustomStringConvertible {
    var image: Int
    var slot: Int
    var version: String
    var hash: String
    var active: Bool
    var confirmed: Bool
    var pending: Bool
    var permanent: Bool

    var description: String {
        "image \(image) slot \(slot) \(version) \(hash.prefix(12))"
            + (active ? " active" : "") + (confirmed ? " confirmed" : "") + (pending ? " pending" : "")
            + (permanent ? " permanent" : "")
    }
}

extension SimSession {
    /// The device's image list, read with `smp image list --json` (retried while the device reboots, for
    /// at most `within` seconds: a deadline, not a count of tries, since a try may fail at once).
    func imageList(within: Double = 60) async throws -> [ListedSlot] {
        var last: ProcessResult?
        let deadline = Date().addingTimeInterval(within)
        while last == nil || Date() < deadline {
            let result = try await smp(["--json", "--timeout", "1", "image", "list"], timeout: 20)
            if result.status == 0, let object = try? JSONSerialization.jsonObject(with: result.stdoutData) as? [String: Any],
                let images = object["images"] as? [[String: Any]]
            {
                return images.map { entry in
                    ListedSlot(
                        image: jsonInt(entry["image"]) ?? 0, slot: jsonInt(entry["slot"]) ?? 0,
                        version: entry["version"] as? String ?? "", hash: entry["hash"] as? String ?? "",
                        active: entry["active"] as? Bool ?? false, confirmed: entry["confirmed"] as? Bool ?? false,
                        pending: entry["pending"] as? Bool ?? false, permanent: entry["permanent"] as? Bool ?? false)
                }
            }
            last = result
            try await Task.sleep(for: .milliseconds(200))
        }
        throw E2EError("image list did not answer: \(last.map { "\($0)" } ?? "")")
    }

    /// Resets the device with `smp os reset` and waits until it answers again. (The simulated device
    /// applies a reset when it answers it, then stays silent while it reboots: `imageList` retries until
    /// it answers, however long that takes on a loaded machine.)
    func resetAndWait() async throws -> [ListedSlot] {
        expectSuccess(try await smp("os", "reset"))
        return try await imageList()
    }

    /// Runs `smp --timeout 1 ARGS` until it succeeds (the device may be rebooting), for at most `within`
    /// seconds; returns the last run.
    func smpOnceAnswering(_ arguments: String..., within: Double = 30) async throws -> ProcessResult {
        let deadline = Date().addingTimeInterval(within)
        while true {
            let result = try await smp(["--timeout", "1"] + arguments, timeout: 20)
            if result.status == 0 || Date() >= deadline { return result }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// The JSON events `smp dfu --json` printed, one object per line.
func dfuEvents(_ result: ProcessResult) -> [[String: Any]] {
    result.stdout.split(separator: "\n").compactMap { line in
        try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }
}

/// The `result` event of `smp dfu --json`.
func dfuResult(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any]? {
    guard let event = dfuEvents(result).last(where: { $0["event"] as? String == "result" }) else {
        Issue.record("no result event: \(result)", sourceLocation: sourceLocation)
        return nil
    }
    return event
}

func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined() }

/// Lets at most `limit` DFU end-to-end cases run at once: each runs several processes whose waits block
/// dispatch threads, and an unbounded matrix starves the rest of the test run (timing-sensitive tests of
/// other suites) on a 2-core machine.
actor DFUConcurrencyLimit {
    static let shared = DFUConcurrencyLimit(limit: 3)

    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    func run<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        if running < limit {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

/// `withSimulator` under the DFU concurrency limit.
@discardableResult
func withDFUSimulator<R: Sendable>(
    _ link: Link, extraArguments: [String] = [], _ body: @Sendable @escaping (SimSession) async throws -> R
) async throws -> R {
    try await DFUConcurrencyLimit.shared.run {
        try await withSimulator(link, extraArguments: extraArguments, body)
    }
}
