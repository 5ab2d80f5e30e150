import Foundation
import McuManager
import Testing

@Suite struct McuMgrPackageManifestTests {
    static func decode(_ json: String) throws -> McuMgrManifest { try McuMgrManifest(json: Data(json.utf8)) }

    @Test func decodesTheTwoCoreManifest() throws {
        let manifest = try Self.decode(PackageFixtures.twoCoreManifest)
        #expect(manifest.formatVersion == 0)
        #expect(manifest.time == 1_786_861_789)
        #expect(manifest.name == "example app and network core update")
        #expect(manifest.files.count == 2)
        let app = manifest.files[0]
        let net = manifest.files[1]
        #expect(app.file == "app.signed.bin")
        #expect(app.type == .application)
        #expect(app.image == 0)
        #expect(app.slot == nil)
        #expect(app.slotIndexPrimary == 1)
        #expect(app.slotIndexSecondary == 2)
        #expect(app.loadAddress == 66048)
        #expect(app.size == 249_148)
        #expect(app.board == "nrf5340dk/nrf5340/cpuapp")
        #expect(app.soc == "nrf5340")
        #expect(app.versionMCUboot == "1.4.2+0")
        #expect(app.mcubootVersion == "1.4.2+0")
        #expect(app.modificationTime == 1_786_861_789)
        #expect(net.image == 1)
        #expect(net.slotIndexPrimary == 3)
        #expect(net.versionMCUboot == nil)
        #expect(net.loadAddress == 16_812_032)
    }

    @Test func acceptsEveryImageKeyAndNumbersAsStringsOrIntegers() throws {
        let manifest = try Self.decode(
            """
            {"format-version": "1", "time": 5, "files": [
              {"file": "a.bin", "image": 1, "slot": 1, "load_address": "0x10200", "size": "12"},
              {"file": "b.bin", "partition": "2", "slot": "0", "load_address": "4096"},
              {"file": "c.bin", "type": "wifi-patch", "version": "1.2.3", "version_MCUBOOT+XIP": "3.0.0+1"},
              {"file": "d.bin", "image_index": 3, "version_MCUBOOT": 7}
            ]}
            """)
        #expect(manifest.formatVersion == 1)
        #expect(manifest.files.map(\.image) == [1, 2, 0, 3])
        #expect(manifest.files.map(\.slot) == [1, 0, nil, nil])
        #expect(manifest.files[0].loadAddress == 0x10200)
        #expect(manifest.files[0].size == 12)
        #expect(manifest.files[1].loadAddress == 4096)
        #expect(manifest.files[0].type == .application)
        #expect(manifest.files[2].type == McuMgrManifest.FileType(rawValue: "wifi-patch"))
        #expect(manifest.files[2].version == "1.2.3")
        #expect(manifest.files[2].mcubootVersion == "3.0.0+1")
        #expect(manifest.files[3].versionMCUboot == "7")
    }

    @Test func acceptsAnUnquotedHexLoadAddress() throws {
        let manifest = try Self.decode(
            """
            {"format-version": 0, "time": 1, "files": [
              {"file": "app.bin", "load_address":0x10200, "image_index": "0"},
              {"file": "net.bin", "load_address" : 0X1008000 , "image_index": "1"}
            ]}
            """)
        #expect(manifest.files.map(\.loadAddress) == [0x10200, 0x100_8000])
    }

    @Test func suitTypesAreRecognised() throws {
        let manifest = try Self.decode(PackageFixtures.suitManifest)
        #expect(manifest.files.map(\.type) == [.suitEnvelope, .cache, .cache])
        #expect(manifest.files.map(\.image) == [0, 1, 3])
    }

    @Test func invalidJSONIsAFileError() throws {
        let error = #expect(throws: McuMgrError.self) { try Self.decode("{\"files\": [") }
        #expect(error?.kind == .file)
        #expect(error?.message.contains("manifest.json is invalid") == true)
    }

    @Test func missingFilesOrFileNameIsAFileErrorThatSaysWhat() throws {
        let noFiles = #expect(throws: McuMgrError.self) { try Self.decode("{\"format-version\": 0}") }
        #expect(noFiles?.message.contains("\"files\"") == true)
        let noName = #expect(throws: McuMgrError.self) { try Self.decode("{\"files\": [{\"size\": 3}]}") }
        #expect(noName?.message.contains("\"file\"") == true)
        let badIndex = #expect(throws: McuMgrError.self) {
            try Self.decode("{\"files\": [{\"file\": \"a.bin\", \"image_index\": \"one\"}]}")
        }
        #expect(badIndex?.kind == .file)
    }
}
