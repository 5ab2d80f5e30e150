import McuMgrCore

/// The flash image slots of every updatable image, with the MCUboot trailer of each slot, and what the
/// bootloader does with them at boot in each mode (PROTOCOL.md 3.2; Zephyr img_mgmt_state.c, MCUboot
/// loader.c):
///
/// - swap (scratch, move, offset): test → reset swaps → runs unconfirmed → reset without confirm reverts;
///   permanent (confirm) → swapped for good.
/// - overwrite only: test or confirm → reset copies the secondary slot over the primary, confirmed; the
///   secondary slot is empty afterwards; never a revert.
/// - Direct-XIP: the higher version boots in place (ties: the lower slot); no state write.
/// - Direct-XIP with revert: the higher version boots only if marked (test or confirm); a tested slot
///   boots once, and a reset without confirm erases it and boots the other slot.
/// - RAM load: the higher version boots (copied to RAM); the trailers are ignored (no revert).
/// - firmware loader: slot 0 holds the application, slot 1 the loader image; no pending or confirmed.
struct ImageBank: Sendable {
    typealias Mode = SimulatedBootloader.Mode

    /// A valid image in a slot.
    struct SlotImage: Sendable {
        var bytes: [UInt8]
        var info: SimulatedMCUbootImage.Info
    }

    /// The MCUboot image trailer of a slot: `magic` (marked for boot), `image_ok`, `copy_done`.
    struct Trailer: Sendable, Hashable {
        var magic = false
        var imageOK = false
        var copyDone = false

        /// What a flashed, confirmed image carries.
        static let confirmed = Trailer(magic: true, imageOK: true, copyDone: true)
    }

    struct Slot: Sendable {
        var image: SlotImage?
        var trailer = Trailer()
    }

    /// Zephyr's `IMG_MGMT_SWAP_TYPE_*` (MCUboot's `BOOT_SWAP_TYPE_*`) for swap and overwrite modes.
    enum SwapType: Sendable, Hashable {
        case none, test, permanent, revert
    }

    /// Zephyr's `enum img_mgmt_next_boot_type`.
    enum NextBootType: Sendable, Hashable {
        case normal, test, revert
    }

    /// The two slots of one image and which of them runs.
    struct Pair: Sendable {
        var slots: [Slot]
        var activeSlot = 0

        var primary: SlotImage? {
            get { slots[0].image }
            set { slots[0].image = newValue }
        }
        var secondary: SlotImage? {
            get { slots[1].image }
            set { slots[1].image = newValue }
        }
        var otherSlot: Int { 1 - activeSlot }
    }

    /// The image upload session (PROTOCOL.md 4.2). RAM only: a reset discards it, as in Zephyr.
    struct UploadSession: Sendable {
        var image: Int
        var slot: Int
        var length: Int
        var sha: [UInt8]
        var data: [UInt8]
        var offset: Int { data.count }
    }

    let mode: Mode
    var pairs: [Pair]
    var upload: UploadSession?
    let slotSize: Int
    let slotBaseAddress: UInt32

    init(configuration: SimulatorConfiguration) {
        mode = configuration.bootloader.mode
        slotSize = configuration.imageSlotSize
        slotBaseAddress = configuration.imageSlotBaseAddress
        pairs = (0..<max(1, configuration.imageCount)).map { index in
            let bytes = Self.initialImage(
                version: configuration.appVersion, seed: 0x1234_5678 &+ UInt32(index),
                size: configuration.initialImageBodySize)
            let info = try! SimulatedMCUbootImage.parse(bytes, verifyHash: true)
            var pair = Pair(slots: [Slot(image: SlotImage(bytes: bytes, info: info), trailer: .confirmed), Slot()])
            if configuration.bootloader.mode == .firmwareLoader && index == 0 {
                // The firmware loader image lives in slot 1.
                let loader = Self.initialImage(
                    version: McuMgrImageVersion(major: 1, minor: 0, revision: 0), seed: 0x4C4F_4144, size: configuration.initialImageBodySize / 2)
                pair.slots[1] = Slot(
                    image: SlotImage(bytes: loader, info: try! SimulatedMCUbootImage.parse(loader, verifyHash: true)),
                    trailer: .confirmed)
            }
            return pair
        }
    }

