import Foundation
import Testing

@testable import McuMgrCore

/// MCUboot serial recovery as the mps2 build without its application answers (measured under QEMU):
/// echo, MCUmgr parameters and bootloader info get rc 8, the image list is `{"images": []}`, image
/// upload goes to slot 0, image test/confirm get rc 8; after a reset MCUboot boots the uploaded image.
@Suite struct SerialRecoveryFlowTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    /// start → parameters (rc 8) → bootloader info (rc 8): the machine asks for the image list.
    static func recoveryMachine(mode: FirmwareUpgradeMode = .confirmOnly) -> FW.Machine {
        var m = FW.Machine(images: [FW.image()], configuration: FirmwareUpgradeConfiguration(upgradeMode: mode))
        _ = m.start(now: FW.t(0))
        _ = m.parametersUnsupported()
        _ = m.bootloaderInfoUnsupported()
        return m
    }

    @Test func anEmptyImageListWithoutBootloaderInfoUploadsToSlotZeroResetsAndChecks() {
        var m = Self.recoveryMachine()
        #expect(d(m.imageListReceived([])) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(m.isSerialRecovery)
        // No test or confirm (MCUboot answers ENOTSUP): straight to the reset.
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        let done = m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        let summary = FW.summary(done)
        #expect(summary?.didReset == true)
        #expect(summary?.uploadedImages == [0])
        #expect(summary?.serialRecovery == true)
        #expect(summary?.notes.contains { $0.contains("serial recovery") && $0.contains("slot 0") } == true)
    }

    @Test func testModesSayTheImageIsPermanent() {
        var m = Self.recoveryMachine(mode: .testAndConfirm)
        _ = m.imageListReceived([])
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m)
        let done = m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        #expect(!done.contains(.confirmImage(hash: FW.new)))
        #expect(FW.summary(done)?.notes.contains { $0.contains("cannot test-boot") } == true)
    }

    @Test func uploadOnlyStaysInRecoveryAndSaysHowToBoot() {
        var m = Self.recoveryMachine(mode: .uploadOnly)
        _ = m.imageListReceived([])
        let done = m.uploadFinished(image: 0)
        #expect(!d(done).contains(.reset(.normal)))
        #expect(FW.summary(done)?.notes.contains { $0.contains("smp os reset") } == true)
    }

    @Test func stillInRecoveryAfterTheResetIsAskedAgainThenFails() {
        var m = Self.recoveryMachine()
        _ = m.imageListReceived([])
        _ = m.uploadFinished(image: 0)
        _ = FW.rebootAndReconnect(&m)
        // MCUboot answers again with an empty list: ask again later rather than declare success.
        let again = d(m.imageListReceived([]))
        #expect(again.count == 1)
        guard case .waitUntil = again.first else {
            Issue.record("expected a retry timer, got \(again)")
            return
        }
        #expect(FW.summary(again) == nil)
    }

    @Test func recoveryWithAnImageInSlotZeroListsItWithoutActive() {
        // MCUboot's list has bootable/confirmed/pending/permanent/slot/hash/version, never `active`.
        var m = Self.recoveryMachine()
        let listed = [FW.Slot(image: 0, slot: 0, hash: Data(FW.old), confirmed: true)]
        #expect(d(m.imageListReceived(listed)) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(m.isSerialRecovery)
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)])
    }

    @Test func theSameImageAlreadyInSlotZeroIsOnlyBooted() {
        var m = Self.recoveryMachine()
        let listed = [FW.Slot(image: 0, slot: 0, hash: Data(FW.new), confirmed: true)]
        #expect(d(m.imageListReceived(listed)) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m)
        let summary = FW.summary(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)]))
        #expect(summary?.skippedImages == [0])
        #expect(summary?.uploadedImages == [])
        #expect(summary?.didReset == true)
    }

    @Test func aRunningApplicationIsNotRecovery() {
        var m = Self.recoveryMachine()
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(!m.isSerialRecovery)
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
    }

    @Test func aGivenBootloaderModeIsNotOverridden() {
        var config = FirmwareUpgradeConfiguration(upgradeMode: .confirmOnly)
        config.bootloaderMode = .swapWithoutScratch
        var m = FW.Machine(images: [FW.image()], configuration: config)
        _ = m.start(now: FW.t(0))
        _ = m.parametersUnsupported()
        _ = m.imageListReceived([])
        #expect(!m.isSerialRecovery)
    }
}
