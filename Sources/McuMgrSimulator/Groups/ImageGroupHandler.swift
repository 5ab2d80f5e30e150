import McuMgrCore

/// Image group (1): state read/write, upload, erase, slot info (PROTOCOL.md 3.2, 4).
extension DeviceState {
    mutating func handleImage(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        if suit != nil { return try handleSUITImage(request) }
        // Zephyr builds no image group into an application under MCUboot's single-application mode
        // (MCUMGR_GRP_IMG depends on !MCUBOOT_BOOTLOADER_MODE_SINGLE_APP): images are uploaded through
        // MCUboot's serial recovery (reset with boot mode 1) only.
        if configuration.bootloader.mode == .singleApplication && runMode == .application { throw .notSupported }
        switch request.command.rawValue {
        case 0: return request.isRead ? imageList() : try imageStateWrite(request)
        case 1: return try imageUpload(request)
        case 5: return try imageErase(request)
        case 6: return slotInfo()
        default: throw .notSupported
        }
    }

    func imageList() -> SimulatedOutcome {
        var list: [CBOR] = []
        for image in 0..<images.imageCount {
            for slot in 0..<2 {
                guard let content = images.slot(image, slot) else { continue }
                let f = images.flags(image: image, slot: slot)
                var entries: [CBORMapEntry] = []
                if images.imageCount > 1 { entries.append("image", .unsigned(UInt64(image))) }
                entries.append("slot", .unsigned(UInt64(slot)))
                entries.append("version", .text(content.info.version.imageListText))
                entries.append("hash", .bytes(content.info.hash))
                entries.append("bootable", .bool(content.info.bootable))
                entries.append("pending", .bool(f.pending))
                entries.append("confirmed", .bool(f.confirmed))
                entries.append("active", .bool(f.active))
                entries.append("permanent", .bool(f.permanent))
                list.append(.map(entries))
            }
        }
        return .ok(["images": .array(list), "splitStatus": 0])
    }

    private mutating func imageStateWrite(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        // Direct-XIP without revert has no state-write handler (PROTOCOL.md gotcha 12), nor has a build
        // configured without one (the shared mps2_an385 RAM-load app: rc 8). The firmware-loader
        // mode has no pending or confirmed state either (a guess: NCS documents no state write for it).
        if images.mode == .directXIP || images.mode == .firmwareLoader || !configuration.imageStateWrite {
            throw .notSupported
        }
        let fields = try request.decodedFields()
        let hash = try fields.bytes("hash")
        let confirm = try fields.bool("confirm") ?? false
        if let rc = images.setState(
            hash: hash, confirm: confirm, allowConfirmNonActiveAny: configuration.allowConfirmNonActiveImageAny)
        {
            throw .group(.image, rc)
        }
        return imageList()
    }

