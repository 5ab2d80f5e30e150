import Foundation
import Testing

@testable import McuMgrCore

/// MCUboot's single-application mode: the Zephyr application has no image group (MCUMGR_GRP_IMG depends
/// on !MCUBOOT_BOOTLOADER_MODE_SINGLE_APP), so its image list answers rc 8. The upgrade resets into serial
/// recovery (boot_mode 1), uploads to slot 0, reads recovery's list to check the hash, resets, and takes
/// the application's rc 8 to the image list as the sign that the application (not recovery) answers.
@Suite struct SingleApplicationFlowTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    /// Recovery's list: slots without `active`.
    static func recovery(_ hash: [UInt8]) -> [FW.Slot] { [FW.Slot(slot: 0, hash: Data(hash), confirmed: true)] }

    /// start → parameters → bootloader info (MCUboot, mode 0) → image list rc 8 → reset into recovery →
    /// reconnect; returns the machine, which has just asked recovery for its image list.
    static func inRecovery(mode: FirmwareUpgradeMode = .confirmOnly) -> FW.Machine {
        var m = FW.machine(mode: mode, bootloader: .singleApplication)
        _ = m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(1))
        _ = FW.rebootAndReconnect(&m, at: 2)
        return m
    }

    @Test func modeZeroAndNoImageGroupGoesThroughSerialRecovery() {
        var m = FW.machine(bootloader: .singleApplication)
        #expect(d(m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(1))) == [.reset(.bootloader)])
        #expect(m.currentState == .reset)
        #expect(d(m.resetSent(now: FW.t(2))) == [.waitUntil(FW.t(3))], "no swap wait: nothing swaps")
        #expect(d(m.timerFired(now: FW.t(3))) == [.reconnect, .waitUntil(FW.t(63))])
        #expect(d(m.reconnected()) == [.requestImageList], "serial recovery's list")
        #expect(m.isSerialRecovery)
        // One buffer in recovery, its size asked by the driver: one chunk at a time.
        #expect(d(m.imageListReceived(Self.recovery(FW.old))) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(d(m.uploadFinished(image: 0)) == [.requestImageList], "slot 0 is checked before the reset")
        #expect(m.currentState == .upload)
        #expect(d(m.imageListReceived(Self.recovery(FW.new))) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m, at: 20)) == [.requestImageList])
        // The application answers rc 8: it runs (recovery would list its slots).
        let done = m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(22))
        let summary = FW.summary(done)
        #expect(summary?.uploadedImages == [0])
        #expect(summary?.didReset == true)
        #expect(summary?.serialRecovery == true)
        #expect(summary?.bootloaderMode == .singleApplication)
        let verified = summary?.verified ?? ""
        #expect(verified.contains("slot 0 with the uploaded hash") && verified.contains(String(repeating: "01", count: 32)), "\(verified)")
        #expect(verified.contains("answers the image list with rc 8"), "\(verified)")
        #expect(summary?.notes.contains { $0.contains("no image group") } == true)
        // No test or confirm anywhere.
        #expect(m.currentState == .success)
    }

    @Test func everyStateInOrder() {
        var m = FW.machine(bootloader: .singleApplication)
        var all = m.imageListUnsupported("rc 8", now: FW.t(1))
        all += m.resetSent(now: FW.t(2)) + m.timerFired(now: FW.t(3)) + m.reconnected()
        all += m.imageListReceived(Self.recovery(FW.old))
        all += m.uploadFinished(image: 0)
        all += m.imageListReceived(Self.recovery(FW.new))
        all += m.resetSent(now: FW.t(20)) + m.timerFired(now: FW.t(21)) + m.reconnected()
        all += m.imageListUnsupported("rc 8", now: FW.t(22))
        #expect(FW.states(all) == [.reset, .reconnect, .validate, .upload, .reset, .reconnect, .success])
    }

    @Test func aGivenSingleAppModeSkipsBootloaderInfoAndGoesThroughRecovery() {
        var config = FirmwareUpgradeConfiguration(upgradeMode: .confirmOnly)
        config.bootloaderMode = .singleApplication
        var m = FW.Machine(images: [FW.image()], configuration: config)
        _ = m.start(now: FW.t(0))
        // No bootloader info; the image list tells the application (rc 8) from serial recovery (a list).
        #expect(d(m.parametersReceived(bufferSize: 384, bufferCount: 4)) == [.requestImageList])
        #expect(d(m.imageListUnsupported("rc 8", now: FW.t(1))) == [.reset(.bootloader)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        #expect(d(m.imageListReceived(Self.recovery(FW.old))) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
    }

    @Test func aGivenSingleAppModeOnADeviceAlreadyInRecoveryUploadsWithoutAReset() {
        // MCUboot ignores boot_mode: a reset from recovery would boot the application (measured on the mps2 build).
        var config = FirmwareUpgradeConfiguration(upgradeMode: .confirmOnly)
        config.bootloaderMode = .singleApplication
        var m = FW.Machine(images: [FW.image()], configuration: config)
        _ = m.start(now: FW.t(0))
        _ = m.parametersReceived(bufferSize: 1024, bufferCount: 1)
        #expect(d(m.imageListReceived(Self.recovery(FW.old))) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(m.isSerialRecovery)
        #expect(d(m.uploadFinished(image: 0)) == [.requestImageList])
        #expect(d(m.imageListReceived(Self.recovery(FW.new))) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m, at: 20)
        let summary = FW.summary(m.imageListUnsupported("rc 8", now: FW.t(22)))
        #expect(summary?.notes.contains { $0.contains("already answers from MCUboot's serial recovery") } == true)
        #expect(summary?.didReset == true)
    }

    @Test func aGivenPipelineDepthIsCappedToRecoverysOneBuffer() {
        var m = FW.machine(bootloader: .singleApplication) { $0.pipelineDepth = 4 }
        _ = m.imageListUnsupported("rc 8", now: FW.t(1))
        _ = FW.rebootAndReconnect(&m, at: 2)
        #expect(d(m.imageListReceived(Self.recovery(FW.old))) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
    }

    @Test func recoveryListingAnotherHashAfterTheUploadFails() {
        var m = Self.inRecovery()
        _ = m.imageListReceived(Self.recovery(FW.old))
        _ = m.uploadFinished(image: 0)
        let failed = m.imageListReceived(Self.recovery(FW.other))
        #expect(!d(failed).contains(.reset(.normal)))
        let message = FW.failure(failed)?.message ?? ""
        #expect(message.contains("another hash (" + String(repeating: "ee", count: 32) + ")") && message.contains("did not check out"), "\(message)")
    }

    @Test func recoveryListingNothingRightAfterTheUploadResetsAndSaysTheHashWasNotReadBack() {
        // Measured on the real MCUboot (mps2 under QEMU): `{"images": []}` right after a recovery upload;
        // after a reset the application runs the uploaded hash.
        var m = Self.inRecovery()
        _ = m.imageListReceived([])
        _ = m.uploadFinished(image: 0)
        #expect(d(m.imageListReceived([])) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m, at: 20)
        let summary = FW.summary(m.imageListUnsupported("rc 8", now: FW.t(22)))
        let verified = summary?.verified ?? ""
        #expect(verified.contains("not read back") && verified.contains("application answers"), "\(verified)")
        #expect(!verified.contains("listed slot 0 with the uploaded hash"), "\(verified)")
        #expect(summary?.notes.contains { $0.contains("not read back") } == true)
    }

    @Test func stillInRecoveryAfterTheResetIsAskedAgainThenFails() {
        var m = Self.inRecovery()
        _ = m.imageListReceived(Self.recovery(FW.old))
        _ = m.uploadFinished(image: 0)
        _ = m.imageListReceived(Self.recovery(FW.new))
        _ = FW.rebootAndReconnect(&m, at: 20)
        // Recovery answers the list again (MCUboot did not boot slot 0): no success from a list without `active`.
        #expect(d(m.imageListReceived(Self.recovery(FW.new))) == [.waitUntil(FW.t(22))])
        #expect(d(m.timerFired(now: FW.t(22))) == [.requestImageList, .waitUntil(FW.t(81))])
        _ = m.imageListReceived(Self.recovery(FW.new))
        // At the deadline: the failure says recovery answered, not that the device is gone.
        let message = FW.failure(m.timerFired(now: FW.t(81)))?.message ?? ""
        #expect(m.currentState == .failed)
        #expect(message.contains("still in MCUboot's serial recovery"), "\(message)")
    }

    @Test func anApplicationThatIgnoresBootModeOneFailsClearly() {
        var m = FW.machine(bootloader: .singleApplication)
        _ = m.imageListUnsupported("rc 8", now: FW.t(1))
        _ = FW.rebootAndReconnect(&m, at: 2)
        // The application came back instead of recovery: still no image list.
        let failed = m.imageListUnsupported("rc 8", now: FW.t(4))
        let message = FW.failure(failed)?.message ?? ""
        #expect(message.contains("did not enter MCUboot's serial recovery") && message.contains("RESET_BOOT_MODE"), "\(message)")
        #expect(!d(failed).contains(.reset(.bootloader)), "no second reset")
    }

    @Test func anApplicationWithAnImageGroupAnsweringAfterTheBootModeResetIsNotRecovery() {
        var m = FW.machine(bootloader: .singleApplication)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        _ = FW.rebootAndReconnect(&m, at: 2)
        // The application came back (its list flags the running slot): no upload through its image group.
        let failed = m.imageListReceived(FW.runningOld())
        #expect(!d(failed).contains { if case .upload = $0 { true } else { false } })
        let message = FW.failure(failed)?.message ?? ""
        #expect(message.contains("the application answered again") && message.contains("not MCUboot's serial recovery"), "\(message)")
    }

    @Test func noImageGroupWithoutSingleAppModeFailsWithAHint() {
        var m = FW.Machine(images: [FW.image()], configuration: .init())
        _ = m.start(now: FW.t(0))
        _ = m.parametersReceived(bufferSize: 384, bufferCount: 4)
        _ = m.bootloaderInfoUnsupported()
        let message = FW.failure(m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(1)))?.message ?? ""
        #expect(message.contains("no image group") && message.contains("--bootloader-mode single-app"), "\(message)")
        // On a swap device rc 8 is not a single-app sign either.
        var swap = FW.machine()
        #expect(FW.failure(swap.imageListUnsupported("rc 8", now: FW.t(1))) != nil)
    }

    @Test func theSameImageAlreadyInSlotZeroIsOnlyBooted() {
        var m = Self.inRecovery()
        #expect(d(m.imageListReceived(Self.recovery(FW.new))) == [.reset(.normal)], "no upload, no second look")
        _ = FW.rebootAndReconnect(&m, at: 20)
        let summary = FW.summary(m.imageListUnsupported("rc 8", now: FW.t(22)))
        #expect(summary?.skippedImages == [0])
        #expect(summary?.uploadedImages == [])
        #expect(summary?.verified?.contains("nothing to upload") == true)
    }

    @Test func testModesSayTheImageIsPermanentAndWriteNothing() {
        var m = Self.inRecovery(mode: .testAndConfirm)
        _ = m.imageListReceived(Self.recovery(FW.old))
        #expect(d(m.uploadFinished(image: 0)) == [.requestImageList])
        #expect(d(m.imageListReceived(Self.recovery(FW.new))) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m, at: 20)
        let done = m.imageListUnsupported("rc 8", now: FW.t(22))
        #expect(!done.contains { if case .confirmImage = $0 { true } else { false } })
        #expect(FW.summary(done)?.notes.contains { $0.contains("cannot test-boot") } == true)
    }

    @Test func uploadOnlyStaysInRecoveryAfterTheCheck() {
        var m = Self.inRecovery(mode: .uploadOnly)
        _ = m.imageListReceived(Self.recovery(FW.old))
        #expect(d(m.uploadFinished(image: 0)) == [.requestImageList])
        let done = m.imageListReceived(Self.recovery(FW.new))
        #expect(!d(done).contains(.reset(.normal)))
        #expect(FW.summary(done)?.notes.contains { $0.contains("smp os reset") } == true)
        #expect(FW.summary(done)?.verified?.hasSuffix("MCUboot boots slot 0 on the next reset") == true)
    }

    @Test func noResetEndsAfterTheCheckInRecovery() {
        var m = FW.machine(bootloader: .singleApplication) { $0.performReset = false }
        _ = m.imageListUnsupported("rc 8", now: FW.t(1))
        // Uploading at all needs the reset into recovery.
        _ = FW.rebootAndReconnect(&m, at: 2)
        _ = m.imageListReceived(Self.recovery(FW.old))
        _ = m.uploadFinished(image: 0)
        let done = m.imageListReceived(Self.recovery(FW.new))
        #expect(!d(done).contains(.reset(.normal)))
        #expect(FW.summary(done)?.notes.contains { $0.contains("next reset") } == true)
    }
}
