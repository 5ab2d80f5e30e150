/// From the upload on: serial recovery's check of slot 0, the state writes, the install reset, and the
/// image list that shows the device runs the new images.
extension FirmwareUpgradeStateMachine {
    /// The link's window for the device's buffers (one buffer when it did not say, unless a depth was
    /// asked for) and the configuration's `pipelineDepth` (`LinkLimits.refined`).
    var pipelineDepth: Int {
        let wanted = configuration.pipelineDepth
        let refined = link.refined(
            deviceBufferSize: device.bufferSize, deviceBufferCount: device.bufferCount ?? (wanted == nil ? 1 : nil), requestedWindow: wanted)
        return refined.window(forPacket: refined.packetSize)
    }

    mutating func startUpload(pipelineDepth: Int) {
        let uploads = plan.targets.filter(\.needsUpload).map(\.image)
        go(.upload(remaining: uploads.map(\.image)))
        out.append(.upload(uploads, pipelineDepth: pipelineDepth, bufferSize: device.bufferSize))
    }

    /// After the upload (or with nothing to upload): serial recovery's check, the settings erase, then the
    /// end (upload only, SUIT), the reset (primary slot) or the state writes.
    mutating func afterUpload() {
        if plan.route == .serialRecovery(.singleApplication), report.recoveryCheck == nil, plan.targets.contains(where: \.needsUpload) {
            // The application cannot show its hash: read it from serial recovery before the reset.
            go(.checkingRecovery)
            request(.requestImageList)
            return
        }
        if configuration.eraseAppSettings, !report.settingsErased, plan.targets.contains(where: \.needsUpload) {
            go(.eraseSettings)
            request(.eraseAppSettings)
            return
        }
        if configuration.upgradeMode == .uploadOnly || plan.route == .suit {
            // Only SUIT gets here without uploadOnly.
            switch plan.route {
            case .serialRecovery:
                report.notes.append("the device stays in serial recovery until it is reset (`smp os reset`), then boots the new image")
            case .firmwareLoader, .singleApplication:
                report.notes.append("the device stays in its firmware loader until it is reset (`smp os reset`), then runs the new image")
            case .application, .suit:
                break
            }
            succeed()
            return
        }
        if plan.flow.slots == .primary, plan.route.entersBootloaderFirst || plan.targets.contains(where: \.needsUpload) {
            // Firmware loader / single slot: the upload went straight to the primary slot.
            guard configuration.performReset else {
                report.notes.append("not reset: the device starts the new image on its next reset")
                succeed()
                return
            }
            go(.reset(.install))
            report.didReset = true
            request(.reset(.normal))
            return
        }
        let writes = plan.targets.compactMap(\.write)
        if writes.isEmpty {
            afterWrites()
        } else {
            go(.writing(writes))
            request(action(for: writes[0]))
        }
    }

    /// Serial recovery's image list after the upload: slot 0 should hold the uploaded hash. Another hash
    /// there fails the upgrade. No image listed is tolerated: the real MCUboot (mps2 build under QEMU), when
    /// it started without a bootable image, lists nothing in slot 0 right after a recovery upload (entered
    /// from its application with boot_mode 1 it lists the new hash), and a reset boots the image all the
    /// same; the check then rests on the application answering after the reset.
    mutating func checkRecovery(_ slots: [McuMgrImageStateResponse.ImageSlot]) {
        var checked: [String] = []
        var unlisted: [Int] = []
        for target in plan.targets where target.needsUpload {
            let number = target.image.image
            guard let slot0 = slots.first(where: { $0.image == number && $0.slot == 0 }), let slot0Hash = slot0.hash,
                !slot0Hash.isEmpty
            else {
                unlisted.append(number)
                continue
            }
            guard slot0Hash == target.image.hash else {
                fail("after the upload MCUboot's serial recovery lists slot 0 of image \(number) with another hash "
                    + "(\(Self.hex(slot0Hash))), not the uploaded one: the upload did not check out. Check the image is built "
                    + "and signed for this board, then run the upgrade again")
                return
            }
            checked.append("image \(number): \(Self.hex(target.image.hash))")
        }
        var text = ""
        if !checked.isEmpty {
            text = "before the reset MCUboot's serial recovery listed slot 0 with the uploaded hash (" + checked.joined(separator: ", ") + "); "
        }
        if !unlisted.isEmpty {
            let which = unlisted.map { "image \($0)" }.joined(separator: ", ")
            text += "serial recovery listed no image in slot 0 of \(which) right after the upload (MCUboot may list it only "
                + "after a reboot), so that hash was not read back; "
            report.notes.append("MCUboot's serial recovery did not list the uploaded image right after the upload; the hash was not read back")
        }
        report.recoveryCheck = text
        afterUpload()
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.lowercaseHex }

