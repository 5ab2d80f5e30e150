// This file imports McuManager alone (no McuMgrCore): it compiles only while `import McuManager` brings
// every core type its public API uses (Sources/McuManager/Exports.swift).
import Foundation
import McuManager
import Testing

/// A custom group's request, as a user defines one with `import McuManager` alone.
private struct VendorPingRequest: McuMgrRequest {
    typealias Response = VendorPingResponse
    static let group = McuMgrGroup(rawValue: 64)
    static let command = McuMgrCommand(rawValue: 0)
    static let operation = SMPOperation.read
    var text: String
}

private struct VendorPingResponse: Decodable, Sendable {
    var text: String
}

@Suite struct PublicSurfaceTests {
    @Test func theUpgradeConfigurationAndItsTypesAreInScope() {
        let configuration = FirmwareUpgradeConfiguration(
            upgradeMode: .testAndConfirm, bootloaderMode: BootloaderMode.swapWithoutScratch, estimatedSwapTime: .seconds(8))
        #expect(configuration.upgradeMode == FirmwareUpgradeMode.testAndConfirm)
        #expect(configuration.bootloaderMode == .swapWithoutScratch)
        let states: [FirmwareUpgradeState] = [.none, .upload, .success]
        #expect(states.last?.isTerminal == true)
        let summary: KeyPath<FirmwareUpgradeResult, FirmwareUpgradeSummary> = \.summary
        #expect(summary == \FirmwareUpgradeResult.summary)
    }

    @Test func protocolNumbersErrorsAndPacketsAreInScope() {
        #expect(VendorPingRequest.group.rawValue == 64)
        #expect(McuMgrGroup.image != McuMgrGroup.os)
        #expect(SMPVersion.v2 != SMPVersion.v1)
        let error = McuMgrError(.device, "the device answered rc 8", returnCode: McuMgrReturnCode(rawValue: 8))
        #expect(error.returnCode?.rawValue == 8)
        let groupError: McuMgrGroupError? = error.groupError
        #expect(groupError == nil)
        let status: SMPResponseStatus? = nil
        #expect(status == nil)
        let item = CBOR.map([CBORMapEntry(key: "text", value: "hi")])
        #expect(item["text"]?.string == "hi")
        let header = SMPHeader(version: .v2, operation: .read, length: 0, group: .os, sequence: 1, command: McuMgrCommand(rawValue: 0))
        #expect(SMPPacket(header: header, payload: []).header.group == .os)
    }

    @Test func imageTypesAreInScope() {
        let image = McuMgrPackage.Image(
            image: 0, contentType: .mcubootImage, hash: Data([0xAB]), data: Data(count: 4), fileName: "app.bin")
        let same: FirmwareUpgradeImage = image
        #expect(same.size == 4 && same.hashHex == "ab")
        let slot = McuMgrImageStateResponse.ImageSlot(slot: 1, version: "1.2.3", hash: nil, pending: true)
        #expect(slot.absoluteSlot == 1 && slot.pending)
        let version = McuMgrImageVersion(major: 1, minor: 2, revision: 3, build: 4)
        #expect(version.description == "1.2.3+4" && version.imageListText == "1.2.3.4")
        #expect(BootloaderMode.swapWithoutScratch.detailedName == "swap using move")
        #expect(BootloaderMode.swapWithoutScratch.description == "swap without scratch (3)")
    }

    @Test func theLoggerTypeIsInScope() {
        let entry = FirmwareUpgradeLogEntry(level: .info, message: "uploading")
        #expect(entry.level >= Logger.Level.debug)
        let logger = Logger(label: "mcumgr.test")
        #expect(logger.label == "mcumgr.test")
    }

    @Test func linkTypesAreInScope() {
        let session = SMPSessionConfiguration(window: 1)
        #expect(session.window == 1)
        let limits: KeyPath<any McuMgrTransport, LinkLimits> = \.linkLimits
        _ = limits
        let drop: SMPFramingDrop? = nil
        #expect(drop == nil)
    }
}
