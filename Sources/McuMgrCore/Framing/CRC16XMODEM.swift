/// CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection, no final XOR.
///
/// The checksum of SMP over a serial console (Zephyr `crc16_itu_t(0x0000, …)`). A packet followed by
/// its big-endian CRC checksums to 0. `CRC16XMODEM.checksum(Array("123456789".utf8)) == 0x31C3`.
public struct CRC16XMODEM: Sendable, Hashable {
    /// The checksum of the bytes fed so far.
    public private(set) var value: UInt16

    /// Starts a checksum, or continues one from an earlier `value`.
    public init(value: UInt16 = 0) {
        self.value = value
    }

    /// Feeds more bytes.
    public mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        let fed: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            self.update(buffer: buffer)
        }
        if fed == nil {
            for byte in bytes {
                value = (value << 8) ^ crc16XMODEMTable[Int(UInt8(truncatingIfNeeded: value >> 8) ^ byte)]
            }
        }
    }

    /// The checksum of `bytes`.
    public static func checksum<S: Sequence>(_ bytes: S) -> UInt16 where S.Element == UInt8 {
        var crc = CRC16XMODEM()
        crc.update(bytes)
        return crc.value
    }

    private mutating func update(buffer: UnsafeBufferPointer<UInt8>) {
        var crc = value
        crc16XMODEMTable.withUnsafeBufferPointer { table in
            for byte in buffer {
                crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
            }
        }
        value = crc
    }
}

private let crc16XMODEMTable: [UInt16] = (0..<256).map { index -> UInt16 in
    var crc = UInt16(index) << 8
    for _ in 0..<8 {
        crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
    }
    return crc
}