    /// After the state writes: the install reset when an image needs one and resets are on.
    mutating func afterWrites() {
        if plan.targets.contains(where: \.needsReset), !configuration.performReset {
            report.notes.append("not reset: the device installs the new images on its next reset")
            succeed()
        } else if plan.targets.contains(where: \.needsReset) {
            go(.reset(.install))
            report.didReset = true
            request(.reset(.normal))
        } else {
            succeed()
        }
    }

    /// The image list after the install reset: each image must run the new hash; testAndConfirm then
    /// confirms what runs on trial.
    mutating func verify(_ slots: [McuMgrImageStateResponse.ImageSlot]) {
        if case .serialRecovery = plan.route, !slots.contains(where: \.active), case .verifying(let deadline, _, _) = state {
            // Still (or again) in serial recovery: MCUboot has not booted the image yet, or refused it.
            if lastNow < deadline {
                let at = min(lastNow + configuration.retryInterval, deadline)
                state = .verifying(deadline: deadline, retryAt: at, recoveryAnswered: true)
                out.append(.waitUntil(at))
            } else {
                failStillInRecovery()
            }
            return
        }
        var toConfirm: [[UInt8]] = []
        for target in plan.targets where target.needsReset {
            let number = target.image.image
            let listed = slots.filter { $0.image == number }
            if listed.isEmpty {
                report.notes.append("image \(number) is not in the device's image list after the reset; its installation could not be checked")
                continue
            }
            guard let running = Self.runningSlot(in: listed), running.hash == target.image.hash else {
                let slotHint = plan.flow.slots == .inactive ? target.image.slot.map { "slot \($0)" } ?? "the slot it went to" : "this slot"
                fail("image \(number): the device booted the old image: the new one was rejected by MCUboot — "
                    + "check the signing key / image for \(slotHint)"
                    + (device.mode == .directXIPWithoutRevert ? " (Direct-XIP boots the higher version: check the new version is higher)" : ""))
                return
            }
            switch (plan.flow.writes, configuration.upgradeMode) {
            case (.asMode, .testAndConfirm):
                if !running.confirmed { toConfirm.append(Array(target.image.hash)) }
            case (.asMode, .testOnly):
                if running.confirmed {
                    report.notes.append("image \(number) is already confirmed after the test boot (the application may confirm itself)")
                }
            case (.asMode, .confirmOnly), (.confirmOnly, _):
                if !running.confirmed {
                    fail("image \(number) runs but is not confirmed: MCUboot will revert it on the next reset. "
                        + "Confirm it with `smp image confirm`")
                    return
                }
            default:
                break
            }
        }
        if plan.route == .serialRecovery(.singleApplication) {
            report.verified = (report.recoveryCheck ?? "") + "after the reset the application's image list shows the uploaded hash running"
        }
        if toConfirm.isEmpty {
            succeed()
        } else {
            go(.confirmingAfterReset(toConfirm))
            request(.confirmImage(hash: toConfirm[0]))
        }
    }

    /// The action that reaches the device after a reset for `purpose`: the firmware loader after the reset
    /// into it (firmware-loader route), the application otherwise (serial recovery answers like the
    /// application: on the same port, and MCUboot's serial recovery has no Bluetooth).
    func reconnectAction(_ purpose: ResetPurpose) -> Action {
        switch (purpose, plan.route) {
        case (.enterBootloader, .firmwareLoader): .reconnectToFirmwareLoader(name: configuration.firmwareLoaderName)
        default: .reconnect
        }
    }

    mutating func failStillInRecovery() {
        fail("the device is still in MCUboot's serial recovery after the reset (its image list has no active slot): MCUboot did "
            + "not boot the new image. Check that it is signed with the key MCUboot expects and built for this board")
    }

    mutating func failNotBack() {
        if case .verifying(_, _, recoveryAnswered: true) = state {
            failStillInRecovery()
            return
        }
        let seconds = Int(configuration.reconnectTimeout.seconds.rounded())
        if case .reconnecting(_, _, .enterBootloader) = state, plan.route == .firmwareLoader {
            let name = configuration.firmwareLoaderName.map { " (advertising \"\($0)\" over Bluetooth LE)" } ?? ""
            fail("the firmware loader\(name) did not answer within \(seconds) s after the reset into it (boot_mode 1): check that "
                + "the application resets into the loader (CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE and MCUboot's firmware "
                + "loader entrance by boot mode), give the name the loader advertises with --loader-name, or raise the "
                + "reconnect timeout")
            return
        }
        fail("the device did not come back within \(seconds) s after the reset: check it is powered and on the same "
            + "port or address; if the swap takes longer, raise estimatedSwapTime or the reconnect timeout")
    }
}
