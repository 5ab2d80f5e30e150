import Foundation

@testable import McuMgrCore

/// Shorthands for the firmware-upgrade machine tests.
enum FW {
    typealias Machine = FirmwareUpgradeStateMachine
    typealias Action = FirmwareUpgradeStateMachine.Action
    /// An image list entry.
    typealias Slot = McuMgrImageStateResponse.ImageSlot

    static func hash(_ b: UInt8) -> [UInt8] { [UInt8](repeating: b, count: 32) }
    static let old = hash(0xAA)
    static let new = hash(0x01)
    static let new1 = hash(0x02)
    static let other = hash(0xEE)

    static func t(_ seconds: UInt64) -> SMPInstant { SMPInstant(nanoseconds: seconds * 1_000_000_000) }

    static func image(_ number: Int = 0, slot: Int = 0, hash: [UInt8] = new) -> FirmwareUpgradeImage {
        FirmwareUpgradeImage(image: number, slot: slot, contentType: .mcubootImage, hash: Data(hash), data: Data(count: 1000), fileName: "test.bin")
    }

    /// A device running `running` in slot 0, confirmed, with an empty secondary slot.
    static func runningOld(image: Int = 0) -> [Slot] {
        [Slot(image: image, slot: 0, hash: Data(old), active: true, confirmed: true)]
    }

    /// After a swap: `hash` active in slot 0, the old image in slot 1.
    static func booted(_ hash: [UInt8], image: Int = 0, confirmed: Bool) -> [Slot] {
        [
            Slot(image: image, slot: 0, hash: Data(hash), active: true, confirmed: confirmed),
            Slot(image: image, slot: 1, hash: Data(old), confirmed: !confirmed),
        ]
    }

    /// The actions without state notifications.
    static func device(_ actions: [Action]) -> [Action] {
        actions.filter { if case .notify = $0 { false } else { true } }
    }

    static func states(_ actions: [Action]) -> [FirmwareUpgradeState] {
        actions.compactMap { if case .notify(let c) = $0 { c.current } else { nil } }
    }

    static func summary(_ actions: [Action]) -> FirmwareUpgradeSummary? {
        for a in actions { if case .finished(let s) = a { return s } }
        return nil
    }

    static func failure(_ actions: [Action]) -> FirmwareUpgradeFailure? {
        for a in actions { if case .failed(let f) = a { return f } }
        return nil
    }

    /// Runs start → parameters (2048 × 4) → bootloader info (`mode`) and returns the machine,
    /// which has just asked for the image list.
    static func machine(
        _ images: [FirmwareUpgradeImage] = [image()], mode: FirmwareUpgradeMode = .confirmOnly,
        bootloader: BootloaderMode = .swapUsingScratch, swapTime: Duration = .zero,
        configure: (inout FirmwareUpgradeConfiguration) -> Void = { _ in }
    ) -> Machine {
        var config = FirmwareUpgradeConfiguration(upgradeMode: mode, estimatedSwapTime: swapTime)
        configure(&config)
        var m = Machine(images: images, configuration: config)
        _ = m.start(now: t(0))
        _ = m.parametersReceived(bufferSize: 2048, bufferCount: 4)
        _ = m.bootloaderInfoReceived(name: "MCUboot", mode: bootloader)
        return m
    }

    /// Drives reset → wait → reconnect from `resetSent` at time `at`; returns the actions of `reconnected`.
    static func rebootAndReconnect(_ m: inout Machine, at: UInt64 = 100, wait: UInt64 = 1) -> [Action] {
        _ = m.resetSent(now: t(at))
        _ = m.timerFired(now: t(at + wait))
        return m.reconnected()
    }
}
