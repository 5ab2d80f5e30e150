/// Zephyr settings as the settings group sees them: writes go to the runtime values, `save` persists
/// them, `load` (and a reboot) reloads the persisted ones.
struct SettingsStore: Sendable {
    private(set) var runtime: [String: [UInt8]]
    private(set) var saved: [String: [UInt8]]

    init(saved: [String: [UInt8]]) {
        self.saved = saved
        self.runtime = saved
    }

    func value(_ name: String) -> [UInt8]? { runtime[name] }

    mutating func set(_ name: String, _ value: [UInt8]) { runtime[name] = value }

    mutating func delete(_ name: String) {
        runtime[name] = nil
        saved[name] = nil
    }

    /// Persists the runtime values under `subtree` (all when nil).
    mutating func save(subtree: String?) {
        func inTree(_ key: String) -> Bool {
            guard let subtree, !subtree.isEmpty else { return true }
            return key == subtree || key.hasPrefix(subtree + "/")
        }
        for key in saved.keys where inTree(key) && runtime[key] == nil { saved[key] = nil }
        for (key, value) in runtime where inTree(key) { saved[key] = value }
    }

    /// `settings_load`: persisted values override runtime ones.
    mutating func load() {
        for (key, value) in saved { runtime[key] = value }
    }

    /// After a reboot only persisted values exist.
    mutating func reload() { runtime = saved }

    /// Zephyr basic "erase storage": the settings partition is wiped.
    mutating func erase() {
        saved = [:]
        runtime = [:]
    }
}
