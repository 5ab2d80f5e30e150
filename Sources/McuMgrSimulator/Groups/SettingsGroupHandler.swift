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
            settings.set(name, value)
            return .empty
        case (1, false):
            settings.delete(try settingsName(fields))
            return .empty
        case (2, false):
            return .empty
        case (3, true):
            settings.load()
            return .empty
        case (3, false):
            settings.save(subtree: try fields.text("name"))
            return .empty
        default:
            throw .notSupported
        }
    }

    private func settingsName(_ fields: RequestFields) throws(SimulatorFault) -> String {
        guard let name = try fields.text("name") else { throw .invalidValue }
        guard name.utf8.count <= configuration.settingsNameLimit else { throw .group(.settings, 2) }  // KEY_TOO_LONG
        return name
    }
}
