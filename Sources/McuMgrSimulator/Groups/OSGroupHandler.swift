import McuMgrCore

/// OS group (0): echo, task and memory-pool statistics, date-time, reset, MCUmgr parameters, OS info,
/// bootloader info (PROTOCOL.md 3.1).
extension DeviceState {
    mutating func handleOS(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch request.command.rawValue {
        case 0: return try echo(request)
        case 2: return taskStatistics()
        case 3: return memoryPoolStatistics()
        case 4: return request.isRead ? dateTimeGet() : try dateTimeSet(request)
        case 5: return try resetCommand(request)
        case 6:
            return .ok([
                // What runs now: the firmware loader has buffers of its own.
                "buf_size": .unsigned(UInt64(bufferSize)),
                "buf_count": .unsigned(UInt64(configuration.bufferCount)),
            ])
        case 7: return try osInfo(request)
        case 8: return try bootloaderInfo(request)
        default: throw .notSupported
        }
    }

    private func echo(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        // Without `d` the echo is empty (measured on native_sim_udp 4.4.0); `d` of another type is rc 3.
        let text = try request.decodedFields().text("d") ?? ""
        return .ok(["r": .text(text)])
    }

    /// A few Zephyr threads. Only the fields of `ONLY_SUPPORTED_STATS` (the default); trimmed to fit.
    private func taskStatistics() -> SimulatedOutcome {
        let uptimeMs = UInt64(uptime.nanosecondsClamped / 1_000_000)
        let threads: [(String, Int, UInt64, UInt64, UInt64)] = [
            // name, prio, state, stack used, stack size (4-byte words)
            ("idle", 15, 0, 24, 80),
            ("main", 0, 1, 212, 512),
            ("sysworkq", -1, 1, 96, 256),
            ("logging", 14, 1, 118, 192),
            ("shell_uart", 14, 1, 204, 512),
            ("mcumgr smp", 14, 0, 380 + uptimeMs % 7, 1024),
            ("BT RX", -8, 1, 140, 256),
            ("BT TX", -9, 1, 152, 256),
        ]
        var tasks: [CBORMapEntry] = []
        for (index, thread) in threads.enumerated() {
            let entry = CBORMapEntry(
                key: .text(thread.0),
                value: .map(.entries([
                    "prio": .int(thread.1), "tid": .unsigned(UInt64(index)), "state": .unsigned(thread.2),
                    "stkuse": .unsigned(thread.3), "stksiz": .unsigned(thread.4),
                ])))
            guard encodedSize([CBORMapEntry(key: "tasks", value: .map(tasks + [entry]))]) <= maximumPayload else { break }
            tasks.append(entry)
        }
        return .success([CBORMapEntry(key: "tasks", value: .map(tasks))])
    }

    private func memoryPoolStatistics() -> SimulatedOutcome {
        .ok([
            "mpools": .map(.entries([
                "heap": .map(.entries(["blksiz": 1, "nblks": 8192, "nfree": 5120, "min": 4096])),
                "net_buf": .map(.entries(["blksiz": 256, "nblks": 16, "nfree": 14, "min": 9])),
            ]))
        ])
    }

    /// Wall-clock Unix nanoseconds now, by the device's RTC.
    private mutating func rtcNow() -> Int64 {
        if rtc == nil, let start = configuration.initialUnixTime {
            rtc = (start * 1_000_000_000, bootInstant ?? now)
        }
        guard let rtc else { return SystemClock.unixNanosecondsNow() }
        return rtc.unixNanoseconds + Int64(clamping: (now - rtc.at).nanosecondsClamped)
    }

    private mutating func dateTimeGet() -> SimulatedOutcome {
        let seconds = rtcNow() / 1_000_000_000
        return .ok(["datetime": .text(CivilTime.format(unixSeconds: seconds))])
    }

    private mutating func dateTimeSet(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        guard let text = try request.decodedFields().text("datetime") else { throw .invalidValue }
        guard text.utf8.count >= 19, text.utf8.count <= 25 else { throw .invalidValue }
        guard let seconds = CivilTime.parse(text) else { throw .group(.os, 5) }  // RTC_COMMAND_FAILED
        rtc = (seconds * 1_000_000_000, now)
        return .empty
    }

    private mutating func resetCommand(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        // `force` is decoded as bool; any decode failure is ignored (PROTOCOL.md 3.1).
        let fields = (try? request.fields()) ?? RequestFields(entries: [])
        let bootMode = fields.value("boot_mode")?.uint64
        requestedReset = (.resetCommand, bootMode)
        return .empty
    }

    private func osInfo(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let format = try request.decodedFields().text("format") ?? "s"
        let known: Set<Character> = ["s", "n", "r", "v", "b", "m", "p", "i", "o", "a"]
        guard format.allSatisfy({ known.contains($0) }) else { throw .group(.os, 2) }  // INVALID_FORMAT
        let all = format.contains("a")
        let fields: [(Character, String)] = [
            ("s", "Zephyr"), ("n", configuration.hostname), ("r", configuration.kernelRelease),
            ("v", configuration.kernelVersion), ("b", configuration.buildDateTime), ("m", configuration.machine),
            ("p", configuration.processor), ("i", configuration.boardName), ("o", "Zephyr"),
        ]
        let output = fields.filter { all || format.contains($0.0) }.map(\.1).joined(separator: " ")
        return .ok(["output": .text(output)])
    }

    private func bootloaderInfo(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let query = try request.fields().text("query")
        if configuration.suit != nil {
            // NCS SUIT devices: the name, and rc 8 for any query (suitfu_mgmt_suit_os.c).
            guard query == nil else { throw .notSupported }
            return .ok(["bootloader": "SUIT"])
        }
        guard let query else { return .ok(["bootloader": "MCUboot"]) }
        guard query == "mode" else { throw .group(.os, 3) }  // QUERY_YIELDS_NO_ANSWER
        let mode = configuration.bootloader.mode.rawValue
        if configuration.bootloader.noDowngrade { return .ok(["mode": .int(mode), "no-downgrade": true]) }
        return .ok(["mode": .int(mode)])
    }
}
