/// Before the upload: the bootloader's flow, the plan for each image from the device's image list, and
/// the reset into the firmware loader or serial recovery when the application cannot write its own slot.
extension FirmwareUpgradeStateMachine {
    /// The bootloader mode: the configuration's when it gives one, otherwise the device is asked.
    mutating func askBootloader() {
        if let override = configuration.bootloaderMode {
            device.mode = override
            chooseFlowAndValidate()
        } else {
            go(.bootloaderInfo)
            request(.requestBootloaderInfo)
        }
    }

    /// Picks the route and the flow for the bootloader mode, then reads the image list (a SUIT envelope goes
    /// up at once).
    mutating func chooseFlowAndValidate() {
        let suit = device.bootloaderName?.uppercased() == "SUIT" || images.contains { $0.contentType != .mcubootImage }
        let testing = configuration.upgradeMode == .testOnly || configuration.upgradeMode == .testAndConfirm
        let cannotTest = "\(device.mode.detailedName) cannot test-boot an image: the new image is permanent once it boots"
        plan.route = .application
        switch device.mode {
        case _ where suit:
            plan.route = .suit
            plan.flow = Flow(slots: .secondary, writes: .none, swapWait: false)
        case .directXIPWithoutRevert:
            plan.flow = Flow(slots: .inactive, writes: .none, swapWait: false)
            if testing { report.notes.append(cannotTest) }
        case .directXIPWithRevert:
            plan.flow = Flow(slots: .inactive, writes: .asMode, swapWait: false)
        case .ramLoad:
            plan.flow = Flow(slots: .inactive, writes: .confirmOnly, swapWait: false)
            report.notes.append("RAM load: no revert, so test modes behave like confirm (unverified against hardware)")
        case .overwrite:
            plan.flow = Flow(slots: .secondary, writes: .confirmOnly, swapWait: true)
            if testing {
                report.notes.append("overwrite-only bootloader cannot revert: the image is confirmed before the reset")
            }
        case .firmwareLoader, .singleApplication:
            // One application slot: the running application cannot overwrite itself, so the upload goes to
            // the firmware loader or MCUboot serial recovery (reset with boot_mode 1), then a normal reset.
            plan.route = device.mode == .firmwareLoader ? .firmwareLoader : .singleApplication
            plan.flow = Flow(slots: .primary, writes: .none, swapWait: false)
            if testing { report.notes.append(cannotTest) }
        case .singleSlotRAMLoad:
            plan.flow = Flow(slots: .primary, writes: .none, swapWait: false)
        default:
            plan.flow = Flow(slots: .secondary, writes: .asMode, swapWait: true)
        }
        if plan.route == .suit {
            // SUIT: the envelope (and cache images) go up; the device installs and reboots by itself.
            plan.targets = images.map { Target(image: $0, needsUpload: true, write: nil, needsReset: false) }
            startUpload(pipelineDepth: pipelineDepth)
        } else {
            go(.validate)
            request(.requestImageList)
        }
    }