    private static func initialImage(version: McuMgrImageVersion, seed: UInt32, size: Int) -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(size)
        var x = seed
        for _ in 0..<size {
            x = x &* 1_664_525 &+ 1_013_904_223
            body.append(UInt8(x >> 24))
        }
        return SimulatedMCUbootImage.build(version: version, body: body)
    }

    var imageCount: Int { pairs.count }

    func slot(_ image: Int, _ slot: Int) -> SlotImage? { pairs[image].slots[slot].image }

    func activeSlot(of image: Int) -> Int { pairs[image].activeSlot }

    /// The flash address of a slot.
    func address(image: Int, slot: Int) -> UInt32 {
        slotBaseAddress &+ UInt32(truncatingIfNeeded: (image * 2 + slot) * slotSize)
    }

    /// Whether MCUboot would consider the image in a slot at all: present, bootable, and (for a ROM-fixed
    /// build in a Direct-XIP mode) linked for this slot's address.
    func isBootable(image: Int, slot: Int) -> Bool {
        guard let content = self.slot(image, slot), content.info.bootable else { return false }
        if mode == .directXIP || mode == .directXIPWithRevert, content.info.romFixed {
            return content.info.loadAddress == address(image: image, slot: slot)
        }
        return true
    }

    // MARK: Next boot (Zephyr img_mgmt_get_next_boot_slot)

    /// MCUboot's swap type for an image in the swap and overwrite modes.
    func swapType(of image: Int) -> SwapType {
        let pair = pairs[image]
        let primary = pair.slots[0]
        let secondary = pair.slots[1]
        if secondary.image != nil && secondary.trailer.magic {
            return secondary.trailer.imageOK ? .permanent : .test
        }
        if primary.trailer.magic && primary.trailer.copyDone && !primary.trailer.imageOK { return .revert }
        return .none
    }

    /// Direct-XIP-with-revert slot state (Zephyr `read_directxip_state`).
    private enum DirectXIPState { case unset, once, revert, forever }

    private func directXIPState(_ trailer: Trailer) -> DirectXIPState {
        guard trailer.magic else { return .unset }
        if trailer.imageOK { return .forever }
        return trailer.copyDone ? .revert : .once
    }

    /// The slot that boots on the next reset and how.
    func nextBoot(of image: Int) -> (slot: Int, type: NextBootType) {
        let pair = pairs[image]
        let active = pair.activeSlot
        let other = pair.otherSlot
        switch mode {
        case .swapUsingScratch, .swapUsingMove, .swapUsingOffset, .overwriteOnly, .singleApplication:
            switch swapType(of: image) {
            case .none: return (active, .normal)
            case .test: return (other, .test)
            case .permanent: return (other, .normal)
            case .revert: return (other, .revert)
            }
        case .directXIP, .ramLoad:
            if let a = pair.slots[active].image, let o = pair.slots[other].image, a.info.version.isOlderIgnoringBuild(than: o.info.version) {
                return (other, .normal)
            }
            return (active, .normal)
        case .directXIPWithRevert:
            guard let a = pair.slots[active].image, let o = pair.slots[other].image else { return (active, .normal) }
            let activeState = directXIPState(pair.slots[active].trailer)
            let otherState = directXIPState(pair.slots[other].trailer)
            if activeState == .revert { return (other, .revert) }
            if otherState == .unset { return (active, activeState == .once ? .test : .normal) }
            if a.info.version.isOlderIgnoringBuild(than: o.info.version) {
                if otherState == .forever { return (other, .normal) }
                if otherState == .once { return (other, .test) }
            }
            return (active, .normal)
        case .firmwareLoader:
            return (active, .normal)
        }
    }

    /// The image-list flags of a slot (Zephyr `img_mgmt_state_read`): the active slot is active and,
    /// unless a revert is due, confirmed; the other slot is pending (+ permanent) when it boots next, or
    /// confirmed when a revert will bring it back.
    func flags(image: Int, slot: Int) -> (pending: Bool, confirmed: Bool, active: Bool, permanent: Bool) {
        let active = pairs[image].activeSlot
        let (next, type) = nextBoot(of: image)
        if slot == active { return (false, type != .revert, true, false) }
        guard next != active else { return (false, false, false, false) }
        switch type {
        case .normal: return (true, false, false, true)
        case .revert: return (false, true, false, false)
        case .test: return (true, false, false, false)
        }
    }

    /// Whether a slot may not be erased or uploaded to (Zephyr `img_mgmt_slot_in_use`): the active slot,
    /// and in the swap modes the slot a test, permanent or revert boot will use.
    func inUse(image: Int, slot: Int, allowErasePending: Bool = false) -> Bool {
        let active = pairs[image].activeSlot
        if slot == active { return true }
        switch mode {
        case .directXIP, .ramLoad, .firmwareLoader:
            return false
        default:
            let (next, type) = nextBoot(of: image)
            if slot == next && type == .revert { return true }
            // Zephyr's img_mgmt_slot_in_use: a slot pending (test, or permanent) is refused unless
            // CONFIG_MCUMGR_GRP_IMG_ALLOW_ERASE_PENDING.
            if (slot == next && type == .test) || (active != next && type == .normal) { return !allowErasePending }
            return false
        }
    }

    /// Finds the slot holding an image with this hash.
    func find(hash: [UInt8]) -> (image: Int, slot: Int)? {
        for image in pairs.indices {
            for slot in 0..<2 where self.slot(image, slot)?.info.hash == hash { return (image, slot) }
        }
        return nil
    }

    /// The slot an upload of `image` goes to (Zephyr `img_mgmt_get_unused_slot_area_id`): the slot that is
    /// not active, if not in use; nil = NO_FREE_SLOT.
    func uploadSlot(for image: Int) -> Int? {
        // Firmware-loader mode: the running application cannot write its own slot nor the loader's
        // (a guess; NCS updates the application from the loader, reached by a reset with boot_mode 1).
        if mode == .firmwareLoader && image == 0 && pairs[0].activeSlot == 0 { return nil }
        let other = pairs[image].otherSlot
        return inUse(image: image, slot: other) ? nil : other
    }

    // MARK: State write

    /// Marks a slot for test or permanent boot, or confirms the running image (PROTOCOL.md 3.2; Zephyr
    /// `img_mgmt_set_next_boot_slot`). Returns the image-group error code, or nil on success.
    mutating func setState(hash: [UInt8]?, confirm: Bool, allowConfirmNonActiveAny: Bool) -> Int? {
        let image: Int
        let slot: Int
        if let hash {
            guard hash.count == 32 else { return 24 }  // INVALID_HASH
            guard let found = find(hash: hash) else { return 8 }  // HASH_NOT_FOUND
            (image, slot) = found
        } else {
            guard confirm else { return 24 }  // INVALID_HASH
            (image, slot) = (0, pairs[0].activeSlot)
        }
        let active = pairs[image].activeSlot
        if mode == .directXIPWithRevert {
            if slot == active && !confirm { return 33 }  // IMAGE_SETTING_TEST_TO_ACTIVE_DENIED
            setNext(image: image, slot: slot, confirm: confirm)
            return nil
        }
        let (next, type) = nextBoot(of: image)
        // Confirming a slot of another image than the running one: the secondary slot is allowed
        // (`_ALLOW_CONFIRM_NON_ACTIVE_IMAGE_SECONDARY`, default y), the active slot only with `_ANY`.
        if confirm && image != 0 && slot == active && !allowConfirmNonActiveAny { return 32 }  // CONFIRMATION_DENIED
        if !confirm && slot == active { return 33 }
        switch type {
        case .test:
            if !confirm && slot == next { return nil }
            return 28  // IMAGE_ALREADY_PENDING
        case .normal:
            if confirm && slot == next { return nil }
            if (slot == active && active != next) || (!confirm && slot != active && slot == next) { return 28 }
        case .revert:
            if confirm && slot == next { return nil }
            if !confirm { return 28 }
        }
        setNext(image: image, slot: slot, confirm: confirm)
        return nil
    }

    /// MCUboot `boot_set_next`: confirm the active slot, or mark another for test or permanent boot.
    private mutating func setNext(image: Int, slot: Int, confirm: Bool) {
        if slot == pairs[image].activeSlot {
            pairs[image].slots[slot].trailer.magic = true
            pairs[image].slots[slot].trailer.imageOK = true
        } else {
            pairs[image].slots[slot].trailer = Trailer(magic: true, imageOK: confirm, copyDone: false)
        }
    }

    // MARK: Reset

    /// What MCUboot does at boot. Returns whether it moved image data (swap, revert or overwrite copy),
    /// which takes `swapTime`.
    @discardableResult
    mutating func boot() -> Bool {
        upload = nil
        var moved = false
        for index in pairs.indices {
            switch mode {
            case .swapUsingScratch, .swapUsingMove, .swapUsingOffset, .singleApplication:
                moved = bootSwap(index) || moved
            case .overwriteOnly:
                moved = bootOverwrite(index) || moved
            case .directXIP, .ramLoad:
                bootHighestVersion(index, revert: false)
            case .directXIPWithRevert:
                bootHighestVersion(index, revert: true)
            case .firmwareLoader:
                pairs[index].activeSlot = 0
            }
        }
        return moved
    }

    private mutating func bootSwap(_ index: Int) -> Bool {
        var pair = pairs[index]
        defer { pairs[index] = pair }
        switch swapType(of: index) {
        case .test, .permanent:
            guard isBootable(image: index, slot: 1) else {
                pair.slots[1].trailer = Trailer()
                return false
            }
            let permanent = pair.slots[1].trailer.imageOK
            pair.slots.swapAt(0, 1)
            pair.slots[0].trailer = Trailer(magic: true, imageOK: permanent, copyDone: true)
            pair.slots[1].trailer = Trailer()
            return true
        case .revert:
            pair.slots.swapAt(0, 1)
            pair.slots[0].trailer = .confirmed
            pair.slots[1].trailer = Trailer()
            return true
        case .none:
            return false
        }
    }

    private mutating func bootOverwrite(_ index: Int) -> Bool {
        guard swapType(of: index) == .test || swapType(of: index) == .permanent else { return false }
        guard isBootable(image: index, slot: 1) else {
            pairs[index].slots[1].trailer = Trailer()
            return false
        }
        pairs[index].slots[0] = Slot(image: pairs[index].slots[1].image, trailer: .confirmed)
        pairs[index].slots[1] = Slot()
        return true
    }

    /// Direct-XIP and RAM load (MCUboot `boot_load_and_validate_images`): the highest version among the
    /// bootable slots; with revert, a slot that is not marked, or was tried once and not confirmed, is
    /// erased and the next candidate tried.
    private mutating func bootHighestVersion(_ index: Int, revert: Bool) {
        var available = (0..<2).filter { isBootable(image: index, slot: $0) }
        while true {
            var candidate: Int?
            for slot in available {
                if let c = candidate, !self.slot(index, c)!.info.version.isOlderIgnoringBuild(than: self.slot(index, slot)!.info.version) {
                    continue
                }
                candidate = slot
            }
            guard let chosen = candidate else { return }  // nothing bootable: stay as we are
            if revert {
                let trailer = pairs[index].slots[chosen].trailer
                if !trailer.magic || (trailer.copyDone && !trailer.imageOK) {
                    pairs[index].slots[chosen] = Slot()
                    available.removeAll { $0 == chosen }
                    continue
                }
                pairs[index].slots[chosen].trailer.copyDone = true
            }
            pairs[index].activeSlot = chosen
            return
        }
    }

    // MARK: Erase

    /// Erases an absolute slot (image × 2 + slot). Returns the image-group error code, or nil.
    mutating func erase(absoluteSlot: Int, allowErasePending: Bool = false) -> Int? {
        let image = absoluteSlot / 2
        let slot = absoluteSlot % 2
        guard image < pairs.count else { return 14 }  // INVALID_SLOT
        if inUse(image: image, slot: slot, allowErasePending: allowErasePending) { return 9 }  // NO_FREE_SLOT
        pairs[image].slots[slot] = Slot()
        if upload?.image == image && upload?.slot == slot { upload = nil }
        return nil
    }

    /// Stores a completed upload in a slot, unmarked.
    mutating func store(_ content: SlotImage, image: Int, slot: Int) {
        pairs[image].slots[slot] = Slot(image: content)
    }
}
