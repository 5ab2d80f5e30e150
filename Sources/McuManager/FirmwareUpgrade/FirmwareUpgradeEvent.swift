#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// Something that happened during a firmware upgrade, in order. Subscribe with
/// `FirmwareUpgradeManager.events()` before starting.
public enum FirmwareUpgradeEvent: Sendable {
    /// The upgrade started with these package files.
    case started(images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration)
    /// The public state changed.
    case stateChanged(from: FirmwareUpgradeState, to: FirmwareUpgradeState)
    /// Upload progress (at most every `FirmwareUpgradeManager.Options.progressInterval`, plus each
    /// image's last byte).
    case uploadProgress(FirmwareUpgradeProgress)
    /// A line for people: what the upgrade is doing, notes and warnings.
    case log(FirmwareUpgradeLogEntry)
    /// `pause()` took effect; nothing more is sent until `resume()`.
    case paused(FirmwareUpgradeState)
    /// `resume()` took effect.
    case resumed(FirmwareUpgradeState)
    /// The upgrade succeeded.
    case completed(FirmwareUpgradeResult)
    /// The upgrade failed in this state.
    case failed(state: FirmwareUpgradeState, error: McuMgrError)
    /// The upgrade was cancelled in this state.
    case cancelled(state: FirmwareUpgradeState)
}

/// How far the upload has come.
public struct FirmwareUpgradeProgress: Sendable, Hashable {
    /// The image number being uploaded (0 = application core; a SUIT cache's partition id).
    public var image: Int
    /// The package file being uploaded.
    public var fileName: String
    /// Bytes of this image the device has confirmed (including bytes it already held on resume).
    public var bytesSent: Int
    /// This image's size.
    public var imageSize: Int
    /// Bytes confirmed over all images of this upgrade.
    public var totalBytesSent: Int
    /// Size of all images this upgrade uploads.
    public var totalSize: Int
    /// Bytes per second over the last few seconds of this image's upload (`TransferRateEstimator`: never
    /// over a single chunk); nil until the upload has run long enough to tell.
    public var bytesPerSecond: Double?
    /// When the device confirmed these bytes.
    public var timestamp: Date

    /// Creates a value.
    public init(
        image: Int, fileName: String, bytesSent: Int, imageSize: Int, totalBytesSent: Int, totalSize: Int,
        bytesPerSecond: Double?, timestamp: Date
    ) {
        self.image = image
        self.fileName = fileName
        self.bytesSent = bytesSent
        self.imageSize = imageSize
        self.totalBytesSent = totalBytesSent
        self.totalSize = totalSize
        self.bytesPerSecond = bytesPerSecond
        self.timestamp = timestamp
    }
}

/// A log line of the upgrade.
public struct FirmwareUpgradeLogEntry: Sendable, Hashable, CustomStringConvertible {
    /// How important: `.info` for steps, `.debug` for details, `.warning` for things to know.
    public var level: Logger.Level
    /// The text.
    public var message: String
    /// When it was written.
    public var timestamp: Date

    /// Creates an entry.
    public init(level: Logger.Level, message: String, timestamp: Date = Date()) {
        self.level = level
        self.message = message
        self.timestamp = timestamp
    }

    public var description: String { message }
}

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
