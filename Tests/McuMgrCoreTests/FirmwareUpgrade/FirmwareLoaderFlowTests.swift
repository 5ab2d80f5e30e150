import Foundation

import Testing

@testable import McuMgrCore

/// MCUboot's firmware-loader mode (bootloader info `mode` 7) as Nordic's libraries drive it: the
/// application stores the loader's advertising name (settings `fw_loader/adv_name` + save), resets with
/// boot_mode 1, the loader is found (over Bluetooth LE: another peripheral, by that name), takes the image
/// in slot 0, resets, and the application comes back running the uploaded hash.
@Suite struct FirmwareLoaderFlowTests {
    typealias Action = FW.Action
    func d(_ actions: [Action]) -> [Action] { FW.device(actions) }

    static func loaderMachine(name: String? = "FL_0A1B2C", mode: FirmwareUpgradeMode = .confirmOnly) -> FW.Machine {
        FW.machine(mode: mode, bootloader: .firmwareLoader) { $0.firmwareLoaderName = name }
    }

    @Test func theWholeFlowInOrder() {
        var m = Self.loaderMachine()
        var log: [Action] = []
        log += d(m.imageListReceived(FW.runningOld()))
        log += d(m.firmwareLoaderNameSet())
        log += d(m.resetSent(now: FW.t(10)))
        log += d(m.timerFired(now: FW.t(11)))
        log += d(m.reconnected())
        log += d(m.uploadFinished(image: 0))
        log += d(m.resetSent(now: FW.t(20)))
        log += d(m.timerFired(now: FW.t(21)))
        log += d(m.reconnected())
        let done = m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        log += d(done)
        let summary = FW.summary(done)
        #expect(
            log.dropLast() == [
                .setFirmwareLoaderName("FL_0A1B2C"), .reset(.bootloader), .waitUntil(FW.t(11)),
                .reconnectToFirmwareLoader(name: "FL_0A1B2C"), .waitUntil(FW.t(71)),
                // The loader's buffers are its own: one request at a time, its size asked by the driver.
                .upload([FW.image()], pipelineDepth: 1, bufferSize: nil),
                // No state write: the loader wrote slot 0 directly.
                .reset(.normal), .waitUntil(FW.t(21)),
                // Back to the application (over BLE: its own address or name).
                .reconnect, .waitUntil(FW.t(81)),
                .requestImageList,
            ])
        #expect(summary?.uploadedImages == [0])
        #expect(summary?.didReset == true)
        #expect(summary?.bootloaderMode == .firmwareLoader)
    }

    @Test func thePublicStatesFollowTheIOSLibrary() {
        var m = Self.loaderMachine()
        var states = FW.states(m.imageListReceived(FW.runningOld()))
        states += FW.states(m.firmwareLoaderNameSet())
        states += FW.states(m.resetSent(now: FW.t(10)))
        states += FW.states(m.timerFired(now: FW.t(11)))
        states += FW.states(m.reconnected())
        states += FW.states(m.uploadFinished(image: 0))
        #expect(states == [.resetIntoFirmwareLoader, .reconnect, .upload, .reset])
    }

    @Test func withoutANameNothingIsWrittenAndTheLoaderIsReachedOnTheSameLink() {
        var m = Self.loaderMachine(name: nil)
        #expect(d(m.imageListReceived(FW.runningOld())) == [.reset(.bootloader)])
        _ = m.resetSent(now: FW.t(10))
        #expect(d(m.timerFired(now: FW.t(11))) == [.reconnectToFirmwareLoader(name: nil), .waitUntil(FW.t(71))])
    }

    @Test func aDeviceWithoutTheSettingStillResetsIntoTheLoaderAndSaysSo() {
        var m = Self.loaderMachine()
        _ = m.imageListReceived(FW.runningOld())
        // rc 8: the application has no settings group (or no handler for the key): not retried.
        #expect(d(m.requestFailed("rc 8 (NOT_SUPPORTED)", retriable: false, now: FW.t(5))) == [.reset(.bootloader)])
        _ = m.resetSent(now: FW.t(10))
        #expect(d(m.timerFired(now: FW.t(11))).first == .reconnectToFirmwareLoader(name: "FL_0A1B2C"))
        _ = m.reconnected()
        _ = m.uploadFinished(image: 0)
        _ = FW.rebootAndReconnect(&m, at: 200)
        let summary = FW.summary(m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)]))
        #expect(summary?.notes.contains { $0.contains("did not store the firmware loader's advertising name \"FL_0A1B2C\"") } == true)
    }

    @Test func aTimeoutWritingTheNameIsRetried() {
        var m = Self.loaderMachine()
        _ = m.imageListReceived(FW.runningOld())
        #expect(d(m.requestFailed("timed out", retriable: true, now: FW.t(5))) == [.setFirmwareLoaderName("FL_0A1B2C")])
    }

    @Test func aLoaderThatNeverAppearsFailsNamingIt() {
        var m = Self.loaderMachine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.firmwareLoaderNameSet()
        _ = m.resetSent(now: FW.t(10))
        _ = m.timerFired(now: FW.t(11))
        // Each failed attempt is retried after retryInterval with the loader as the target again.
        #expect(d(m.requestFailed("no device", retriable: true, now: FW.t(12))) == [.waitUntil(FW.t(13))])
        #expect(d(m.timerFired(now: FW.t(13))) == [.reconnectToFirmwareLoader(name: "FL_0A1B2C"), .waitUntil(FW.t(71))])
        let failure = FW.failure(m.timerFired(now: FW.t(71)))
        #expect(failure?.message.contains("the firmware loader (advertising \"FL_0A1B2C\" over Bluetooth LE) did not answer within 60 s") == true)
        #expect(failure?.state == .reconnect)
    }

    @Test func anUploadRefusedAfterTheResetNamesTheBootModeEntrance() {
        var m = Self.loaderMachine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.firmwareLoaderNameSet()
        _ = FW.rebootAndReconnect(&m)
        // The application came back instead (no boot-mode support) and cannot write its own slot.
        let failure = FW.failure(m.requestFailed("image group error 3 (NO_FREE_SLOT)", retriable: false, now: FW.t(120)))
        #expect(failure?.message.contains("ignores the reset into the loader") == true, "\(String(describing: failure))")
        #expect(failure?.message.contains("CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE") == true)
    }

    @Test func theApplicationBootingTheOldImageFails() {
        var m = Self.loaderMachine()
        _ = m.imageListReceived(FW.runningOld())
        _ = m.firmwareLoaderNameSet()
        _ = FW.rebootAndReconnect(&m)
        _ = m.uploadFinished(image: 0)
        _ = FW.rebootAndReconnect(&m, at: 200)
        let failure = FW.failure(m.imageListReceived(FW.runningOld()))
        #expect(failure?.message.contains("booted the old image") == true)
    }

    @Test func theImageAlreadyRunningNeedsNoLoader() {
        var m = Self.loaderMachine()
        let done = m.imageListReceived([.init(slot: 0, hash: Data(FW.new), active: true, confirmed: true)])
        #expect(!d(done).contains(.setFirmwareLoaderName("FL_0A1B2C")))
        #expect(FW.summary(done)?.skippedImages == [0])
    }

    @Test func singleApplicationModeNeverWritesTheLoaderName() {
        // Serial recovery is MCUboot itself on the same port: no name, the plain reconnect.
        var m = FW.machine(bootloader: .singleApplication) { $0.firmwareLoaderName = "FL_0A1B2C" }
        #expect(d(m.imageListUnsupported("rc 8", now: FW.t(1))) == [.reset(.bootloader)])
        _ = m.resetSent(now: FW.t(10))
        #expect(d(m.timerFired(now: FW.t(11))).first == .reconnect)
    }
}
