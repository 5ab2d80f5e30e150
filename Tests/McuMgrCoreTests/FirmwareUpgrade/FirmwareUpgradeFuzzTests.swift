import Foundation
import TestSupport
import Testing

@testable import McuMgrCore

/// Random event sequences: the machine never traps, ends at most once, and stays silent after the end.
@Suite struct FirmwareUpgradeFuzzTests {
    static func randomList(_ rng: inout SplitMix64) -> [FW.Slot] {
        let hashes = [FW.old, FW.new, FW.new1, FW.other]
        return (0..<Int.random(in: 0...4, using: &rng)).map { _ in
            FW.Slot(
                image: Int.random(in: 0...1, using: &rng), slot: Int.random(in: 0...1, using: &rng),
                hash: Data(hashes.randomElement(using: &rng)!), active: .random(using: &rng),
                confirmed: .random(using: &rng), pending: .random(using: &rng), permanent: .random(using: &rng))
        }
    }

    static func isEnd(_ a: FW.Action) -> Bool {
        switch a {
        case .finished, .failed, .cancelled: true
        default: false
        }
    }

    @Test func randomEventSequencesNeverTrapAndEndOnce() {
        var rng = SplitMix64(seed: 0x5EED)
        let modes = FirmwareUpgradeMode.allCases
        let bootloaders: [BootloaderMode] = (-1...10).map { BootloaderMode(rawValue: $0) }
        for _ in 0..<400 {
            let images = [
                [FW.image()], [FW.image(slot: 0, hash: FW.other), FW.image(slot: 1)],
                [FW.image(0), FW.image(1, hash: FW.new1)],
                [FirmwareUpgradeImage(image: 0, contentType: .suitEnvelope, hash: Data(FW.new), data: Data(count: 9), fileName: "test.bin")],
            ].randomElement(using: &rng)!
            var config = FirmwareUpgradeConfiguration(
                upgradeMode: modes.randomElement(using: &rng)!, estimatedSwapTime: .seconds(Int.random(in: 0...5, using: &rng)),
                reconnectTimeout: .seconds(10), maximumRetries: 2)
            config.eraseAppSettings = .random(using: &rng)
            if Bool.random(using: &rng) { config.firmwareLoaderName = "FL_FUZZ" }
            var m = FirmwareUpgradeStateMachine(images: images, configuration: config)
            var now: UInt64 = 0
            var ends = 0
            var endedAt: Int?
            let started = m.start(now: FW.t(0))
            ends += started.filter(Self.isEnd).count
            for step in 0..<60 {
                now += UInt64.random(in: 0...4, using: &rng)
                let actions: [FW.Action]
                switch Int.random(in: 0...19, using: &rng) {
                case 0: actions = m.parametersReceived(bufferSize: 2048, bufferCount: Int.random(in: 0...5, using: &rng))
                case 1: actions = m.parametersUnsupported()
                case 2: actions = m.bootloaderInfoReceived(name: ["MCUboot", "SUIT", nil].randomElement(using: &rng)!, mode: bootloaders.randomElement(using: &rng))
                case 3: actions = m.bootloaderInfoUnsupported()
                case 4, 5: actions = m.imageListReceived(Self.randomList(&rng))
                case 6: actions = m.uploadFinished(image: Int.random(in: 0...1, using: &rng))
                case 7: actions = m.stateWriteSucceeded(Self.randomList(&rng))
                case 8: actions = m.resetSent(now: FW.t(now))
                case 9: actions = m.reconnected()
                case 10: actions = m.eraseSettingsDone()
                case 11: actions = m.eraseSettingsFailed("x")
                case 12: actions = m.requestFailed("x", retriable: .random(using: &rng), now: FW.t(now))
                case 13, 14: actions = m.timerFired(now: FW.t(now))
                case 15: actions = m.pause()
                case 16: actions = m.resume()
                case 17: actions = m.imageListUnsupported("rc 8", now: FW.t(now))
                case 18: actions = m.firmwareLoaderNameSet()
                default: actions = Int.random(in: 0...9, using: &rng) == 0 ? m.cancel() : []
                }
                if endedAt != nil { #expect(actions.isEmpty, "actions after the end: \(actions)") }
                let e = actions.filter(Self.isEnd).count
                ends += e
                if e > 0, endedAt == nil { endedAt = step }
            }
            #expect(ends <= 1)
            #expect(m.isTerminal == (ends == 1) || m.isPaused, "terminal state and end action agree")
        }
    }

    @Test func happyDriverAlwaysFinishesForEveryModeAndBootloader() {
        // A cooperative driver answering every request as a good device would.
        for mode in FirmwareUpgradeMode.allCases {
            for raw in -1...9 {
                let bootloader = BootloaderMode(rawValue: raw)
                let images = bootloader.isDirectXIP || bootloader == .ramLoad
                    ? [FW.image(slot: 0, hash: FW.other), FW.image(slot: 1)] : [FW.image()]
                // The firmware loader's name is stored only in firmware-loader mode; the others ignore it.
                var m = FirmwareUpgradeStateMachine(
                    images: images, configuration: .init(upgradeMode: mode, bootloaderMode: bootloader, firmwareLoaderName: "FL_FUZZ"))
                var queue = m.start(now: FW.t(0))
                var booted = false
                // MCUboot's serial recovery (reset with boot mode 1): lists slot 0 without `active`.
                var inRecovery = false
                var uploaded = false
                var now: UInt64 = 0
                var finished = false
                var guardCount = 0
                var timer: SMPInstant?
                while guardCount < 100 {
                    guardCount += 1
                    if queue.isEmpty {
                        guard let at = timer else { break }
                        timer = nil
                        now = max(now, at.nanoseconds / 1_000_000_000)
                        queue += m.timerFired(now: at)
                        continue
                    }
                    let action = queue.removeFirst()
                    now += 1
                    switch action {
                    case .requestParameters: queue += m.parametersReceived(bufferSize: 2048, bufferCount: 4)
                    case .requestBootloaderInfo: queue += m.bootloaderInfoReceived(name: "MCUboot", mode: bootloader)
                    case .requestImageList where inRecovery:
                        queue += m.imageListReceived([FW.Slot(slot: 0, hash: Data(uploaded ? FW.new : FW.old), confirmed: true)])
                    case .requestImageList where bootloader == .singleApplication:
                        // The single-application application has no image group.
                        queue += m.imageListUnsupported("NOT_SUPPORTED (8)", now: FW.t(now))
                    case .requestImageList:
                        let newSlot = bootloader.isDirectXIP || bootloader == .ramLoad ? 1 : 0
                        queue += m.imageListReceived(booted
                            ? [FW.Slot(slot: newSlot, hash: Data(FW.new), active: true, confirmed: mode != .testOnly || !bootloader.supportsRevert)]
                            : FW.runningOld())
                    case .upload(let list, _, _):
                        uploaded = true
                        for i in list { queue += m.uploadFinished(image: i.image) }
                    case .testImage, .confirmImage: queue += m.stateWriteSucceeded([])
                    case .reset(let how):
                        booted = how == .normal
                        inRecovery = how == .bootloader && bootloader == .singleApplication
                        queue += m.resetSent(now: FW.t(now))
                    case .waitUntil(let at): timer = at
                    case .setFirmwareLoaderName(let name):
                        if bootloader != .firmwareLoader { Issue.record("\(mode) on \(bootloader): stores a loader name \(name)") }
                        queue += m.firmwareLoaderNameSet()
                    case .reconnect, .reconnectToFirmwareLoader:
                        timer = nil
                        queue += m.reconnected()
                    case .finished: finished = true
                    case .failed(let f): Issue.record("\(mode) on \(bootloader): \(f)")
                    default: break
                    }
                }
                #expect(finished, "\(mode) on \(bootloader)")
            }
        }
    }
}
