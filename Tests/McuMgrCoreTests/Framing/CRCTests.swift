import McuMgrCore
import Testing
import TestSupport

@Suite("CRC checksums")
struct CRCTests {
    let check = Array("123456789".utf8)

    @Test func crc16XMODEMCheckValue() {
        #expect(CRC16XMODEM.checksum(check) == 0x31C3)
        #expect(CRC16XMODEM.checksum([UInt8]()) == 0)
    }

    @Test func crc16XMODEMOfPacketAndItsCRCIsZero() {
        var random = SplitMix64(seed: 16)
        for count in [0, 1, 2, 3, 17, 255, 1000] {
            let data = random.bytes(count)
            let crc = CRC16XMODEM.checksum(data)
            #expect(CRC16XMODEM.checksum(data + [UInt8(crc >> 8), UInt8(crc & 0xFF)]) == 0)
        }
    }

    @Test func crc16XMODEMIncrementalMatchesWhole() {
        var random = SplitMix64(seed: 17)
        let data = random.bytes(3000)
        var crc = CRC16XMODEM()
        crc.update(data[..<1234])
        crc.update(data[1234...].lazy.map { $0 })  // a non-contiguous sequence takes the slow path
        #expect(crc.value == CRC16XMODEM.checksum(data))
        #expect(CRC16XMODEM.checksum(data) == bitwiseCRC16XMODEM(data))
    }

    @Test func crc32CheckValue() {
        #expect(CRC32.checksum(check) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    @Test func crc32ContinuesFromAValueLikeZlib() {
        var random = SplitMix64(seed: 32)
        let data = random.bytes(5000)
        var crc = CRC32(value: CRC32.checksum(data[..<777]))
        crc.update(data[777...].lazy.map { $0 })
        #expect(crc.value == CRC32.checksum(data))
    }

    /// The definition, bit by bit, to check the table.
    func bitwiseCRC16XMODEM(_ data: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        for byte in data {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }
}
