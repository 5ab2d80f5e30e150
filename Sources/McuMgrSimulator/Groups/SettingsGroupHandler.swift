import McuMgrCore

/// Settings group (3): read, write, delete, commit, load, save (PROTOCOL.md 3.4).
extension DeviceState {
    mutating func handleSettings(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch (request.command.rawValue, request.isRead) {
        case (2, false):
            return .empty
        case (3, true):
            settings.load()
            return .empty
        default:
            break
        }
        let fields = try request.decodedFields()
        switch (request.command.rawValue, request.isRead) {
        case (0, true):
            let name = try settingsName(fields)
            try requireRoot(name, missing: 5)
            let maxSize = try fields.count("max_size")
            guard let value = settings.value(name) else { throw .group(.settings, 3) }  // KEY_NOT_FOUND
            let limit = configuration.settingsValueLimit
            let size = min(value.count, maxSize ?? limit, limit)
            var entries: [CBORMapEntry] = .entries(["val": .bytes(Array(value.prefix(size)))])
            if let maxSize, maxSize > limit { entries.append("max_size", .unsigned(UInt64(limit))) }
            return .success(entries)
        case (0, false):
            let name = try settingsName(fields)
            guard let value = try fields.bytes("val") else { throw .invalidValue }
            try requireRoot(name, missing: 5)
            settings.set(name, value)
            return .empty
        case (1, false):
            let name = try settingsName(fields)
            try requireRoot(name, missing: 3)
            settings.delete(name)
            return .empty
        case (2, false):
            return .empty
        case (3, true):
            settings.load()
            return .empty
        case (3, false):
            if configuration.settingsSaveFails { throw .group(.settings, 8) }  // SAVE_FAILED
            settings.save(subtree: try fields.text("name"))
            return .empty
        default:
            throw .notSupported
        }
    }

    /// ROOT_KEY_NOT_FOUND (5) or KEY_NOT_FOUND (3) for a key under a subtree without a handler.
    private func requireRoot(_ name: String, missing rc: Int) throws(SimulatorFault) {
        guard let roots = configuration.settingsRoots else { return }
        let root = name.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? name
        if !roots.contains(root) { throw .group(.settings, rc) }
    }

    private func settingsName(_ fields: RequestFields) throws(SimulatorFault) -> String {
        guard let name = try fields.text("name") else { throw .invalidValue }
        guard name.utf8.count <= configuration.settingsNameLimit else { throw .group(.settings, 2) }  // KEY_TOO_LONG
        return name
    }
}
