import McuMgrCore

/// Statistics group (2): group data and list (PROTOCOL.md 3.3).
extension DeviceState {
    /// The statistics groups the build registers, in list order.
    var statisticsGroups: [String] { configuration.statisticsGroups ?? StatsRegistry.groupNames }

    mutating func handleStats(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch request.command.rawValue {
        case 0:
            guard let name = try request.decodedFields().text("name") else { throw .invalidValue }
            let uptimeMs = uptime.nanosecondsClamped / 1_000_000
            // An unknown group name: STAT_MGMT_ERR_INVALID_STAT_NAME (3), measured on native_sim_udp 4.4.0.
            guard statisticsGroups.contains(name), let fields = stats.fields(of: name, uptimeMilliseconds: uptimeMs)
            else { throw .group(.stats, 3) }
            let entries: [CBORMapEntry] = .entries([
                "name": .text(name),
                "fields": .map(fields.map { CBORMapEntry(key: .text($0.0), value: .unsigned($0.1)) }),
            ])
            // A group too large for the buffer: MGMT_ERR_EMSGSIZE (rc 7), measured on the mps2 app.
            guard encodedSize(entries) <= maximumPayload else { throw .returnCode(.init(rawValue: 7)) }
            return .success(entries)
        case 1:
            return .ok(["stat_list": .array(statisticsGroups.map { .text($0) })])
        default:
            throw .notSupported
        }
    }
}
