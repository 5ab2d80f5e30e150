import McuMgrCore
import Foundation
import McuManager
import Testing

@Suite struct McuMgrPackageTests {
    @Test func singleBinIsImageZero() throws {
        let (data, hash) = PackageFixtures.mcubootImage(body: PackageFixtures.body(1000), version: (1, 4, 2, 7))
        let package = try McuMgrPackage(data: data, fileName: "zephyr.signed.bin")
        #expect(package.format == .mcubootImage)
        #expect(package.name == "zephyr.signed.bin")
        #expect(package.manifest == nil)
        #expect(package.images.count == 1)
        let image = try #require(package.images.first)
        #expect(image.image == 0)
        #expect(image.slot == nil)
        #expect(image.contentType == .mcubootImage)
        #expect(image.hash == hash)
        #expect(image.hash != Data(SHA256.hash(data: data)))
        #expect(image.version == "1.4.2+7")
        #expect(image.data == data)
        #expect(image.fileName == "zephyr.signed.bin")
        #expect(package.totalSize == data.count)
        #expect(package.sizes == [data.count])
        #expect(!package.isDirectXIP)
        #expect(!package.isSUIT)
    }

    @Test func imageHashCoversAPaddedHeaderAndProtectedTLVs() throws {
        let (data, hash) = PackageFixtures.mcubootImage(
            body: PackageFixtures.body(777), headerSize: 0x200, protectedTLV: true)
        let package = try McuMgrPackage(data: data, fileName: "app.bin")
        #expect(package.images.first?.hash == hash)
    }

    @Test func twoCoreZipHasAppImageZeroAndNetImageOne() throws {
        let app = PackageFixtures.mcubootImage(body: PackageFixtures.body(3000, seed: 1), version: (1, 4, 2, 0))
        let net = PackageFixtures.mcubootImage(body: PackageFixtures.body(2000, seed: 2), version: (0, 9, 0, 1))
        let zip = try PackageFixtures.zip([
            ("manifest.json", Data(PackageFixtures.twoCoreManifest.utf8)),
            ("app.signed.bin", app.data),
            ("ipc_radio.signed.bin", net.data),
        ])
        let package = try McuMgrPackage(data: zip, fileName: "dfu_application.zip")
        #expect(package.format == .zip)
        #expect(package.name == "example app and network core update")
        #expect(package.manifest?.files.count == 2)
        #expect(package.images.map(\.image) == [0, 1])
        #expect(package.images.map(\.hash) == [app.hash, net.hash])
        #expect(package.images.map(\.data) == [app.data, net.data])
        #expect(package.images.map(\.version) == ["1.4.2", "0.9.0+1"])
        #expect(package.images.map(\.fileName) == ["app.signed.bin", "ipc_radio.signed.bin"])
        #expect(package.images.allSatisfy { $0.contentType == .mcubootImage && $0.slot == nil })
        #expect(package.imageNumbers == [0, 1])
        #expect(package.totalSize == app.data.count + net.data.count)
        #expect(package.imagesToUpload().map(\.image) == [0, 1])
        #expect(package.image(forActiveSlot: 0, image: 1)?.hash == net.hash)
    }

    @Test func directXIPPairPicksTheBuildForTheInactiveSlot() throws {
        let slot0 = PackageFixtures.mcubootImage(body: PackageFixtures.body(1500, seed: 3), version: (2, 0, 0, 0))
        let slot1 = PackageFixtures.mcubootImage(body: PackageFixtures.body(1500, seed: 4), version: (2, 0, 0, 0))
        let zip = try PackageFixtures.zip([
            ("manifest.json", Data(PackageFixtures.directXIPManifest.utf8)),
            ("zephyr.signed.bin", slot0.data),
            ("mcuboot_secondary_app.signed.bin", slot1.data),
        ])
        let package = try McuMgrPackage(data: zip, fileName: "dfu_application.zip")
        #expect(package.isDirectXIP)
        #expect(package.images.map(\.image) == [0, 0])
        #expect(package.images.map(\.slot) == [0, 1])
        #expect(package.manifest?.files.first?.mcubootVersion == "2.0.0+0")
        #expect(package.image(forActiveSlot: 0)?.hash == slot1.hash)
        #expect(package.image(forActiveSlot: 0)?.slot == 1)
        #expect(package.image(forActiveSlot: 1)?.hash == slot0.hash)
        #expect(package.imagesToUpload(activeSlots: [0: 1]).map(\.slot) == [0])
        #expect(package.imagesToUpload().map(\.slot) == [1])
        #expect(package.image(forActiveSlot: 0, image: 1) == nil)
    }

    @Test func suitZipHasTheEnvelopeFirstThenTheCaches() throws {
        let digest = PackageFixtures.body(32, seed: 9)
        let envelope = PackageFixtures.suitEnvelope(digest: digest, sequence: 12)
        let cache1 = Data(PackageFixtures.body(500, seed: 10))
        let cache3 = Data(PackageFixtures.body(300, seed: 11))
        let zip = try PackageFixtures.zip([
            ("dfu_cache_partition_1.bin", cache1),
            ("manifest.json", Data(PackageFixtures.suitManifest.utf8)),
            ("root.suit", envelope),
            ("dfu_cache_partition_3.bin", cache3),
        ])
        let package = try McuMgrPackage(data: zip, fileName: "dfu_application.zip")
        #expect(package.isSUIT)
        #expect(package.images.map(\.contentType) == [.suitEnvelope, .suitCache, .suitCache])
        #expect(package.images.map(\.image) == [0, 1, 3])
        #expect(package.images[0].hash == Data(digest))
        #expect(package.images[0].version == "12")
        #expect(package.images[0].data == envelope)
        #expect(package.images[1].data == cache1)
        #expect(package.images[1].hash == Data(SHA256.hash(data: cache1)))
        #expect(package.images[2].data == cache3)
        #expect(package.imagesToUpload().isEmpty)
    }

    @Test func suitFileExposesItsSHA256Digest() throws {
        let digest = PackageFixtures.body(32, seed: 5)
        let envelope = PackageFixtures.suitEnvelope(digest: digest, sequence: 3)
        let package = try McuMgrPackage(data: envelope, fileName: "root.suit")
        #expect(package.format == .suitEnvelope)
        #expect(package.images.count == 1)
        #expect(package.images[0].contentType == .suitEnvelope)
        #expect(package.images[0].image == 0)
        #expect(package.images[0].hash == Data(digest))
        #expect(package.images[0].hashHex == digest.map { String(format: "%02x", $0) }.joined())
        #expect(package.images[0].version == "3")
    }

    @Test func opensFilesByURL() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("McuMgrPackageTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = PackageFixtures.mcubootImage(body: PackageFixtures.body(600))
        let bin = directory.appendingPathComponent("zephyr.signed.BIN")
        try image.data.write(to: bin)
        #expect(try McuMgrPackage(url: bin).images.first?.hash == image.hash)

        let zipURL = directory.appendingPathComponent("dfu_application.zip")
        try PackageFixtures.zip([
            ("manifest.json", Data(PackageFixtures.singleManifest(file: "zephyr.signed.bin").utf8)),
            ("zephyr.signed.bin", image.data),
        ]).write(to: zipURL)
        let package = try McuMgrPackage(url: zipURL)
        #expect(package.name == "dfu_application.zip")
        #expect(package.images.map(\.hash) == [image.hash])
        // Nothing was extracted next to the zip.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
            == ["dfu_application.zip", "zephyr.signed.BIN"])
    }
}
