import Foundation
import McuManager
import McuMgrCore
import Testing
import ZIPFoundation
import TestSupport

/// Builders for package tests: unsigned MCUboot images, zips in memory, SUIT envelopes.
enum PackageFixtures {
    /// An unsigned MCUboot image made by the library's builder, optionally with a protected
    /// security-counter TLV. Returns the file and its image hash.
    static func mcubootImage(
        body: [UInt8],
        version: (UInt8, UInt8, UInt16, UInt32) = (1, 2, 3, 4),
        headerSize: Int = 32,
        protectedTLV: Bool = false
    ) -> (data: Data, hash: Data) {
        let builder = McuMgrImageBuilder(
            version: McuMgrImageVersion(major: version.0, minor: version.1, revision: version.2, build: version.3),
            headerSize: headerSize, headerPadding: 0,
            protectedTLVs: protectedTLV ? [.securityCounter(42)] : [])
        let image = try! builder.image(body: Data(body))
        return (image.data, image.hash)
    }

    /// Deterministic bytes.
    static func body(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
    }

    /// A zip built in memory with ZIPFoundation; odd entries are deflated, even ones stored.
    static func zip(_ entries: [(String, Data)]) throws -> Data {
        let archive = try Archive(data: Data(), accessMode: .create)
        for (index, (path, data)) in entries.enumerated() {
            try archive.addEntry(
                with: path, type: .file, uncompressedSize: Int64(data.count),
                compressionMethod: index % 2 == 1 ? .deflate : .none
            ) { position, size in
                data.subdata(in: Int(position)..<(Int(position) + size))
            }
        }
        return try #require(archive.data)
    }

    /// Sets the uncompressed size every header of the zip declares to `size` (a lie).
    static func declaringUncompressedSize(_ size: UInt32, in zip: Data) -> Data {
        var bytes = [UInt8](zip)
        func put(_ at: Int) {
            for i in 0..<4 { bytes[at + i] = UInt8((size >> (8 * UInt32(i))) & 0xFF) }
        }
        var i = 0
        while i + 4 <= bytes.count {
            if bytes[i] == 0x50, bytes[i + 1] == 0x4B, bytes[i + 2] == 0x03, bytes[i + 3] == 0x04 { put(i + 22) }
            if bytes[i] == 0x50, bytes[i + 1] == 0x4B, bytes[i + 2] == 0x01, bytes[i + 3] == 0x02 { put(i + 24) }
            i += 1
        }
        return Data(bytes)
    }

    /// A minimal SUIT envelope: tag 107 map {2: bstr([bstr([alg, digest])]), 3: bstr(manifest)}.
    static func suitEnvelope(digest: [UInt8], algorithm: Int = -16, sequence: UInt64 = 7) -> Data {
        let digestItem = CBOR.array([.int(algorithm), .bytes(digest)]).encoded
        let wrapper = CBOR.array([.bytes(digestItem)]).encoded
        let manifest = CBOR.map([
            CBORMapEntry(key: 1, value: 1),
            CBORMapEntry(key: 2, value: .unsigned(sequence)),
            CBORMapEntry(key: 3, value: .map([CBORMapEntry(key: 2, value: .array([.array([.bytes([0])])]))])),
        ]).encoded
        let envelope = CBOR.tagged(
            107,
            .map([
                CBORMapEntry(key: 2, value: .bytes(wrapper)),
                CBORMapEntry(key: 3, value: .bytes(manifest)),
            ]))
        return Data(envelope.encoded)
    }

    /// The shape of nRF Connect SDK's two-core `manifest.json` (copied from the shared data folder).
    static let twoCoreManifest = """
        {
            "format-version": 0,
            "time": 1786861789,
            "name": "example app and network core update",
            "files": [
                {
                    "type": "application",
                    "board": "nrf5340dk/nrf5340/cpuapp",
                    "soc": "nrf5340",
                    "load_address": 66048,
                    "image_index": "0",
                    "slot_index_primary": "1",
                    "slot_index_secondary": "2",
                    "version_MCUBOOT": "1.4.2+0",
                    "size": 249148,
                    "file": "app.signed.bin",
                    "modtime": 1786861789
                },
                {
                    "type": "application",
                    "board": "nrf5340dk/nrf5340/cpunet",
                    "soc": "nrf5340",
                    "load_address": 16812032,
                    "image_index": "1",
                    "slot_index_primary": "3",
                    "slot_index_secondary": "4",
                    "version_MCUBOOT": null,
                    "size": 175092,
                    "file": "ipc_radio.signed.bin",
                    "modtime": 1786861789
                }
            ]
        }
        """

    /// A one-file manifest naming `file`.
    static func singleManifest(file: String, type: String = "application") -> String {
        """
        {"format-version": 0, "time": 1786861789, "files": [
          {"type": "\(type)", "board": "nrf52840dk/nrf52840", "soc": "nrf52840", "load_address": 49152,
           "image_index": "0", "slot_index_primary": "1", "slot_index_secondary": "2",
           "version_MCUBOOT": "1.2.3+4", "size": 1000, "file": "\(file)", "modtime": 1786861789}
        ]}
        """
    }

    /// A Direct-XIP manifest: two builds of image 0, for slot 0 and slot 1.
    static let directXIPManifest = """
        {"format-version": 0, "time": 1786861789, "name": "direct-xip", "files": [
          {"type": "application", "board": "nrf52840dk/nrf52840", "soc": "nrf52840", "load_address": 49152,
           "image_index": "0", "slot_index_primary": "1", "slot_index_secondary": "2", "slot": "0",
           "version_MCUBOOT+XIP": "2.0.0+0", "size": 1000, "file": "zephyr.signed.bin", "modtime": 1786861789},
          {"type": "application", "board": "nrf52840dk/nrf52840", "soc": "nrf52840", "load_address": 542720,
           "image_index": "0", "slot_index_primary": "1", "slot_index_secondary": "2", "slot": "1",
           "version_MCUBOOT+XIP": "2.0.0+0", "size": 1000, "file": "mcuboot_secondary_app.signed.bin",
           "modtime": 1786861789}
        ]}
        """

    /// A SUIT manifest: one envelope and two cache partitions.
    static let suitManifest = """
        {"format-version": 1, "time": 1786861789, "name": "suit", "files": [
          {"type": "suit-envelope", "board": "nrf54h20dk/nrf54h20/cpuapp", "soc": "nrf54h20", "file": "root.suit",
           "size": 100, "modtime": 1786861789},
          {"type": "cache", "image_index": "1", "file": "dfu_cache_partition_1.bin", "size": 100},
          {"type": "cache", "image_index": "3", "file": "dfu_cache_partition_3.bin", "size": 100}
        ]}
        """
}