    /// Plans each image number from the image list: upload or skip, which state write, whether it needs a
    /// reset. A secondary slot held by another confirmed or pending image is cleared first, then validated again.
    mutating func validate(_ slots: [McuMgrImageStateResponse.ImageSlot]) {
        let listsActive = slots.contains(where: \.active)
        switch plan.route {
        case .singleApplication where !listsActive:
            // Single-app given, and the device lists its slots without `active`: MCUboot's serial recovery
            // already answers (a reset from there would boot the application instead).
            device.bufferSize = nil
            device.bufferCount = 1
            plan.route = .serialRecovery(.singleApplication)
            report.notes.append("the device already answers from MCUboot's serial recovery: the image goes to slot 0 without another reset")
        case .serialRecovery(.singleApplication) where listsActive:
            // An application flags its running slot; MCUboot's serial recovery never does.
            fail("after the reset into the bootloader (boot_mode 1) the application answered again (its image list has an "
                + "active slot), not MCUboot's serial recovery. The application needs CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE and "
                + "MCUboot serial recovery with boot-mode entry (or enter recovery by hand), then run the upgrade again")
            return
        case .application where !listsActive && configuration.bootloaderMode == nil && device.bootloaderName == nil
            && device.mode == .unknown:
            takeSerialRecoveryRoute()
        default:
            break
        }
        var chosen: [Target] = []
        plan.skipped = []
        var numbers: [Int] = []
        for image in images where !numbers.contains(image.image) { numbers.append(image.image) }
        for number in numbers {
            let candidates = images.filter { $0.image == number }
            let listed = slots.filter { $0.image == number }
            if case .serialRecovery(let recovery) = plan.route {
                // MCUboot writes the primary slot; an image already there needs only the reset that boots it.
                let image = candidates.first { $0.slot == nil || $0.slot == 0 } ?? candidates[0]
                let present = listed.contains { $0.slot == 0 && $0.hash == image.hash }
                if present { plan.skipped.append(number) }
                if present, recovery == .singleApplication {
                    report.recoveryCheck = "MCUboot's serial recovery listed slot 0 with the package's hash (nothing to upload); "
                }
                chosen.append(Target(image: image, needsUpload: !present, write: nil, needsReset: true))
                continue
            }
            let active = Self.runningSlot(in: listed)
            // Already running?
            if let active, let running = candidates.first(where: { $0.hash == active.hash }) {
                plan.skipped.append(number)
                if !active.confirmed, wantsConfirm, plan.flow.writes != .none {
                    chosen.append(Target(image: running, needsUpload: false, write: .confirm(Array(running.hash)), needsReset: false))
                }
                continue
            }
            let image: FirmwareUpgradeImage
            let targetSlot: Int
            switch plan.flow.slots {
            case .inactive:
                let activeSlot = active?.slot ?? 0
                if let pick = candidates.first(where: { $0.slot != nil && $0.slot != activeSlot }) {
                    image = pick
                } else if let unknown = candidates.first(where: { $0.slot == nil }) {
                    // A bare image: RAM load copies it anywhere; Direct-XIP runs it in place.
                    image = unknown
                    if device.mode.isDirectXIP {
                        report.notes.append("image \(number): the package does not say which slot the build is linked for; it went to slot "
                            + "\(1 - activeSlot), where Direct-XIP runs it only if it is linked for that slot (the "
                            + "dfu_application.zip with both builds picks the right one)")
                    }
                } else {
                    fail("image \(number): the package only has the build for slot \(activeSlot), which is running; "
                        + "\(device.mode.detailedName) needs the build linked for slot \(1 - activeSlot) — use the package with both slots")
                    return
                }
                targetSlot = 1 - activeSlot
            case .secondary:
                image = candidates.first { $0.slot == nil || $0.slot == 0 } ?? candidates[0]
                targetSlot = 1
            case .primary:
                chosen.append(Target(image: candidates.first { $0.slot == nil || $0.slot == 0 } ?? candidates[0], needsUpload: true, write: nil, needsReset: true))
                continue
            }
            var target = Target(image: image, needsUpload: true, write: initialWrite(for: image), needsReset: true)
            if let other = listed.first(where: { $0.slot == targetSlot }) {
                if other.hash == image.hash {
                    target.needsUpload = false
                    plan.skipped.append(number)
                    if other.permanent {
                        if configuration.upgradeMode == .testOnly, plan.flow.writes == .asMode {
                            fail("image \(number) is already in slot \(targetSlot) and confirmed; it cannot be made test-only. "
                                + "Use confirmOnly, or reset the device to install it")
                            return
                        }
                        target.write = nil
                    } else if other.pending {
                        if case .test = target.write { target.write = nil }
                    }
                } else if other.confirmed || other.pending {
                    guard plan.resolutionsLeft > 0 else {
                        fail("image \(number): slot \(targetSlot) still holds another image marked "
                            + "\(other.confirmed ? "confirmed" : "pending"). Erase it (`smp image erase`) or reset the device, then run the upgrade again")
                        return
                    }
                    plan.resolutionsLeft -= 1
                    if other.confirmed, let runningHash = active?.hash, !runningHash.isEmpty {
                        // As ios-dm: confirm the running image so the confirmed secondary can be overwritten.
                        go(.resolvingSecondary)
                        request(.confirmImage(hash: Array(runningHash)))
                    } else if !configuration.performReset {
                        fail("image \(number): slot \(targetSlot) holds another image marked pending, and resets are off: "
                            + "reset the device (`smp os reset`) or erase the slot (`smp image erase`), then run the upgrade again")
                        return
                    } else {
                        // As ios-dm: reset so MCUboot boots the pending image, then validate again.
                        report.notes.append("image \(number): slot \(targetSlot) held another pending image; reset the device to clear it")
                        go(.reset(.resolveSecondary))
                        report.didReset = true
                        request(.reset(.normal))
                    }
                    return
                }
            }
            chosen.append(target)
        }
        plan.targets = chosen
        if plan.targets.isEmpty {
            succeed()
            return
        }
        if plan.targets.contains(where: \.needsUpload) {
            switch plan.route {
            case .firmwareLoader, .singleApplication: enterBootloader()
            case .application, .suit, .serialRecovery: startUpload(pipelineDepth: pipelineDepth)
            }
        } else {
            afterUpload()
        }
    }

