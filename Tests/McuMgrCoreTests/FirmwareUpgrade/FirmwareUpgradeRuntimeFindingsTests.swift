import Foundation
import Testing

@testable import McuMgrCore

/// Behaviour added when the runtime (McuManager's FirmwareUpgradeManager) met real devices and the
/// simulator: resets left to the user, failures the driver finds, and images without an active slot.
@Suite struct FirmwareUpgradeRuntimeFindingsTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    @Test func withoutResetConfirmOnlyEndsAfterTheConfirm() {
        var m = FW.machine(mode: .confirmOnly) { $0.performReset = false }
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
        let done = m.stateWriteSucceeded(FW.runningOld() + [.init(slot: 1, hash: Data(FW.new), pending: true, permanent: true)])
        let summary = FW.summary(done)
        #expect(summary?.didReset == false)
        #expect(summary?.notes.contains { $0.contains("next reset") } == true)
        #expect(!d(done).contains(.reset(.normal)))
    }

    @Test func withoutResetTestAndConfirmEndsAfterTheTest() {
        var m = FW.machine(mode: .testAndConfirm) { $0.performReset = false }
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.uploadFinished(image: 0)) == [.testImage(hash: FW.new)])
        let done = m.stateWriteSucceeded(FW.runningOld() + [.init(slot: 1, hash: Data(FW.new), pending: true)])
        #expect(FW.summary(done)?.didReset == false)
    }

    @Test func withoutResetAPendingSecondarySlotFailsInsteadOfResetting() {
        var m = FW.machine(mode: .confirmOnly) { $0.performReset = false }
        let actions = m.imageListReceived(FW.runningOld() + [.init(slot: 1, hash: Data(FW.other), pending: true)])
        #expect(FW.failure(actions)?.message.contains("resets are off") == true)
        #expect(!d(actions).contains(.reset(.normal)))
    }

    @Test func withoutResetTheFirmwareLoaderStillEntersTheLoaderButDoesNotResetAfter() {
        var m = FW.machine(bootloader: .firmwareLoader) { $0.performReset = false }
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        _ = m.resetSent(now: FW.t(1))
        _ = m.timerFired(now: FW.t(2))
        _ = m.reconnected()
        let done = m.uploadFinished(image: 0)
        #expect(FW.summary(done)?.notes.contains { $0.contains("next reset") } == true)
        #expect(!d(done).contains(.reset(.normal)))
    }

    @Test func abortFailsFromAnyStateWithTheDriversMessage() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        let actions = m.abort("the device asks for a resource the package lacks")
        #expect(FW.failure(actions) == FirmwareUpgradeFailure(state: .upload, message: "the device asks for a resource the package lacks"))
        #expect(m.currentState == .failed)
        #expect(m.abort("again").isEmpty)
        #expect(m.uploadFinished(image: 0).isEmpty)
    }

    @Test func abortWhilePausedDropsTheHeldActions() {
        var m = FW.machine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.pause()
        #expect(d(m.uploadFinished(image: 0)).isEmpty, "held while paused")
        let actions = m.abort("stop")
        #expect(d(actions).allSatisfy { if case .failed = $0 { true } else { false } })
        #expect(m.resume().isEmpty)
    }

    /// Older Zephyr flags only the running application's image active: a network core's image 1 has no
    /// active slot, so its primary slot is what runs.
    @Test func anImageWithoutActiveSlotRunsFromItsPrimarySlot() {
        let app = FW.image(0, hash: FW.new)
        let net = FW.image(1, hash: FW.new1)
        var m = FW.machine([app, net])
        let before = FW.runningOld(image: 0) + [FW.Slot(image: 1, slot: 0, hash: Data(FW.old), confirmed: true)]
        #expect(d(m.imageListReceived(before)) == [.upload([app, net], pipelineDepth: 3, bufferSize: 2048)])
        _ = m.uploadFinished(image: 0)
        _ = m.uploadFinished(image: 1)
        _ = m.stateWriteSucceeded([])
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        let after = FW.booted(FW.new, image: 0, confirmed: true) + [
            FW.Slot(image: 1, slot: 0, hash: Data(FW.new1), confirmed: true),
            FW.Slot(image: 1, slot: 1, hash: Data(FW.old)),
        ]
        let done = m.imageListReceived(after)
        #expect(FW.summary(done)?.uploadedImages == [0, 1])
    }

    @Test func anImageWithoutActiveSlotThatKeptTheOldImageFails() {
        let app = FW.image(0, hash: FW.new)
        let net = FW.image(1, hash: FW.new1)
        var m = FW.machine([app, net])
        _ = m.imageListReceived(FW.runningOld(image: 0) + [FW.Slot(image: 1, slot: 0, hash: Data(FW.old), confirmed: true)])
        _ = m.uploadFinished(image: 0)
        _ = m.uploadFinished(image: 1)
        _ = m.stateWriteSucceeded([])
        _ = m.stateWriteSucceeded([])
        _ = FW.rebootAndReconnect(&m)
        let after = FW.booted(FW.new, image: 0, confirmed: true) + [
            FW.Slot(image: 1, slot: 0, hash: Data(FW.old), confirmed: true),
            FW.Slot(image: 1, slot: 1, hash: Data(FW.new1)),
        ]
        let failure = FW.failure(m.imageListReceived(after))
        #expect(failure?.message.contains("image 1: the device booted the old image") == true)
    }

    @Test func anImageWithoutActiveSlotAlreadyInstalledIsSkipped() {
        let net = FW.image(1, hash: FW.new1)
        var m = FW.machine([net])
        let list = FW.runningOld(image: 0) + [FW.Slot(image: 1, slot: 0, hash: Data(FW.new1), confirmed: true)]
        let done = m.imageListReceived(list)
        #expect(FW.summary(done)?.skippedImages == [1])
    }

    /// Zephyr refuses to confirm a non-running image (IMAGE_CONFIRMATION_DENIED), so in testAndConfirm
    /// the other images are confirmed before the reset and only the application image is test-booted.
    @Test func testAndConfirmWithTwoImagesConfirmsTheNetCoreBeforeTheReset() {
        let app = FW.image(0, hash: FW.new)
        let net = FW.image(1, hash: FW.new1)
        var m = FW.machine([app, net], mode: .testAndConfirm)
        _ = m.imageListReceived(FW.runningOld(image: 0) + [FW.Slot(image: 1, slot: 0, hash: Data(FW.old), confirmed: true)])
        _ = m.uploadFinished(image: 0)
        #expect(d(m.uploadFinished(image: 1)) == [.testImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded([])) == [.confirmImage(hash: FW.new1)])
        #expect(d(m.stateWriteSucceeded([])) == [.reset(.normal)])
        _ = FW.rebootAndReconnect(&m)
        let after = FW.booted(FW.new, image: 0, confirmed: false) + [
            FW.Slot(image: 1, slot: 0, hash: Data(FW.new1), confirmed: true),
            FW.Slot(image: 1, slot: 1, hash: Data(FW.old)),
        ]
        #expect(d(m.imageListReceived(after)) == [.confirmImage(hash: FW.new)], "only the application is confirmed after")
        let done = m.stateWriteSucceeded(FW.booted(FW.new, image: 0, confirmed: true))
        #expect(FW.summary(done)?.notes.contains { $0.contains("image 1 was confirmed before the reset") } == true)
    }
}
