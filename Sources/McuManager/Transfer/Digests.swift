import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// CRC-32 (IEEE 802.3, reflected, init and final XOR 0xFFFFFFFF), as the file-system group's `crc32`.
struct CRC32: Sendable {
    private static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var c = UInt32(i)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }
    private var state: UInt32 = 0xFFFF_FFFF

    mutating func update(_ data: Data) {
        var c = state
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            for b in bytes { c = Self.table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        }
        state = c
    }

    var value: UInt32 { state ^ 0xFFFF_FFFF }

    /// The checksum as 4 big-endian bytes.
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