    private mutating func imageUpload(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.decodedFields()
        let offset = try fields.count("off")
        let data = try fields.bytes("data") ?? []
        let length = try fields.count("len")
        let image = try fields.count("image") ?? 0
        let sha = try fields.bytes("sha")
        let upgrade = try fields.bool("upgrade") ?? false

        // Any error resets the session.
        func fail(_ rc: Int) -> SimulatorFault {
            images.upload = nil
            return .group(.image, rc)
        }
        guard let offset else { throw fail(20) }  // INVALID_OFFSET

        if offset == 0 {
            guard data.count >= 32 else { throw fail(22) }  // INVALID_IMAGE_HEADER
            guard let length else { throw fail(21) }  // INVALID_LENGTH
            let magic = UInt32(data[0]) | UInt32(data[1]) << 8 | UInt32(data[2]) << 16 | UInt32(data[3]) << 24
            guard magic == SimulatedMCUbootImage.magic || magic == SimulatedMCUbootImage.legacyMagic else {
                throw fail(23)  // INVALID_IMAGE_HEADER_MAGIC
            }
            if let sha, sha.count > 32 { throw fail(24) }  // INVALID_HASH
            // Resume (Zephyr img_mgmt_upload_inspect): a session in progress with the same `sha` (any
            // length > 0) answers where it stands, without writing.
            if let sha, !sha.isEmpty, let session = images.upload, session.sha == sha {
                return .ok(["off": .unsigned(UInt64(session.offset))])
            }
            // A single-image build ignores `image` (img_mgmt with UPDATABLE_IMAGE_NUMBER 1 always picks the
            // unused slot of image 0; images 1 and 2 accepted on the shared QEMU builds).
            let image = images.imageCount == 1 ? 0 : image
            guard image < images.imageCount, let slot = images.uploadSlot(for: image) else {
                throw fail(9)  // NO_FREE_SLOT
            }
            guard length <= images.slotSize else { throw fail(30) }  // INVALID_IMAGE_TOO_LARGE
            if upgrade, let running = images.slot(image, images.activeSlot(of: image))?.info.version {
                let new = McuMgrImageVersion(major: data[20], minor: data[21], revision: UInt16(data[22]) | UInt16(data[23]) << 8)
                if !running.isOlderIgnoringBuild(than: new) { throw fail(27) }  // CURRENT_VERSION_IS_NEWER
            }
            guard data.count <= length else { throw fail(31) }  // INVALID_IMAGE_DATA_OVERRUN
            // Image check (CONFIG_IMG_ENABLE_IMAGE_CHECK): the slot already holds exactly this file.
            if configuration.imageCheck, let sha, sha.count == 32, let present = images.slot(image, slot), present.bytes.count == length,
                Array(SHA256.hash(data: present.bytes)) == sha
            {
                images.upload = nil
                return .ok(["off": .unsigned(UInt64(length)), "match": true])
            }
            // Start a session: the target slot is erased.
            images.pairs[image].slots[slot] = ImageBank.Slot()
            var buffer: [UInt8] = []
            buffer.reserveCapacity(length)
            buffer.append(contentsOf: data)
            images.upload = ImageBank.UploadSession(image: image, slot: slot, length: length, sha: sha ?? [], data: buffer)
        } else {
            guard let session = images.upload, session.offset == offset else {
                // Out of order: success carrying the offset the device expects; data dropped.
                return .ok(["off": .unsigned(UInt64(images.upload?.offset ?? 0))])
            }
            guard offset + data.count <= session.length else { throw fail(31) }  // DATA_OVERRUN
            images.upload!.data.append(contentsOf: data)
        }

        let session = images.upload!
        guard session.offset == session.length else {
            return .ok(["off": .unsigned(UInt64(session.offset))])
        }
        // Complete: the image must parse; it then lies in the target slot, unmarked.
        images.upload = nil
        let info: SimulatedMCUbootImage.Info
        do {
            info = try SimulatedMCUbootImage.parse(session.data, verifyHash: configuration.verifyUploadedImageHash)
        } catch {
            throw fail(error.rc)
        }
        images.store(ImageBank.SlotImage(bytes: session.data, info: info), image: session.image, slot: session.slot)
        var entries: [CBORMapEntry] = .entries(["off": .unsigned(UInt64(session.length))])
        if configuration.imageCheck, session.sha.count == 32 {
            entries.append("match", .bool(Array(SHA256.hash(data: session.data)) == session.sha))
        }
        return .success(entries)
    }

    private mutating func imageErase(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        // Default: the slot opposite the active one of image 0 (Zephyr img_mgmt_get_other_slot).
        let slot = try request.decodedFields().count("slot") ?? images.pairs[0].otherSlot
        if let rc = images.erase(absoluteSlot: slot, allowErasePending: configuration.allowErasePending) {
            throw .group(.image, rc)
        }
        return .empty
    }

    /// Zephyr's slot info: every slot's size; the slot an upload of that image goes to also carries
    /// `upload_image_id` (the `image` to upload with; the inactive slot); `max_image_size` only where configured.
    private func slotInfo() -> SimulatedOutcome {
        let list: [CBOR] = (0..<images.imageCount).map { image in
            let uploadSlot = images.pairs[image].otherSlot
            var entries: [CBORMapEntry] = .entries([
                "image": .unsigned(UInt64(image)),
                "slots": .array((0..<2).map { slot in
                    var slotEntries: [CBORMapEntry] = .entries([
                        "slot": .unsigned(UInt64(slot)), "size": .unsigned(UInt64(images.slotSize)),
                    ])
                    if slot == uploadSlot { slotEntries.append("upload_image_id", .unsigned(UInt64(image))) }
                    return .map(slotEntries)
                }),
            ])
            if configuration.slotInfoMaxImageSize {
                entries.append("max_image_size", .unsigned(UInt64(images.slotSize)))
            }
            return .map(entries)
        }
        return .ok(["images": .array(list)])
    }
}
