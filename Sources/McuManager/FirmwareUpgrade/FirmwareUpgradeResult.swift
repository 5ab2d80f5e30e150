#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// What a successful upgrade did.
public struct FirmwareUpgradeResult: Sendable {
    /// One package file and what happened to it.
    public struct Image: Sendable, Hashable {
        /// Image number (0 = application core, 1 = network core, ...; SUIT cache partition id).
        public var image: Int
        /// The Direct-XIP slot the build is linked for; nil otherwise.
        public var slot: Int?
        /// The package file.
        public var fileName: String
        /// What the bytes are.
        public var contentType: McuMgrPackage.Image.ContentType
        /// The image hash (MCUboot SHA-256 TLV; SUIT envelope digest).
        public var hash: Data
        /// Size in bytes.
        public var size: Int
        /// Version from the image header, when known.
        public var version: String?
        /// Whether this run uploaded it.
        public var uploaded: Bool
        /// Where the device said it already stood when the upload started (> 0: resumed).
        public var resumedFrom: Int
        /// Bytes this run sent (`size - resumedFrom` for an upload, 0 when skipped).
        public var bytesSent: Int
        /// Upload time of this image.
        public var uploadDuration: Duration
    }

    /// The core state machine's summary (mode, bootloader mode, uploaded and skipped images, reset, notes).
    public var summary: FirmwareUpgradeSummary
    /// Every package file considered, with what happened to it.
    public var images: [Image]
    /// The device's image list at the end (empty when it could not be read, e.g. SUIT devices rebooting).
    public var finalImages: [McuMgrImageStateResponse.ImageSlot]
    /// Wall-clock time of the whole upgrade.
    public var duration: Duration
    /// Time spent uploading (all images).
    public var uploadDuration: Duration
    /// Time from the install reset to the device answering again (zero without reset).
    public var reconnectDuration: Duration

    /// Bytes sent over all images.
    public var bytesSent: Int { images.reduce(0) { $0 + $1.bytesSent } }
}
