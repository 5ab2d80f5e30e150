import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CRC32 {
    /// The checksum as 4 big-endian bytes, as the file-system group's `crc32` hash answer compares.
    var bigEndianBytes: Data {
        let v = value
        return Data([UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)])
    }
}

/// Digests of local files, streamed in 64 KiB pieces.
enum LocalDigest {
    static let pieceSize = 64 * 1024

    /// SHA-256 of a whole upload source.
    static func sha256(of source: some UploadSource) throws -> Data {
        var hasher = SHA256()
        var offset = 0
        while offset < source.size {
            let length = min(pieceSize, source.size - offset)
            hasher.update(data: try source.read(offset: offset, length: length))
            offset += length
        }
        return Data(hasher.finalize())
    }

    /// The `type` digest ("sha256" or "crc32", as 4 big-endian bytes) of a whole source.
    static func digest(_ type: String, of source: some UploadSource) throws -> Data? {
        switch type {
        case "sha256":
            return try sha256(of: source)
        case "crc32":
            var crc = CRC32()
            var offset = 0
            while offset < source.size {
                let length = min(pieceSize, source.size - offset)
                crc.update(try source.read(offset: offset, length: length))
                offset += length
            }
            return crc.bigEndianBytes
        default:
            return nil
        }
    }
}

extension Data {
    /// Lower-case hex, for messages.
    var hexString: String { lowercaseHex }
}
