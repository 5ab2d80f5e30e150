#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// File-system group (8): PROTOCOL.md 3.6.

extension McuMgrCommand {
    /// File-system group commands.
    public enum FileSystem {
        /// Download (R) / upload (W).
        public static let file = McuMgrCommand(0)
        /// File status (size).
        public static let status = McuMgrCommand(1)
        /// Hash / checksum.
        public static let hash = McuMgrCommand(2)
        /// Supported hash types.
        public static let supportedHashTypes = McuMgrCommand(3)
        /// Close the open file.
        public static let close = McuMgrCommand(4)
    }
}

/// Reads one piece of a file; the device chooses the piece size.
public struct FileDownloadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.file }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "file download" }
    public typealias Response = FileDownloadResponse

    /// Absolute path on the device (`name`).
    public var name: String
    /// Offset to read from (`off`).
    public var offset: Int

    /// Creates the request.
    public init(name: String, offset: Int) {
        self.name = name
        self.offset = offset
    }

    enum CodingKeys: String, CodingKey { case name, offset = "off" }
}

/// One piece of a file.
public struct FileDownloadResponse: Decodable, Sendable, Hashable {
    /// Offset of `data` (`off`).
    public var offset: Int
    /// Bytes (`data`).
    public var data: Data
    /// File size (`len`), only on the piece at offset 0.
    public var length: Int?

    enum CodingKeys: String, CodingKey { case offset = "off", data, length = "len" }
}

/// Writes one piece of a file; offset 0 truncates and must carry `len`.
public struct FileUploadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.file }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "file upload" }
    public typealias Response = FileUploadResponse

    /// Absolute path on the device (`name`).
    public var name: String
    /// Offset of `data` (`off`).
    public var offset: Int
    /// Bytes (`data`).
    public var data: Data
    /// Total size (`len`); required at offset 0.
    public var length: Int?

    /// Creates the request.
    public init(name: String, offset: Int, data: Data, length: Int? = nil) {
        self.name = name
        self.offset = offset
        self.data = data
        self.length = length
    }

    enum CodingKeys: String, CodingKey { case name, offset = "off", data, length = "len" }
}

/// Bytes written so far.
public struct FileUploadResponse: Decodable, Sendable, Hashable {
    /// The device's offset (`off`).
    public var offset: Int?
    /// Current file size (`len`), sent with FS error 11 (offset not valid).
    public var length: Int?

    enum CodingKeys: String, CodingKey { case offset = "off", length = "len" }
}

/// Asks for a file's size.
public struct FileStatusRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.status }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "file status" }
    public typealias Response = FileStatusResponse

    /// Absolute path (`name`).
    public var name: String

    /// Creates the request.
    public init(name: String) { self.name = name }
}

/// A file's size (`len`).
public struct FileStatusResponse: Decodable, Sendable, Hashable {
    /// Size in bytes.
    public var length: Int
    enum CodingKeys: String, CodingKey { case length = "len" }
}

/// Asks the device to hash or checksum (part of) a file. Keys are `off`/`len` (Zephyr), not ios-dm's.
public struct FileHashRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.hash }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "file hash" }
    public typealias Response = FileHashResponse

    /// Absolute path (`name`).
    public var name: String
    /// `"sha256"` or `"crc32"` (`type`); nil for the device's default.
    public var type: String?
    /// Start offset (`off`).
    public var offset: Int?
    /// Bytes to hash (`len`).
    public var length: Int?

    /// Creates the request.
    public init(name: String, type: String? = nil, offset: Int? = nil, length: Int? = nil) {
        self.name = name
        self.type = type
        self.offset = offset
        self.length = length
    }

    /// The device hashes the whole range for every copy: `McuMgrTimeouts.hashResendFloor(bytes:)` of
    /// `length` (10 s without one).
    public var resendFloor: Duration? { McuMgrTimeouts.hashResendFloor(bytes: length) }

    enum CodingKeys: String, CodingKey { case name, type, offset = "off", length = "len" }
}

/// A file's hash or checksum.
public struct FileHashResponse: Decodable, Sendable, Hashable {
    /// The algorithm used (`type`).
    public var type: String?
    /// Start offset (`off`, only when not 0).
    public var offset: Int?
    /// Bytes hashed (`len`).
    public var length: Int?
    /// The result (`output`): a number for crc32, bytes for sha256.
    public var output: CBOR?

    /// The result as bytes: the byte string, or a numeric checksum as 4 big-endian bytes.
    public var outputBytes: Data? {
        if let bytes = output?.byteString { return Data(bytes) }
        if let value = output?.uint64, value <= UInt64(UInt32.max) {
            let v = UInt32(value)
            return Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)])
        }
        return nil
    }

    /// The result as a number (crc32).
    public var outputNumber: UInt64? { output?.uint64 }

    enum CodingKeys: String, CodingKey { case type, offset = "off", length = "len", output }
}

/// Asks which hash types the device offers.
public struct FileSupportedHashTypesRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.supportedHashTypes }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "file hash types" }
    public typealias Response = FileSupportedHashTypesResponse
    /// Creates the request.
    public init() {}
}

/// Hash types by name (`types`).
public struct FileSupportedHashTypesResponse: Decodable, Sendable, Hashable {
    /// One hash type.
    public struct HashType: Decodable, Sendable, Hashable {
        /// 0 = number, 1 = bytes (`format`).
        public var format: Int?
        /// Result size in bytes (`size`).
        public var size: Int?
    }

    /// Types by name (e.g. "sha256", "crc32"); empty when missing.
    public var types: [String: HashType]

    enum CodingKeys: String, CodingKey { case types }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        types = try c.decodeIfPresent([String: HashType].self, forKey: .types) ?? [:]
    }
}

/// Closes the file the device holds open for a transfer.
public struct FileCloseRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .fileSystem }
    public static var command: McuMgrCommand { McuMgrCommand.FileSystem.close }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "file close" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}
