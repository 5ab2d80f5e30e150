import Crypto
import McuMgrCore

/// The flash image slots of every updatable image and MCUboot's swap state (swap using scratch / move):
/// test → reset → runs unconfirmed → reset without confirm → reverted; permanent → swapped confirmed.
struct ImageBank: Sendable {
    /// A valid image in a slot.
    struct SlotImage: Sendable {
        var bytes: [UInt8]
        var info: SimulatedMCUbootImage.Info
    }

    enum Pending: Sendable, Hashable {
        case none, test, permanent
    }

    /// Zephyr's `IMG_MGMT_SWAP_TYPE_*` for an image.
    enum SwapType: Sendable, Hashable {
        case none, test, permanent, revert
    }

    /// The two slots of one image.
    struct Pair: Sendable {
        var primary: SlotImage?
        var secondary: SlotImage?
        var pending: Pending = .none
        /// MCUboot's `image_ok` for the primary slot; false after a test swap until confirmed.
        var primaryConfirmed = true

        var swapType: SwapType {
            switch pending {
            case .test: return .test
            case .permanent: return .permanent
            case .none: return !primaryConfirmed && secondary != nil ? .revert : .none
            }
        }
    }

    /// The image upload session (PROTOCOL.md 4.2).
    struct UploadSession: Sendable {
        var image: Int
        var length: Int
        var sha: [UInt8]
        var data: [UInt8]
        var offset: Int { data.count }
    }

    var pairs: [Pair]
    var upload: UploadSession?
    let slotSize: Int

    init(configuration: SimulatorConfiguration) {
        slotSize = configuration.imageSlotSize
        pairs = (0..<max(1, configuration.imageCount)).map { index in
            var body: [UInt8] = []
            body.reserveCapacity(configuration.initialImageBodySize)
            var x: UInt32 = 0x1234_5678 &+ UInt32(index)
            for _ in 0..<configuration.initialImageBodySize {
                x = x &* 1_664_525 &+ 1_013_904_223
                body.append(UInt8(x >> 24))
            }
            let bytes = SimulatedMCUbootImage.build(version: configuration.appVersion, body: body)
            let info = try! SimulatedMCUbootImage.parse(bytes, verifyHash: true)
            return Pair(primary: SlotImage(bytes: bytes, info: info))
        }
    }

    var imageCount: Int { pairs.count }

    func slot(_ image: Int, _ slot: Int) -> SlotImage? {
        slot == 0 ? pairs[image].primary : pairs[image].secondary
    }

    /// Zephyr's state flags for a slot (img_mgmt_state.c `img_mgmt_state_flags`); image 0 is the
    /// running image and slot 0 its active slot.
    func flags(image: Int, slot: Int) -> (pending: Bool, confirmed: Bool, active: Bool, permanent: Bool) {
        let isActiveSlot = slot == 0
        var pending = false
        var confirmed = false
        var permanent = false
        switch pairs[image].swapType {
        case .none:
            confirmed = isActiveSlot
        case .test:
            if isActiveSlot { confirmed = true } else { pending = true }
        case .permanent:
            if isActiveSlot { confirmed = true } else { pending = true; permanent = true }
        case .revert:
            confirmed = !isActiveSlot
        }
        return (pending, confirmed, image == 0 && isActiveSlot, permanent)
    }

    /// Whether a slot may not be erased or uploaded to: active, or flagged pending/confirmed.
    func inUse(image: Int, slot: Int) -> Bool {
        guard self.slot(image, slot) != nil else { return false }
        let f = flags(image: image, slot: slot)
        return slot == 0 || f.active || f.pending || f.confirmed
    }

    /// Finds the slot holding an image with this hash.
    func find(hash: [UInt8]) -> (image: Int, slot: Int)? {
        for image in pairs.indices {
            for slot in 0..<2 where self.slot(image, slot)?.info.hash == hash { return (image, slot) }
        }
        return nil
    }

    // MARK: State write

    /// Marks a slot for test or permanent swap, or confirms the running image (PROTOCOL.md 3.2).
    /// Returns the image-group error code, or nil on success.
    mutating func setState(hash: [UInt8]?, confirm: Bool, allowConfirmNonActiveAny: Bool) -> Int? {
        guard let hash else {
            guard confirm else { return 24 }  // INVALID_HASH
            return confirmRunning()
        }
        guard hash.count == 32 else { return 24 }
        guard let (image, slot) = find(hash: hash) else { return 8 }  // HASH_NOT_FOUND
        if slot == 0 {
            if !confirm { return 33 }  // IMAGE_SETTING_TEST_TO_ACTIVE_DENIED
            if image != 0 && !allowConfirmNonActiveAny { return 32 }  // IMAGE_CONFIRMATION_DENIED
            return image == 0 ? confirmRunning() : confirmPrimary(of: image)
        }
        // Secondary slot: a confirmed (revert-pending old) image cannot be scheduled.
        if flags(image: image, slot: slot).confirmed { return 28 }  // IMAGE_ALREADY_PENDING
        pairs[image].pending = confirm ? .permanent : .test
        return nil
    }

    private mutating func confirmRunning() -> Int? {
        // Confirm is refused while a test swap is pending.
        if pairs.contains(where: { $0.pending != .none }) { return 28 }
        pairs[0].primaryConfirmed = true
        return nil
    }

    private mutating func confirmPrimary(of image: Int) -> Int? {
        if pairs[image].pending != .none { return 28 }
        pairs[image].primaryConfirmed = true
        return nil
    }

    // MARK: Reset

    /// What MCUboot does at boot. Returns whether any image was swapped.
    @discardableResult
    mutating func boot() -> Bool {
        upload = nil
        var swapped = false
        for index in pairs.indices {
            var pair = pairs[index]
            switch pair.swapType {
            case .test, .permanent:
                guard let secondary = pair.secondary, secondary.info.bootable else {
                    pair.pending = .none
                    break
                }
                let permanent = pair.pending == .permanent
                pair.secondary = pair.primary
                pair.primary = secondary
                pair.pending = .none
                pair.primaryConfirmed = permanent
                swapped = true
            case .revert:
                swap(&pair.primary, &pair.secondary)
                pair.primaryConfirmed = true
                swapped = true
            case .none:
                break
            }
            pairs[index] = pair
        }
        return swapped
    }

    // MARK: Erase

    /// Erases an absolute slot (image × 2 + slot). Returns the image-group error code, or nil.
    mutating func erase(absoluteSlot: Int) -> Int? {
        let image = absoluteSlot / 2
        let slot = absoluteSlot % 2
        guard image < pairs.count else { return 14 }  // INVALID_SLOT
        if inUse(image: image, slot: slot) { return 9 }  // NO_FREE_SLOT
        if slot == 0 { pairs[image].primary = nil } else { pairs[image].secondary = nil }
        if upload?.image == image { upload = nil }
        return nil
    }
}