    /// The slot an image runs from: the one flagged active; when none is (older Zephyr flags only the
    /// running application's image, so a network core's image has no active slot), its primary slot.
    static func runningSlot(in listed: [McuMgrImageStateResponse.ImageSlot]) -> McuMgrImageStateResponse.ImageSlot? {
        listed.first { $0.active } ?? listed.first { $0.slot == 0 }
    }

    var wantsConfirm: Bool {
        configuration.upgradeMode == .confirmOnly || configuration.upgradeMode == .testAndConfirm
    }

    mutating func initialWrite(for image: FirmwareUpgradeImage) -> Write? {
        let hash = Array(image.hash)
        switch (plan.flow.writes, configuration.upgradeMode) {
        case (.none, _), (_, .uploadOnly): return nil
        case (.confirmOnly, _), (.asMode, .confirmOnly): return .confirm(hash)
        case (.asMode, .testAndConfirm) where image.image != 0:
            // Zephyr refuses to confirm an image other than the running application's once it runs
            // (IMAGE_CONFIRMATION_DENIED unless CONFIG_MCUMGR_GRP_IMG_ALLOW_CONFIRM_NON_ACTIVE_IMAGE_ANY),
            // so it would revert on the next reset: confirm it now; the application image runs on trial.
            report.notes.append("image \(image.image) was confirmed before the reset: devices refuse to confirm it once it runs; "
                + "only the application image (0) was test-booted")
            return .confirm(hash)
        case (.asMode, .testAndConfirm), (.asMode, .testOnly): return .test(hash)
        }
    }

    /// The device already answers from serial recovery, with no mode known: route
    /// `.serialRecovery(.modeUnknown)`. An application always flags the slot it runs from `active`; MCUboot's
    /// serial recovery lists its slots without that flag (an empty list when it holds no image, as the mps2
    /// build without its application) and has no bootloader info: upload to the primary slot, no state
    /// writes, reset.
    mutating func takeSerialRecoveryRoute() {
        plan.route = .serialRecovery(.modeUnknown)
        plan.flow = Flow(slots: .primary, writes: .none, swapWait: false)
        report.notes.append("the device answers from MCUboot's serial recovery (no application runs: no bootloader info, "
            + "no active slot): the image goes to slot 0 (the primary slot) with no test or confirm, which "
            + "MCUboot does not have; the reset boots it")
        if configuration.upgradeMode == .testOnly || configuration.upgradeMode == .testAndConfirm {
            report.notes.append("serial recovery cannot test-boot an image: the new image is permanent once it boots")
        }
    }

    /// Firmware-loader route: the application cannot write its own slot, so the device reboots into the
    /// loader (os reset with boot_mode 1: zephyr os_mgmt `_OS_RESET_BOOT_MODE`; Nordic's iOS library's
    /// `resetIntoFirmwareLoader`), after storing the name the loader advertises when one is configured.
    /// Single-application route: an application that listed its slots reboots the same way into serial recovery.
    mutating func enterBootloader() {
        if plan.route == .firmwareLoader, let name = configuration.firmwareLoaderName {
            go(.namingLoader)
            request(.setFirmwareLoaderName(name))
        } else {
            go(.reset(.enterBootloader))
            request(.reset(.bootloader))
        }
    }

    /// Single-application route: reboot into serial recovery (boot_mode 1); the reconnect reads its image list.
    mutating func resetIntoRecovery() {
        if configuration.upgradeMode == .testOnly || configuration.upgradeMode == .testAndConfirm {
            report.notes.append("single-application MCUboot cannot test-boot an image: the new image is permanent once it boots")
        }
        go(.reset(.enterBootloader))
        request(.reset(.bootloader))
    }
}
