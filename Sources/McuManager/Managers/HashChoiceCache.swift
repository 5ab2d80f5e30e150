/// The hash type a device offers, found once per transfer: sha256 when a hash of that type is answered,
/// else (asked for the list) crc32; `.some(nil)` asks for the device's default (the device lists no
/// types); nil: the device has none.
final class HashChoiceCache: Sendable {
    private enum Known: Sendable {
        case type(String?)
        case none
    }
    private let cached = LockedState<Known?>(nil)
    private let sha256Tried = LockedState(false)
    private let remembered: LockedState<String?>

    /// - Parameter remembered: the type this device answered before (`crc32`: asked for at once; other
    ///   values are found as without it, SHA-256 being asked for first anyway).
    init(remembered: String? = nil) {
        self.remembered = LockedState(remembered == "crc32" ? remembered : nil)
    }

    /// The type to ask for first, remembered from an earlier transfer; nil once it failed.
    var rememberedType: String? { remembered.withLock { $0 } }

    /// The remembered type was refused: find the device's types as for a new device.
    func forgetRemembered() { remembered.withLock { $0 = nil } }

    /// Nothing is known yet and SHA-256 was not tried: worth asking for a SHA-256 hash straight away.
    var untried: Bool { cached.withLock { $0 == nil } && !sha256Tried.withLock { $0 } }

    /// A hash of `type` was answered.
    func found(_ type: String) { cached.withLock { $0 = .type(type) } }

    /// The device has no hash command.
    func noHashCommand() { cached.withLock { $0 = Known.none } }

    /// The device answered a SHA-256 hash request with "hash type not found".
    func sha256Refused() { sha256Tried.withLock { $0 = true } }

    func choice(_ manager: FileSystemManager) async throws -> String?? {
        if let known = cached.withLock({ $0 }) { return Self.value(known) }
        let found: Known
        do {
            let types = try await manager.supportedHashTypes()
            if types["sha256"] != nil, !sha256Tried.withLock({ $0 }) {
                found = .type("sha256")
            } else if types["crc32"] != nil {
                found = .type("crc32")
            } else {
                found = .none
            }
        } catch let error as McuMgrError where FileSystemManager.isUnsupported(error) {
            found = .type(nil)  // No list: ask for the device's default type.
        }
        cached.withLock { $0 = found }
        return Self.value(found)
    }

    private static func value(_ known: Known) -> String?? {
        switch known {
        case .type(let name): return .some(name)
        case .none: return .none
        }
    }
}
