#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The `manifest.json` of an nRF Connect SDK `dfu_application.zip` (PROTOCOL.md 7.1).
///
/// Decoding is tolerant, as Nordic's iOS library is: numbers may come as strings and strings as numbers,
/// the image index may be named `image_index`, `image` or `partition`, and an unquoted hexadecimal
/// `load_address` (not valid JSON) is accepted.
public struct McuMgrManifest: Decodable, Sendable, Hashable {
    /// `format-version` (0 or 1).
    public var formatVersion: Int?
    /// `time`: UNIX time of packaging.
    public var time: Int?
    /// `name`: a human label.
    public var name: String?
    /// `files`: one entry per file in the zip.
    public var files: [File]

    /// The kind of a manifest file (`type`); an open set, unknown values are kept.
    public struct FileType: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// An MCUboot image (`application`).
        public static let application = FileType(rawValue: "application")
        /// A SUIT envelope (`suit-envelope`).
        public static let suitEnvelope = FileType(rawValue: "suit-envelope")
        /// A SUIT cache partition image (`cache`).
        public static let cache = FileType(rawValue: "cache")
        public var description: String { rawValue }
    }

    /// One entry of `files`.
    public struct File: Decodable, Sendable, Hashable {
        /// `file`: the name inside the zip.
        public var file: String
        /// `size` in bytes.
        public var size: Int?
        /// `type`; `application` when absent.
        public var type: FileType
        /// `board`.
        public var board: String?
        /// `soc`.
        public var soc: String?
        /// `load_address`.
        public var loadAddress: Int?
        /// MCUboot image number (`image_index`, `image` or `partition`); 0 when absent.
        public var image: Int
        /// `slot`: the Direct-XIP slot this build is linked for; nil outside Direct-XIP packages.
        public var slot: Int?
        /// `slot_index_primary`: 1-based MCUboot partition number.
        public var slotIndexPrimary: Int?
        /// `slot_index_secondary`: 1-based MCUboot partition number.
        public var slotIndexSecondary: Int?
        /// `version_MCUBOOT`.
        public var versionMCUboot: String?
        /// `version_MCUBOOT+XIP` (Direct-XIP packages).
        public var versionMCUbootXIP: String?
        /// `version`: e.g. the network core firmware version.
        public var version: String?
        /// `modtime`.
        public var modificationTime: Int?

        enum CodingKeys: String, CodingKey {
            case file, size, type, board, soc, slot, version, image, partition, modtime
            case loadAddress = "load_address"
            case imageIndex = "image_index"
            case slotIndexPrimary = "slot_index_primary"
            case slotIndexSecondary = "slot_index_secondary"
            case versionMCUboot = "version_MCUBOOT"
            case versionMCUbootXIP = "version_MCUBOOT+XIP"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            self.file = try c.decode(String.self, forKey: .file)
            self.size = try c.flexibleInt(.size)
            self.type = FileType(rawValue: try c.flexibleString(.type) ?? FileType.application.rawValue)
            self.board = try c.flexibleString(.board)
            self.soc = try c.flexibleString(.soc)
            self.loadAddress = try c.flexibleInt(.loadAddress)
            self.image = try c.flexibleInt(.imageIndex) ?? c.flexibleInt(.image) ?? c.flexibleInt(.partition) ?? 0
            self.slot = try c.flexibleInt(.slot)
            self.slotIndexPrimary = try c.flexibleInt(.slotIndexPrimary)
            self.slotIndexSecondary = try c.flexibleInt(.slotIndexSecondary)
            self.versionMCUboot = try c.flexibleString(.versionMCUboot)
            self.versionMCUbootXIP = try c.flexibleString(.versionMCUbootXIP)
            self.version = try c.flexibleString(.version)
            self.modificationTime = try c.flexibleInt(.modtime)
        }

        /// The MCUboot version the manifest gives (`version_MCUBOOT+XIP`, else `version_MCUBOOT`).
        public var mcubootVersion: String? { versionMCUbootXIP ?? versionMCUboot }
    }

    enum CodingKeys: String, CodingKey {
        case time, name, files
        case formatVersion = "format-version"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.formatVersion = try c.flexibleInt(.formatVersion)
        self.time = try c.flexibleInt(.time)
        self.name = try c.flexibleString(.name)
        self.files = try c.decode([File].self, forKey: .files)
    }

    /// Decodes `manifest.json` bytes; unquoted hexadecimal `load_address` values are quoted first.
    ///
    /// - Throws: `McuMgrError(.file)` saying what is wrong.
    public init(json: Data) throws {
        guard let text = String(data: json, encoding: .utf8) else {
            throw McuMgrError(.file, "manifest.json is not UTF-8 text; rebuild the package with nRF Connect SDK")
        }
        let fixed = Self.quotingHexLoadAddresses(text)
        do {
            self = try JSONDecoder().decode(McuMgrManifest.self, from: Data(fixed.utf8))
        } catch let error as DecodingError {
            throw McuMgrError(
                .file, "manifest.json is invalid: \(Self.describe(error)); rebuild the package with nRF Connect SDK")
        } catch {
            throw McuMgrError(.file, "manifest.json is invalid: \(error); rebuild the package with nRF Connect SDK", cause: error)
        }
    }

    /// Turns `"load_address": 0x1000` (not JSON) into `"load_address": "0x1000"`.
    static func quotingHexLoadAddresses(_ text: String) -> String {
        let key = #""load_address""#
        var result = ""
        var rest = Substring(text)
        while let found = rest.firstRange(of: key) {
            // `"load_address"`, blanks, `:`, blanks, then `0x` and hex digits.
            var i = found.upperBound
            while i < rest.endIndex, rest[i].isWhitespace { i = rest.index(after: i) }
            guard i < rest.endIndex, rest[i] == ":" else {
                result += rest[..<found.upperBound]
                rest = rest[found.upperBound...]
                continue
            }
            i = rest.index(after: i)
            while i < rest.endIndex, rest[i].isWhitespace { i = rest.index(after: i) }
            let number = i
            var end = i
            if rest[i...].hasPrefix("0x") || rest[i...].hasPrefix("0X") {
                end = rest.index(i, offsetBy: 2)
                while end < rest.endIndex, rest[end].isHexDigit, rest[end].isASCII { end = rest.index(after: end) }
            }
            guard end > rest.index(number, offsetBy: 2, limitedBy: rest.endIndex) ?? rest.endIndex else {
                result += rest[..<found.upperBound]
                rest = rest[found.upperBound...]
                continue
            }
            result += rest[..<number] + "\"" + rest[number..<end] + "\""
            rest = rest[end...]
        }
        return result + rest
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .dataCorrupted(let context):
            let underlying = context.underlyingError.map { " (\($0))" } ?? ""
            return context.codingPath.isEmpty
                ? "not valid JSON\(underlying)" : "bad value at \(path(context.codingPath)): \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\" at \(context.codingPath.isEmpty ? "top level" : path(context.codingPath))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "bad value at \(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

extension KeyedDecodingContainer {
    /// An integer given as a number, a decimal string or a `0x` hexadecimal string; nil when absent or null.
    fileprivate func flexibleInt(_ key: Key) throws -> Int? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(Int.self, forKey: key) { return value }
        if let value = try? decode(Double.self, forKey: key), let exact = Int(exactly: value.rounded(.down)) {
            return exact
        }
        if let text = try? decode(String.self, forKey: key) {
            let trimmed = trimmingBlanks(text)
            if trimmed.hasPrefix("0x") || trimmed.hasPrefix("0X"), let value = Int(trimmed.dropFirst(2), radix: 16) {
                return value
            }
            if let value = Int(trimmed) { return value }
        }
        throw DecodingError.typeMismatch(
            Int.self,
            .init(codingPath: codingPath + [key], debugDescription: "expected an integer or a string holding one"))
    }

    /// A string given as a string or a number; nil when absent or null.
    fileprivate func flexibleString(_ key: Key) throws -> String? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        if let value = try? decode(String.self, forKey: key) { return value }
        if let value = try? decode(Int.self, forKey: key) { return String(value) }
        if let value = try? decode(Double.self, forKey: key) { return String(value) }
        throw DecodingError.typeMismatch(
            String.self, .init(codingPath: codingPath + [key], debugDescription: "expected a string"))
    }
}

/// `text` without leading and trailing blanks: tabs and Unicode space separators (what
/// `CharacterSet.whitespaces` holds), not line breaks.
private func trimmingBlanks(_ text: String) -> Substring {
    func isBlank(_ c: Character) -> Bool {
        c.unicodeScalars.allSatisfy { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
    }
    var trimmed = Substring(text)
    while let first = trimmed.first, isBlank(first) { trimmed = trimmed.dropFirst() }
    while let last = trimmed.last, isBlank(last) { trimmed = trimmed.dropLast() }
    return trimmed
}
