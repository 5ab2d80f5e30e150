import McuMgrCore

/// The mynewt-only groups, answered with plain `rc` codes as mynewt does: log (4), crash (5) and
/// run-test (7) (PROTOCOL.md 3.5).
extension DeviceState {
    static let runTests = ["selftest", "flash_test", "crypto_test"]

    mutating func handleLog(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch request.command.rawValue {
        case 0:
            let fields = try request.fields()
            if let name = try fields.text("log_name"), !name.isEmpty, name != DeviceLog.name {
                throw .returnCode(.noEntry)
            }
            let fromIndex = try fields.unsigned("index") ?? 0
            // Newest entries that fit one response.
            var chosen: [CBOR] = []
            for entry in log.entries.reversed() where entry.index >= fromIndex {
                let item = CBOR.map(.entries([
                    "msg": .bytes(entry.message), "ts": .unsigned(entry.timestamp), "level": .unsigned(entry.level),
                    "index": .unsigned(entry.index), "module": .unsigned(entry.module),
                ]))
                let trial = logResponse(Array(([item] + chosen)))
                guard encodedSize(trial) <= maximumPayload else { break }
                chosen.insert(item, at: 0)
            }
            return .success(logResponse(chosen))
        case 1:
            log.clear()
            return .empty
        case 3:
            return .ok(["module_map": .map(DeviceLog.modules.map { CBORMapEntry(key: .text($0.0), value: .unsigned($0.1)) })])
        case 4:
            return .ok(["level_map": .map(DeviceLog.levels.map { CBORMapEntry(key: .text($0.0), value: .unsigned($0.1)) })])
        case 5:
            return .ok(["log_list": [.text(DeviceLog.name)]])
        default:
            throw .notSupported
        }
    }

    private func logResponse(_ entries: [CBOR]) -> [CBORMapEntry] {
        .entries([
            "next_index": .unsigned(log.nextIndex),
            "logs": [.map(.entries(["name": .text(DeviceLog.name), "type": 1, "entries": .array(entries)]))],
        ])
    }

    /// Crash test: answers, then the device "crashes" and reboots like a reset.
    mutating func handleCrash(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        guard let kind = try request.fields().text("t") else { throw .invalidValue }
        guard ["div0", "jump0", "ref0", "assert", "wdog"].contains(kind) else { throw .invalidValue }
        log.append("Crash test: \(kind)", level: 4, at: UInt64(uptime.nanosecondsClamped / 1000))
        requestedReset = (.crash, nil)
        return .empty
    }

    mutating func handleRunTest(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch request.command.rawValue {
        case 0:
            let fields = try request.fields()
            let name = try fields.text("testname") ?? "all"
            let token = try fields.text("token") ?? ""
            let tests = name == "all" ? Self.runTests : Self.runTests.filter { $0 == name }
            guard !tests.isEmpty else { throw .returnCode(.noEntry) }
            for test in tests {
                log.append("Test \(test) passed \(token)", level: 1, at: UInt64(uptime.nanosecondsClamped / 1000))
            }
            return .empty
        case 1:
            return .ok(["run_list": .array(Self.runTests.map { .text($0) })])
        default:
            throw .notSupported
        }
    }
}
