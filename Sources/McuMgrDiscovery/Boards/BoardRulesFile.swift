#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

/// The user's board rules: a JSON file that extends and overrides the built-in table.
///
/// ```json
/// {"boards": [
///   {"usb": "1915:520f", "name": "Lab gateway", "smp": "likely"},
///   {"usb": "1366:1051", "interface": 2, "name": "nRF5340 DK", "role": "VCOM1: MCUmgr UART", "smp": "likely"},
///   {"usb": "0403:6001", "serial_prefix": "A10", "name": "Rig 3 UART", "kind": "usb-serial-adapter"}
/// ]}
/// ```
///
/// Keys: `usb` ("VID" or "VID:PID", hex; required), `interface` (number), `serial_prefix`, `name`
/// (required), `kind` (`board`, `debug-probe`, `usb-serial-adapter`; default `board`), `smp` (`likely`,
/// `possible`, `unlikely`; default `possible`), `role`, `follows_resets` (default: true for `board`).
/// A top-level array of entries works too. Unknown keys are refused so that typos do not pass silently.
public enum BoardRulesFile {
    /// `$SMP_BOARDS` when set, else `$XDG_CONFIG_HOME/smp/boards.json`, else `~/.config/smp/boards.json`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> (path: String, explicit: Bool) {
        if let path = environment["SMP_BOARDS"], !path.isEmpty { return (path, true) }
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty { return (config + "/smp/boards.json", false) }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        return (home + "/.config/smp/boards.json", false)
    }

    /// The rules in the default file; none when the default file does not exist.
    /// - Throws: `McuMgrError` `.file` when the file is unreadable or malformed, or `$SMP_BOARDS` names a
    ///   missing file.
    public static func loadDefault(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [BoardRule] {
        let (path, explicit) = defaultPath(environment: environment)
        if !FileManager.default.fileExists(atPath: path) {
            if explicit { throw McuMgrError(.file, "board rules file \(path) (from $SMP_BOARDS) does not exist") }
            return []
        }
        return try load(path: path)
    }

    /// The rules in `path`.
    public static func load(path: String) throws -> [BoardRule] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw McuMgrError(.file, "cannot read board rules file \(path); check its permissions")
        }
        return try parse(data, source: path)
    }

    static let keys: Set<String> = ["usb", "interface", "serial_prefix", "name", "kind", "smp", "role", "follows_resets", "comment"]

    /// Parses rules from JSON text; `source` names the file in messages.
    public static func parse(_ data: Data, source: String) throws -> [BoardRule] {
        func fail(_ what: String) -> McuMgrError {
            McuMgrError(.file, "board rules file \(source): \(what) (see README, \"Board table\")")
        }
        let object: Any
        do {
            object = plainValue(try JSONDecoder().decode(CBOR.self, from: data))
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw fail("not valid JSON" + (context.underlyingError.map { " (\($0))" } ?? ""))
        } catch {
            throw fail("not valid JSON (\(error))")
        }
        let entries: [Any]
        if let array = object as? [Any] {
            entries = array
        } else if let dictionary = object as? [String: Any], let boards = dictionary["boards"] as? [Any] {
            entries = boards
        } else {
            throw fail("expected {\"boards\": [...]} or a list of entries")
        }
        var rules: [BoardRule] = []
        for (index, entry) in entries.enumerated() {
            let at = "entry \(index + 1)"
            guard let e = entry as? [String: Any] else { throw fail("\(at) is not an object") }
            if let unknown = e.keys.first(where: { !keys.contains($0) }) {
                throw fail("\(at) has an unknown key \"\(unknown)\"; keys: \(keys.sorted().joined(separator: ", "))")
            }
            guard let usb = e["usb"] as? String else { throw fail("\(at) needs \"usb\": \"VID\" or \"VID:PID\" (hex)") }
            let ids = usb.split(separator: ":", omittingEmptySubsequences: false)
            guard (1...2).contains(ids.count), let vendor = UInt16(ids[0], radix: 16), ids[0].count <= 4 else {
                throw fail("\(at): \"usb\": \"\(usb)\" is not VID or VID:PID in hex, e.g. \"1915:520f\"")
            }
            var product: UInt16?
            if ids.count == 2 {
                guard let p = UInt16(ids[1], radix: 16), ids[1].count <= 4 else {
                    throw fail("\(at): the product ID in \"\(usb)\" is not 4 hex digits")
                }
                product = p
            }
            guard let name = e["name"] as? String, !name.isEmpty else { throw fail("\(at) needs a \"name\"") }
            var interface: Int?
            if let value = e["interface"] {
                guard let n = value as? Int, (0...255).contains(n) else { throw fail("\(at): \"interface\" must be a number 0-255") }
                interface = n
            }
            var kind = BoardRule.Kind.board
            if let value = e["kind"] {
                guard let text = value as? String, let k = BoardRule.Kind(rawValue: text) else {
                    throw fail("\(at): \"kind\" must be one of \(BoardRule.Kind.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                kind = k
            }
            var smp = BoardRule.SMPHint.possible
            if let value = e["smp"] {
                guard let text = value as? String, let s = BoardRule.SMPHint(rawValue: text) else {
                    throw fail("\(at): \"smp\" must be one of likely, possible, unlikely")
                }
                smp = s
            }
            var follows: Bool?
            if let value = e["follows_resets"] {
                guard let b = value as? Bool else { throw fail("\(at): \"follows_resets\" must be true or false") }
                follows = b
            }
            if let value = e["role"], !(value is String) { throw fail("\(at): \"role\" must be text") }
            if let value = e["serial_prefix"], !(value is String) { throw fail("\(at): \"serial_prefix\" must be text") }
            rules.append(
                BoardRule(
                    vendorID: vendor, productID: product, interfaceNumber: interface,
                    serialPrefix: e["serial_prefix"] as? String, name: name, kind: kind, smp: smp,
                    role: e["role"] as? String, followsResets: follows, source: source))
        }
        return rules
    }
}

/// A JSON value read as `CBOR` (McuMgrCore's JSON mapping), as the plain Swift values the parser
/// checks: `[String: Any]`, `[Any]`, `String`, `Int`, `Double`, `Bool`; null as an absent value.
private func plainValue(_ item: CBOR) -> Any {
    switch item {
    case .text(let text): return text
    case .bool(let value): return value
    case .unsigned(let value): return Int(exactly: value) ?? Double(value)
    case .negative(let value): return value < UInt64(Int.max) ? -1 - Int(value) : -1 - Double(value)
    case .double(let value): return value
    case .float(let value), .half(let value): return Double(value)
    case .array(let items): return items.map(plainValue)
    case .map(let entries):
        var dictionary: [String: Any] = [:]
        for entry in entries {
            guard case .text(let key) = entry.key else { continue }
            dictionary[key] = plainValue(entry.value)
        }
        return dictionary
    default: return Optional<Any>.none as Any
    }
}
