#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

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
