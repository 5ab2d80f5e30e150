/// CRC-32 (IEEE 802.3, as zlib's `crc32`): reflected polynomial 0xEDB88320, initial value and final XOR
/// 0xFFFFFFFF.
///
/// The package's one CRC-32: the file-system group's `crc32` checksum (client and simulator) and the
/// entries of firmware zips. `CRC32.checksum(Array("123456789".utf8)) ==
/// 0xCBF43926`.
public struct CRC32: Sendable, Hashable {
    /// Register before the final XOR.
    private var state: UInt32

    /// The checksum of the bytes fed so far.
    public var value: UInt32 { state ^ 0xFFFF_FFFF }

    /// Starts a checksum, or continues one from an earlier `value` (like zlib's `crc32(crc, …)`).
    public init(value: UInt32 = 0) {
        self.state = value ^ 0xFFFF_FFFF
    }

    /// Feeds more bytes.
    public mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        let fed: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.update(buffer: buffer)
        }
        if fed == nil {
            for byte in bytes { state = crc32Table[Int(UInt8(truncatingIfNeeded: state) ^ byte)] ^ (state >> 8) }
        }
    }

    /// The checksum of `bytes`.
    public static func checksum<S: Sequence>(_ bytes: S) -> UInt32 where S.Element == UInt8 {
        var crc = CRC32()
        crc.update(bytes)
        return crc.value
    }

    private mutating func update(buffer: UnsafeBufferPointer<UInt8>) {
        var crc = state
        crc32Table.withUnsafeBufferPointer { table in
            for byte in buffer {
                crc = table[Int(UInt8(truncatingIfNeeded: crc) ^ byte)] ^ (crc >> 8)
            }
        }
        state = crc
    }
}

private let crc32Table: [UInt32] = (0..<256).map { index -> UInt32 in
    var crc = UInt32(index)
    for _ in 0..<8 {
        crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
    }
    return crc
}
