import Foundation
import Testing

@testable import McuMgrCore

/// The firmware-upgrade machine, tested by the actions it returns for each event (notifications
/// filtered out with `FW.device` unless the test is about them).
@Suite struct FirmwareUpgradeStateMachineTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    // MARK: - Modes on a swap bootloader

    @Test func confirmOnlyUploadsConfirmsResetsAndChecks() {
        var m = FirmwareUpgradeStateMachine(images: [FW.image()])
        #expect(m.start(now: FW.t(0)) == [.notify(.init(previous: .none, current: .requestMcuMgrParameters)), .requestParameters])
        #expect(d(m.parametersReceived(bufferSize: 2048, bufferCount: 4)) == [.requestBootloaderInfo])
        #expect(d(m.bootloaderInfoReceived(name: "MCUboot", mode: .swapUsingScratch)) == [.requestImageList])
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded(FW.runningOld() + [.init(slot: 1, hash: Data(FW.new), pending: true, permanent: true)])) == [.reset(.normal)])
        #expect(d(m.resetSent(now: FW.t(10))) == [.waitUntil(FW.t(11))])
        #expect(d(m.timerFired(now: FW.t(11))) == [.reconnect, .waitUntil(FW.t(71))])
        #expect(d(m.reconnected()) == [.requestImageList])
        let done = m.imageListReceived(FW.booted(FW.new, confirmed: true))
        #expect(FW.summary(done) == FirmwareUpgradeSummary(
            mode: .confirmOnly, bootloaderMode: .swapUsingScratch, uploadedImages: [0], didReset: true))
        #expect(m.currentState == .success)
        #expect(m.isTerminal)
    }

    @Test func confirmOnlyNotifiesEveryStateInOrder() {
        var m = FirmwareUpgradeStateMachine(images: [FW.image()])
        var all = m.start(now: FW.t(0))
        all += m.parametersReceived(bufferSize: 2048, bufferCount: 4)
        all += m.bootloaderInfoReceived(name: "MCUboot", mode: .swapWithoutScratch)
        all += m.imageListReceived(FW.runningOld())
        all += m.uploadFinished(image: 0)
        all += m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true, permanent: true)])
        all += m.resetSent(now: FW.t(10))
        all += m.timerFired(now: FW.t(11))
        all += m.reconnected()
        all += m.imageListReceived(FW.booted(FW.new, confirmed: true))
        #expect(FW.states(all) == [
            .requestMcuMgrParameters, .bootloaderInfo, .validate, .upload, .confirm, .reset, .reconnect, .success,
        ])
    }

    @Test func testAndConfirmTestsResetsThenConfirms() {
        var m = FW.machine(mode: .testAndConfirm)
        #expect(d(m.imageListReceived(FW.runningOld())).count == 1)
        #expect(d(m.uploadFinished(image: 0)) == [.testImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true)])) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        #expect(d(m.imageListReceived(FW.booted(FW.new, confirmed: false))) == [.confirmImage(hash: FW.new)])
        #expect(m.currentState == .confirm)
        let done = m.stateWriteSucceeded(FW.booted(FW.new, confirmed: true))
        #expect(FW.summary(done)?.didReset == true)
    }

    @Test func testOnlyLeavesTheImageUnconfirmed() {
        var m = FW.machine(mode: .testOnly)
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.testImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true)])) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m)
        let done = m.imageListReceived(FW.booted(FW.new, confirmed: false))
        #expect(FW.summary(done)?.notes == [])
        #expect(!done.contains(.confirmImage(hash: FW.new)))
    }

    @Test func testOnlyNotesAnImageThatConfirmedItself() {
        var m = FW.machine(mode: .testOnly)
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true)])
        _ = FW.rebootAndReconnect(&m)
        let done = m.imageListReceived(FW.booted(FW.new, confirmed: true))
        #expect(FW.summary(done)?.notes.first?.contains("already confirmed") == true)
    }

    @Test func uploadOnlyStopsAfterTheUpload() {
        var m = FW.machine(mode: .uploadOnly)
        _ = m.imageListReceived(FW.runningOld())
        let done = m.uploadFinished(image: 0)
        #expect(d(done).count == 1)
        #expect(FW.summary(done)?.didReset == false)
        #expect(FW.summary(done)?.uploadedImages == [0])
    }

    @Test(arguments: [BootloaderMode.swapUsingScratch, .swapWithoutScratch, .swapUsingOffset, .unknown])
    func everyModeOnSwapBootloaders(bootloader: BootloaderMode) {
        for mode in FirmwareUpgradeMode.allCases {
            var m = FW.machine(mode: mode, bootloader: bootloader)
            _ = m.imageListReceived(FW.runningOld())
            let afterUpload = d(m.uploadFinished(image: 0))
            switch mode {
            case .confirmOnly: #expect(afterUpload == [.confirmImage(hash: FW.new)])
            case .testAndConfirm, .testOnly: #expect(afterUpload == [.testImage(hash: FW.new)])
            case .uploadOnly:
                #expect(m.currentState == .success)
                continue
            }
            #expect(d(m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true, permanent: mode == .confirmOnly)])) == [.reset(.normal)])
            _ = FW.rebootAndReconnect(&m)
            var end = m.imageListReceived(FW.booted(FW.new, confirmed: mode == .confirmOnly))
            if mode == .testAndConfirm { end = m.stateWriteSucceeded(FW.booted(FW.new, confirmed: true)) }
            #expect(FW.summary(end) != nil, "\(mode) on \(bootloader)")
        }
    }

    // MARK: - Bootloader modes

    @Test func directXIPWithoutRevertUploadsTheInactiveBuildAndOnlyResets() {
        let pair = [FW.image(slot: 0, hash: FW.other), FW.image(slot: 1, hash: FW.new)]
        var m = FW.machine(pair, bootloader: .directXIPWithoutRevert, swapTime: .seconds(30))
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([pair[1]], pipelineDepth: 3, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)], "no state write on Direct-XIP without revert")
        #expect(d(m.resetSent(now: FW.t(10))) == [.waitUntil(FW.t(11))], "swap time skipped")
        _ = m.timerFired(now: FW.t(11))
        _ = m.reconnected()
        let list = [
            FW.Slot(slot: 0, hash: Data(FW.old), confirmed: true),
            FW.Slot(slot: 1, hash: Data(FW.new), active: true, confirmed: true),
        ]
        #expect(FW.summary(m.imageListReceived(list))?.uploadedImages == [0])
    }

    @Test func directXIPPicksTheSlotZeroBuildWhenSlotOneRuns() {
        let pair = [FW.image(slot: 0, hash: FW.new), FW.image(slot: 1, hash: FW.other)]
        var m = FW.machine(pair, bootloader: .directXIPWithoutRevert)
        let list = [FW.Slot(slot: 1, hash: Data(FW.old), active: true, confirmed: true)]
        #expect(d(m.imageListReceived(list)) == [.upload([pair[0]], pipelineDepth: 3, bufferSize: 2048)])
    }

    @Test func directXIPWithOnlyTheRunningSlotsBuildFailsClearly() {
        var m = FW.machine([FW.image(slot: 0)], bootloader: .directXIPWithoutRevert)
        let f = FW.failure(m.imageListReceived(FW.runningOld()))
        #expect(f?.message.contains("needs the build linked for slot 1") == true)
    }

    @Test func directXIPWithoutRevertTellsAboutVersionWhenOldImageBoots() {
        var m = FW.machine([FW.image(slot: 1)], bootloader: .directXIPWithoutRevert)
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = FW.rebootAndReconnect(&m)
        let f = FW.failure(m.imageListReceived(FW.runningOld() + [.init(slot: 1, hash: Data(FW.new))]))
        #expect(f?.message.contains("booted the old image") == true)
        #expect(f?.message.contains("higher version") == true)
    }

    @Test func directXIPWithRevertTestsAndConfirmsTheInactiveSlot() {
        let pair = [FW.image(slot: 0, hash: FW.other), FW.image(slot: 1, hash: FW.new)]
        var m = FW.machine(pair, mode: .testAndConfirm, bootloader: .directXIPWithRevert, swapTime: .seconds(30))
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.testImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true)])) == [.reset(.normal)])
        #expect(d(m.resetSent(now: FW.t(10))) == [.waitUntil(FW.t(11))], "swap time skipped")
        _ = m.timerFired(now: FW.t(11))
        _ = m.reconnected()
        let booted = [FW.Slot(slot: 0, hash: Data(FW.old), confirmed: true), FW.Slot(slot: 1, hash: Data(FW.new), active: true)]
        #expect(d(m.imageListReceived(booted)) == [.confirmImage(hash: FW.new)])
    }

    @Test func overwriteOnlyTestModesConfirmBeforeTheReset() {
        for mode in [FirmwareUpgradeMode.testOnly, .testAndConfirm] {
            var m = FW.machine(mode: mode, bootloader: .overwrite)
            _ = m.imageListReceived(FW.runningOld())
            #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)], "no revert: \(mode) behaves like confirm")
            _ = m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true, permanent: true)])
            _ = FW.rebootAndReconnect(&m)
            let done = m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
            #expect(FW.summary(done)?.notes.contains { $0.contains("overwrite-only") } == true)
        }
    }

    @Test func ramLoadUploadsToTheInactiveSlotAndConfirms() {
        var m = FW.machine([FW.image(slot: 1)], mode: .testOnly, bootloader: .ramLoad, swapTime: .seconds(30))
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
        _ = m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new), pending: true, permanent: true)])
        #expect(d(m.resetSent(now: FW.t(10))) == [.waitUntil(FW.t(11))])
    }

    @Test func firmwareLoaderResetsIntoTheLoaderFirst() {
        var m = FW.machine(bootloader: .firmwareLoader)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        // The application's buffer size does not apply to the loader: the driver asks it.
        #expect(d(FW.rebootAndReconnect(&m)) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)], "no state write in the loader")
        _ = FW.rebootAndReconnect(&m, at: 200)
        #expect(FW.summary(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])) != nil)
    }

    @Test func singleApplicationSlotWithAnImageGroupStillUploadsThroughSerialRecovery() {
        // A single-app application that does answer the image list (not Zephyr's): recovery all the same.
        var m = FW.machine(mode: .testAndConfirm, bootloader: .singleApplication)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList], "serial recovery's list")
        #expect(d(m.imageListReceived([.init(slot: 0, hash: Data(FW.old), confirmed: true)])) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(d(m.uploadFinished(image: 0)) == [.requestImageList], "slot 0 checked in recovery")
        #expect(d(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), confirmed: true)])) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m, at: 200)
        let summary = FW.summary(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)]))
        #expect(summary?.verified?.hasSuffix("the application's image list shows the uploaded hash running") == true, "\(String(describing: summary))")
    }

    @Test func singleSlotUploadsToThePrimaryAndResets() {
        for bootloader in [BootloaderMode.singleSlotRAMLoad] {
            var m = FW.machine(mode: .testAndConfirm, bootloader: bootloader)
            #expect(d(m.imageListReceived(FW.runningOld())).count == 1)
            #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)])
            _ = FW.rebootAndReconnect(&m)
            #expect(FW.summary(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])) != nil)
        }
    }

    @Test func suitEnvelopeIsUploadedWithoutStateWriteOrReset() {
        let envelope = FirmwareUpgradeImage(image: 0, contentType: .suitEnvelope, hash: Data(FW.new), data: Data(count: 500), fileName: "test.bin")
        let cache = FirmwareUpgradeImage(image: 1, contentType: .suitCache, hash: Data(FW.new1), data: Data(count: 500), fileName: "test.bin")
        var m = FirmwareUpgradeStateMachine(images: [envelope, cache])
        _ = m.start(now: FW.t(0))
        _ = m.parametersReceived(bufferSize: 2048, bufferCount: 2)
        #expect(d(m.bootloaderInfoReceived(name: "SUIT", mode: nil)) == [.upload([envelope, cache], pipelineDepth: 1, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 0)) == [])
        #expect(FW.summary(m.uploadFinished(image: 1))?.didReset == false)
    }

    // MARK: - Multi-image

    @Test func multiImageUploadsInOrderWritesPerImageAndResetsOnce() {
        let images = [FW.image(0, hash: FW.new), FW.image(1, hash: FW.new1)]
        var m = FW.machine(images, mode: .testAndConfirm)
        #expect(d(m.imageListReceived(FW.runningOld(image: 0) + FW.runningOld(image: 1))) == [.upload(images, pipelineDepth: 3, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 0)) == [])
        #expect(d(m.uploadFinished(image: 1)) == [.testImage(hash: FW.new)])
        // Image 1 is confirmed before the reset (see FirmwareUpgradeRuntimeFindingsTests).
        #expect(d(m.stateWriteSucceeded([])) == [.confirmImage(hash: FW.new1)])
        #expect(d(m.stateWriteSucceeded([])) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m)
        let booted = FW.booted(FW.new, image: 0, confirmed: false) + FW.booted(FW.new1, image: 1, confirmed: true)
        #expect(d(m.imageListReceived(booted)) == [.confirmImage(hash: FW.new)])
        #expect(FW.summary(m.stateWriteSucceeded([]))?.uploadedImages == [0, 1])
    }

    @Test func multiImageSkipsTheRunningImageAndUploadsTheOther() {
        let images = [FW.image(0, hash: FW.new), FW.image(1, hash: FW.new1)]
        var m = FW.machine(images)
        let list = [FW.Slot(image: 0, slot: 0, hash: Data(FW.new), active: true, confirmed: true)] + FW.runningOld(image: 1)
        #expect(d(m.imageListReceived(list)) == [.upload([images[1]], pipelineDepth: 3, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 1)) == [.confirmImage(hash: FW.new1)])
    }

    @Test func imageMissingFromTheFinalListIsNotedNotFailed() {
        let images = [FW.image(0, hash: FW.new), FW.image(1, hash: FW.new1)]
        var m = FW.machine(images)
        _ = m.imageListReceived(FW.runningOld(image: 0) + FW.runningOld(image: 1))
        _ = m.uploadFinished(image: 0)
        _ = m.uploadFinished(image: 1)
        _ = m.stateWriteSucceeded([])
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        let done = m.imageListReceived(FW.booted(FW.new, image: 0, confirmed: true))
        #expect(FW.summary(done)?.notes.contains { $0.contains("image 1 is not in the device's image list") } == true)
    }

    // MARK: - Validation (skip rules, blocked secondary slot)

    @Test func sameHashInSecondarySkipsTheUpload() {
        var m = FW.machine()
        let list = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.new))]
        #expect(d(m.imageListReceived(list)) == [.confirmImage(hash: FW.new)])
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        let s = FW.summary(m.imageListReceived(FW.booted(FW.new, confirmed: true)))
        #expect(s?.uploadedImages == [])
        #expect(s?.skippedImages == [0])
    }

    @Test func sameHashAlreadyPermanentInSecondaryOnlyResets() {
        var m = FW.machine()
        let list = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.new), pending: true, permanent: true)]
        #expect(d(m.imageListReceived(list)) == [.reset(.normal)])
    }

    @Test func sameHashAlreadyPendingTestSkipsTheTestWrite() {
        var m = FW.machine(mode: .testAndConfirm)
        let list = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.new), pending: true)]
        #expect(d(m.imageListReceived(list)) == [.reset(.normal)])
    }

    @Test func testOnlyRefusesAnImageAlreadyConfirmedInSecondary() {
        var m = FW.machine(mode: .testOnly)
        let list = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.new), pending: true, permanent: true)]
        #expect(FW.failure(m.imageListReceived(list))?.message.contains("cannot be made test-only") == true)
    }

    @Test func imageAlreadyRunningAndConfirmedIsSuccessWithoutReset() {
        var m = FW.machine()
        let done = m.imageListReceived([FW.Slot(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        #expect(d(done).count == 1)
        #expect(FW.summary(done) == FirmwareUpgradeSummary(mode: .confirmOnly, bootloaderMode: .swapUsingScratch, skippedImages: [0]))
    }

    @Test func imageRunningUnconfirmedIsConfirmedWithoutReset() {
        var m = FW.machine()
        #expect(d(m.imageListReceived([FW.Slot(slot: 0, hash: Data(FW.new), active: true)])) == [.confirmImage(hash: FW.new)])
        #expect(FW.summary(m.stateWriteSucceeded([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)]))?.didReset == false)
    }

    @Test func confirmedOtherImageInSecondaryIsFreedByConfirmingThePrimary() {
        var m = FW.machine()
        let blocked = [
            FW.Slot(slot: 0, hash: Data(FW.old), active: true),
            FW.Slot(slot: 1, hash: Data(FW.other), confirmed: true),
        ]
        #expect(d(m.imageListReceived(blocked)) == [.confirmImage(hash: FW.old)])
        #expect(d(m.stateWriteSucceeded([])) == [.requestImageList])
        let freed = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.other))]
        #expect(d(m.imageListReceived(freed)) == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
    }

    @Test func pendingOtherImageInSecondaryIsClearedByAResetThenRevalidated() {
        var m = FW.machine()
        let blocked = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.other), pending: true)]
        #expect(d(m.imageListReceived(blocked)) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        #expect(m.currentState == .validate)
        #expect(d(m.imageListReceived(FW.runningOld())).count == 1)
    }

    @Test func secondaryStillBlockedAfterResolvingFailsClearly() {
        var m = FW.machine()
        let blocked = FW.runningOld() + [FW.Slot(slot: 1, hash: Data(FW.other), pending: true)]
        _ = m.imageListReceived(blocked)
        _ = FW.rebootAndReconnect(&m)
        _ = m.imageListReceived(blocked)
        _ = FW.rebootAndReconnect(&m, at: 200)
        let f = FW.failure(m.imageListReceived(blocked))
        #expect(f?.message.contains("still holds another image marked pending") == true)
    }

    // MARK: - Timing

    @Test func estimatedSwapTimeIsWaitedAfterTheReset() {
        var m = FW.machine(swapTime: .seconds(30))
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        #expect(d(m.resetSent(now: FW.t(100))) == [.waitUntil(FW.t(130))])
        #expect(d(m.timerFired(now: FW.t(120))) == [], "early (stale) timer ignored")
        #expect(d(m.timerFired(now: FW.t(130))) == [.reconnect, .waitUntil(FW.t(190))])
    }

    @Test func linkDroppingBeforeTheResetAnswerCountsAsReset() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        #expect(d(m.requestFailed("link closed", retriable: false, now: FW.t(50))) == [.waitUntil(FW.t(51))])
    }

    // MARK: - Failures

    @Test func oldImageBootedFailsWithTheSigningHint() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        let f = FW.failure(m.imageListReceived(FW.runningOld() + [.init(slot: 1, hash: Data(FW.new))]))
        #expect(f?.state == .reconnect)
        #expect(f?.message.contains("the device booted the old image: the new one was rejected by MCUboot — check the signing key / image") == true)
        #expect(m.currentState == .failed)
    }

    @Test func deviceNeverComingBackFailsAtTheDeadline() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        _ = m.resetSent(now: FW.t(100))
        #expect(d(m.timerFired(now: FW.t(101))) == [.reconnect, .waitUntil(FW.t(161))])
        #expect(d(m.requestFailed("no such device", retriable: true, now: FW.t(102))) == [.waitUntil(FW.t(103))])
        #expect(d(m.timerFired(now: FW.t(103))) == [.reconnect, .waitUntil(FW.t(161))])
        let f = FW.failure(m.timerFired(now: FW.t(161)))
        #expect(f?.message.contains("did not come back within 60 s") == true)
        #expect(m.reconnected() == [])
    }

    @Test func imageListAfterReconnectIsRetriedWhileTheDeviceSwaps() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        #expect(d(m.requestFailed("timeout", retriable: true, now: FW.t(110))) == [.waitUntil(FW.t(111))])
        #expect(d(m.timerFired(now: FW.t(111))) == [.requestImageList, .waitUntil(FW.t(161))])
        #expect(FW.summary(m.imageListReceived(FW.booted(FW.new, confirmed: true))) != nil)
    }

    @Test func uploadFailureFailsWithResumeAdvice() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        let f = FW.failure(m.requestFailed("device answered rc 6", retriable: false, now: FW.t(5)))
        #expect(f?.state == .upload)
        #expect(f?.message.contains("resumes from the device's offset") == true)
    }

    @Test func stateWriteErrorIsRetriedWhenRetriableThenFails() {
        var m = FW.machine { $0.maximumRetries = 1 }
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        #expect(d(m.requestFailed("timeout", retriable: true, now: FW.t(5))) == [.confirmImage(hash: FW.new)])
        let f = FW.failure(m.requestFailed("timeout", retriable: true, now: FW.t(6)))
        #expect(f?.state == .confirm)
        #expect(f?.message.contains("confirming image 0 failed") == true)
    }

    @Test func stateWriteThatDoesNotTakeEffectFails() {
        var m = FW.machine(mode: .testOnly)
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        let f = FW.failure(m.stateWriteSucceeded([.init(slot: 1, hash: Data(FW.new))]))
        #expect(f?.message.contains("does not show it pending") == true)
    }

    @Test func emptyPackageFails() {
        var m = FirmwareUpgradeStateMachine(images: [])
        #expect(FW.failure(m.start(now: FW.t(0))) != nil)
    }

    // MARK: - Optional device features

    @Test func parametersUnsupportedMeansNoPipelining() {
        var m = FirmwareUpgradeStateMachine(images: [FW.image()])
        _ = m.start(now: FW.t(0))
        #expect(d(m.parametersUnsupported()) == [.requestBootloaderInfo])
        #expect(d(m.bootloaderInfoUnsupported()) == [.requestImageList])
        #expect(m.bootloaderMode == .unknown)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
    }

    @Test func failingParametersAndBootloaderInfoAreTolerated() {
        var m = FirmwareUpgradeStateMachine(images: [FW.image()], configuration: .init(maximumRetries: 1))
        _ = m.start(now: FW.t(0))
        #expect(d(m.requestFailed("timeout", retriable: true, now: FW.t(1))) == [.requestParameters])
        #expect(d(m.requestFailed("timeout", retriable: true, now: FW.t(2))) == [.requestBootloaderInfo])
        #expect(d(m.requestFailed("rc 3", retriable: false, now: FW.t(3))) == [.requestImageList])
    }

    @Test func configuredPipelineDepthIsCappedByTheDeviceBuffers() {
        var m = FW.machine { $0.pipelineDepth = 8 }
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
    }

    @Test func bootloaderModeOverrideSkipsTheQuery() {
        var m = FirmwareUpgradeStateMachine(images: [FW.image(slot: 1)], configuration: .init(bootloaderMode: .directXIPWithoutRevert))
        _ = m.start(now: FW.t(0))
        #expect(d(m.parametersReceived(bufferSize: 384, bufferCount: 4)) == [.requestImageList])
        #expect(m.bootloaderMode == .directXIPWithoutRevert)
    }

    @Test func eraseAppSettingsRunsAfterTheUploadAndFailureIsTolerated() {
        var m = FW.machine { $0.eraseAppSettings = true }
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.eraseAppSettings])
        #expect(m.currentState == .eraseAppSettings)
        #expect(d(m.eraseSettingsFailed("rc 8")) == [.confirmImage(hash: FW.new)])
    }

    @Test func eraseAppSettingsDoneContinues() {
        var m = FW.machine(mode: .testOnly) { $0.eraseAppSettings = true }
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        #expect(d(m.eraseSettingsDone()) == [.testImage(hash: FW.new)])
    }

    // MARK: - Pause, resume, cancel

    @Test func pauseDuringUploadHoldsTheNextAction() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        #expect(m.pause() == [.pauseUpload])
        #expect(m.isPaused)
        #expect(d(m.uploadFinished(image: 0)) == [], "the answer is kept, the next action held")
        #expect(m.resume() == [.confirmImage(hash: FW.new)])
    }

    @Test func resumeContinuesTheHeldUpload() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.pause()
        #expect(m.resume() == [.resumeUpload])
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
    }

    @Test func pauseDuringValidateHoldsTheUpload() {
        var m = FW.machine()
        #expect(m.pause() == [])
        #expect(d(m.imageListReceived(FW.runningOld())) == [])
        #expect(m.currentState == .upload)
        #expect(m.resume() == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
    }

    @Test func pauseDuringTheSwapWaitHoldsTheReconnect() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        _ = m.pause()
        #expect(d(m.resetSent(now: FW.t(10))) == [])
        #expect(m.resume() == [.waitUntil(FW.t(11))])
    }

    @Test func cancelDuringUploadStopsEverything() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        #expect(m.cancel() == [.notify(.init(previous: .upload, current: .cancelled)), .cancelled])
        #expect(m.uploadFinished(image: 0) == [])
        #expect(m.timerFired(now: FW.t(1000)) == [])
        #expect(m.cancel() == [])
        #expect(m.currentState == .cancelled)
    }

    @Test func cancelWhilePausedDropsHeldActions() {
        var m = FW.machine()
        _ = m.pause()
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.cancel()) == [.cancelled])
        #expect(m.resume() == [])
    }

    @Test func cancelWhileWaitingForTheDevice() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.uploadFinished(image: 0)
        _ = m.stateWriteSucceeded([])
        _ = m.resetSent(now: FW.t(10))
        #expect(d(m.cancel()) == [.cancelled])
        #expect(m.timerFired(now: FW.t(11)) == [])
        #expect(m.reconnected() == [])
    }

    @Test func pauseAndCancelAfterTheEndDoNothing() {
        var m = FW.machine()
        _ = m.imageListReceived([FW.Slot(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        #expect(m.pause() == [])
        #expect(m.cancel() == [])
        #expect(m.currentState == .success)
    }
}
