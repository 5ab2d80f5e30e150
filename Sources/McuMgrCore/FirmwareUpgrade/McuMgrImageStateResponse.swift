#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The image list: one entry per valid slot. The answer to the image group's state read and write
/// (`ImageStateReadRequest`, `ImageStateWriteRequest` in McuManager); here in the core because the
/// firmware-upgrade state machine reads it (PROTOCOL.md 3.2).
public struct McuMgrImageStateResponse: Decodable, Sendable, Hashable {
    /// One slot holding a valid image.
    public struct ImageSlot: Decodable, Sendable, Hashable {
        /// Image number; 0 when the device omits it (single-image builds).
        public var image: Int
        /// Slot within the image: 0 primary, 1 secondary.
        public var slot: Int
        /// `major.minor.revision[.build]`.
        public var version: String
        /// The image's SHA-256 TLV hash, when sent.
        public var hash: Data?
        /// Not flagged non-bootable (false when missing).
        public var bootable: Bool
        /// Scheduled for the next boot (false when missing).
        public var pending: Bool
        /// Confirmed (false when missing).
        public var confirmed: Bool
        /// Currently running (false when missing).
        public var active: Bool
        /// Stays after the next boot (false when missing).
        public var permanent: Bool
        /// Compressed image (Nordic; false when missing).
        public var compressed: Bool

        /// The absolute slot number (`image * 2 + slot`), as the erase command wants it.
        public var absoluteSlot: Int { image * 2 + slot }

        /// Creates an entry, as a device would list it.
        public init(
            image: Int = 0, slot: Int, version: String = "", hash: Data?, active: Bool = false,
            confirmed: Bool = false, pending: Bool = false, permanent: Bool = false, bootable: Bool = false,
            compressed: Bool = false
        ) {
            self.image = image
            self.slot = slot
            self.version = version
            self.hash = hash
            self.active = active
            self.confirmed = confirmed
            self.pending = pending
            self.permanent = permanent
            self.bootable = bootable
            self.compressed = compressed
        }

        enum CodingKeys: String, CodingKey {
            case image, slot, version, hash, bootable, pending, confirmed, active, permanent, compressed
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            image = try c.decodeIfPresent(Int.self, forKey: .image) ?? 0
            slot = try c.decodeIfPresent(Int.self, forKey: .slot) ?? 0
            version = try c.decodeIfPresent(String.self, forKey: .version) ?? ""
            hash = try c.decodeIfPresent(Data.self, forKey: .hash)
            bootable = try c.decodeIfPresent(Bool.self, forKey: .bootable) ?? false
            pending = try c.decodeIfPresent(Bool.self, forKey: .pending) ?? false
            confirmed = try c.decodeIfPresent(Bool.self, forKey: .confirmed) ?? false
            active = try c.decodeIfPresent(Bool.self, forKey: .active) ?? false
            permanent = try c.decodeIfPresent(Bool.self, forKey: .permanent) ?? false
            compressed = try c.decodeIfPresent(Bool.self, forKey: .compressed) ?? false
        }
    }

    /// Slots with valid images (`images`); empty when missing.
    public var images: [ImageSlot]
    /// Split status (`splitStatus`), always 0 on Zephyr; nil with the frugal list.
    public var splitStatus: Int?

    enum CodingKeys: String, CodingKey { case images, splitStatus }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        images = try c.decodeIfPresent([ImageSlot].self, forKey: .images) ?? []
        splitStatus = try c.decodeIfPresent(Int.self, forKey: .splitStatus)
    }
}
