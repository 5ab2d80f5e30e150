#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One file of a firmware package to send to the device, as the iOS library's `ImageManager.Image`;
/// McuManager names it `McuMgrPackage.Image`. The firmware-upgrade state machine plans with it, the
/// runtime uploads its bytes.
public struct FirmwareUpgradeImage: Sendable, Hashable, CustomStringConvertible {
    /// What the bytes are, which decides how they are uploaded.
    public enum ContentType: String, Sendable, Hashable {
        /// An MCUboot image: upload with the image group, `image` = ``FirmwareUpgradeImage/image``.
        case mcubootImage
        /// A SUIT envelope: upload with the SUIT group (66) or image group image 0.
        case suitEnvelope
        /// A SUIT cache partition image: upload with SUIT cache raw upload, `target_id` =
        /// ``FirmwareUpgradeImage/image``.
        case suitCache
    }

    /// MCUboot image number (0 = application core, 1 = network core or nRF70 patch, …), or the
    /// cache partition id of a SUIT cache.
    public var image: Int
    /// Direct-XIP only: the slot (0 or 1) this build is linked for; nil otherwise.
    public var slot: Int?
    /// What the bytes are.
    public var contentType: ContentType
    /// The hash the device reports for it: the SHA-256 TLV of an MCUboot image, the SHA-256 digest
    /// of a SUIT envelope, the SHA-256 of the bytes of a SUIT cache.
    public var hash: Data
    /// Version from the image header (`major.minor.revision+build`), or the SUIT manifest's
    /// sequence number; nil when unknown.
    public var version: String?
    /// The bytes to upload, unchanged.
    public var data: Data
    /// The file's name (inside the zip, or the file itself).
    public var fileName: String

    /// Creates an image.
    public init(
        image: Int, slot: Int? = nil, contentType: ContentType, hash: Data, version: String? = nil,
        data: Data, fileName: String
    ) {
        self.image = image
        self.slot = slot
        self.contentType = contentType
        self.hash = hash
        self.version = version
        self.data = data
        self.fileName = fileName
    }

    /// Size in bytes.
    public var size: Int { data.count }

    /// The hash as lowercase hexadecimal.
    public var hashHex: String { hash.lowercaseHex }

    public var description: String {
        var text = "\(fileName): image \(image)"
        if let slot { text += " slot \(slot)" }
        text += ", \(contentType.rawValue), \(size) bytes"
        if let version { text += ", version \(version)" }
        return text + ", hash \(hashHex)"
    }
}
