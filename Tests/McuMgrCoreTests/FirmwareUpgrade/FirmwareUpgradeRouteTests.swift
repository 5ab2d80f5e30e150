import Foundation
import Testing

@testable import McuMgrCore

/// The machine's routes (application, SUIT, firmware loader, single application, serial recovery): an
/// answer that means something on one route is not read the same way on another.
@Suite struct FirmwareUpgradeRouteTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    @Test func rcEightAfterASwapDevicesInstallResetIsRetriedNotSuccess() {
        // Only a single-application MCUboot's application answers the image list with rc 8 once it runs.
        var m = FW.machine()
        #expect(d(m.imageListReceived(FW.runningOld())) == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
        #expect(d(m.uploadFinished(image: 0)) == [.confirmImage(hash: FW.new)])
        #expect(d(m.stateWriteSucceeded([])) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        let answer = m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(102))
        #expect(d(answer) == [.waitUntil(FW.t(103))])
        #expect(FW.summary(answer) == nil)
        #expect(m.currentState == .reconnect)
        #expect(d(m.timerFired(now: FW.t(103))) == [.requestImageList, .waitUntil(FW.t(161))])
    }

    @Test func rcEightAfterTheResetOfADeviceFoundInSerialRecoveryIsRetriedNotSuccess() {
        // Found in recovery with no mode known: nothing says its application has no image group.
        var m = SerialRecoveryFlowTests.recoveryMachine()
        _ = m.imageListReceived([])
        #expect(m.isSerialRecovery)
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)], "no look at recovery's list before the reset")
        #expect(d(FW.rebootAndReconnect(&m)) == [.requestImageList])
        let answer = m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(102))
        #expect(d(answer) == [.waitUntil(FW.t(103))])
        #expect(FW.summary(answer) == nil)
    }

    @Test func aSingleApplicationWithAnImageGroupResetsIntoRecoveryNotTheLoader() {
        // A loader name is configured, but serial recovery is MCUboot itself on the application's port.
        var m = FW.machine(bootloader: .singleApplication) { $0.firmwareLoaderName = "FL_0A1B2C" }
        let entering = m.imageListReceived(FW.runningOld())
        #expect(d(entering) == [.reset(.bootloader)])
        #expect(FW.states(entering) == [.reset])
        #expect(m.firmwareLoaderNameSet() == [], "no loader name is being stored on this route")
        #expect(d(m.resetSent(now: FW.t(10))) == [.waitUntil(FW.t(11))])
        #expect(d(m.timerFired(now: FW.t(11))) == [.reconnect, .waitUntil(FW.t(71))])
        #expect(!m.isSerialRecovery)
        #expect(d(m.reconnected()) == [.requestImageList], "serial recovery's list, not an upload")
        #expect(m.isSerialRecovery)
    }

    @Test func theLoadersListWithoutAnActiveSlotAfterTheInstallResetIsNotSerialRecovery() {
        var m = FW.machine(bootloader: .firmwareLoader)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        #expect(d(FW.rebootAndReconnect(&m, at: 10)) == [.upload([FW.image()], pipelineDepth: 1, bufferSize: nil)])
        #expect(d(m.uploadFinished(image: 0)) == [.reset(.normal)])
        #expect(d(FW.rebootAndReconnect(&m, at: 200)) == [.requestImageList])
        // No `active` flag: the running slot is slot 0, which holds the new hash (on the serial-recovery
        // routes this list would mean MCUboot had not booted it).
        let done = m.imageListReceived([FW.Slot(slot: 0, hash: Data(FW.new), confirmed: true)])
        let summary = FW.summary(done)
        #expect(summary?.uploadedImages == [0])
        #expect(summary?.serialRecovery == false)
        #expect(!m.isSerialRecovery)
    }

    @Test func aSUITBootloaderReportingSingleApplicationModeTakesTheSUITRoute() {
        var m = FW.Machine(images: [FW.image()], configuration: FirmwareUpgradeConfiguration(upgradeMode: .testAndConfirm))
        _ = m.start(now: FW.t(0))
        _ = m.parametersReceived(bufferSize: 2048, bufferCount: 4)
        // Straight to the upload: no image list, no reset into serial recovery.
        #expect(d(m.bootloaderInfoReceived(name: "SUIT", mode: .singleApplication)) == [.upload([FW.image()], pipelineDepth: 3, bufferSize: 2048)])
        let summary = FW.summary(m.uploadFinished(image: 0))
        #expect(summary?.didReset == false)
        #expect(summary?.serialRecovery == false)
        #expect(summary?.notes.contains { $0.contains("cannot test-boot") } == false, "the single-application note is not the SUIT route's")
    }
}
