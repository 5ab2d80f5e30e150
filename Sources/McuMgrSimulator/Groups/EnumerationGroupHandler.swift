import McuMgrCore

/// Enumeration group (10): count, list, single, details (PROTOCOL.md 3.8).
extension DeviceState {
    mutating func handleEnumeration(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let groups = (configuration.enabledGroups ?? SupportedCommands.groups).filter {
            SupportedCommands.table[$0] != nil && ($0 != SUITState.group || suit != nil)
        }
        switch request.command.rawValue {
        case 0:
            return .ok(["count": .unsigned(UInt64(groups.count))])
        case 1:
            return .ok(["groups": .array(groups.map { .unsigned(UInt64($0)) })])
        case 2:
            let index = try request.decodedFields().count("index") ?? 0
            guard index < groups.count else { throw .group(.enumeration, 4) }  // INDEX_TOO_LARGE
            if index == groups.count - 1 {
                return .ok(["group": .unsigned(UInt64(groups[index])), "end": true])
            }
            return .ok(["group": .unsigned(UInt64(groups[index]))])
        case 3:
            var selected = groups
            if let filter = try request.decodedFields().array("groups") {
                var wanted: Set<UInt16> = []
                for item in filter {
                    guard let id = item.uint64 else { throw .invalidValue }
                    if let id = UInt16(exactly: id) { wanted.insert(id) }
                }
                selected = groups.filter { wanted.contains($0) }
            }
            let details: [CBOR] = selected.map { id in
                .map(.entries([
                    "group": .unsigned(UInt64(id)), "name": .text(SupportedCommands.name(id)),
                    "handlers": .unsigned(UInt64(handlerCount(id))),
                ]))
            }
            return .ok(["groups": .array(details)])
        default:
            throw .notSupported
        }
    }

    /// Zephyr's handler count for a group: the highest command id it serves + 1 (handler arrays are
    /// indexed by id).
    private func handlerCount(_ group: UInt16) -> Int {
        let served = (SupportedCommands.table[group] ?? [:]).keys.filter { configuration.serves(group: group, command: $0) }
        return (served.max()).map { Int($0) + 1 } ?? 0
    }
}
