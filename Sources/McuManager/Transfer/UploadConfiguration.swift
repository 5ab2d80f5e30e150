#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Settings for chunked uploads (image, file). Defaults follow the device's buffers.
public struct UploadConfiguration: Sendable, Hashable {
    /// Chunks in flight at once, at most what the device's buffers take over the link; nil takes what they
    /// take (`LinkLimits.window`: `buf_count - 1`, over UDP `buf_count / 2`; 1 if the device does not say).
    public var pipelineDepth: Int?
    /// Chunk lengths (except the last) are rounded down to a multiple of this (NCS ≤ 1.7 needed 4).
    public var byteAlignment: Int
    /// Upper bound for a chunk's data length; nil lets the link MTU and `buf_size` decide.
    public var maximumChunkSize: Int?
    /// Timeout for the chunk at offset 0, which may erase a whole slot.
    public var firstChunkTimeout: Duration
    /// Timeout for every other chunk.
    public var chunkTimeout: Duration
    /// Wait before resending a chunk the device answered with `rc 10` (busy).
    public var busyRetryDelay: Duration
    /// Most resends of one chunk answered busy.
    public var maximumBusyRetries: Int
    /// Most consecutive chunks lost to timeouts before the upload gives up.
    public var maximumTimeoutRetries: Int
    /// The device's SMP buffer size (`buf_size`, or a reassembly buffer to assume) when already known;
    /// nil asks the device (OS parameters). With `pipelineDepth` also set, no parameters query is sent.
    public var deviceBufferSize: Int? = nil
    /// Every chunk may make the device erase flash before it answers (MCUboot's serial recovery erases
    /// sector by sector as the upload reaches it, 376 ms measured under QEMU): no chunk is resent sooner
    /// than the link's `LinkLimits.eraseResendFloor`, as the first chunk of an image never is.
    public var everyChunkMayErase = false

    /// Creates a configuration.
    public init(
        pipelineDepth: Int? = nil, byteAlignment: Int = 1, maximumChunkSize: Int? = nil,
        firstChunkTimeout: Duration = McuMgrTimeouts.defaultFirstChunk, chunkTimeout: Duration = McuMgrTimeouts.defaultAnswer,
        busyRetryDelay: Duration = .milliseconds(100), maximumBusyRetries: Int = 50,
        maximumTimeoutRetries: Int = 3
    ) {
        self.pipelineDepth = pipelineDepth
        self.byteAlignment = max(1, byteAlignment)
        self.maximumChunkSize = maximumChunkSize
        self.firstChunkTimeout = firstChunkTimeout
        self.chunkTimeout = chunkTimeout
        self.busyRetryDelay = busyRetryDelay
        self.maximumBusyRetries = maximumBusyRetries
        self.maximumTimeoutRetries = maximumTimeoutRetries
    }
}

/// How far a transfer has come.
public struct TransferProgress: Sendable, Hashable {
    /// Bytes the device has confirmed (upload) or sent (download).
    public var bytesTransferred: Int
    /// Total bytes.
    public var totalBytes: Int
    /// Bytes per second over the last few seconds (`TransferRateEstimator`: never over a single chunk);
    /// nil until the transfer has run long enough to tell.
    public var bytesPerSecond: Double?

    /// Creates a value.
    public init(bytesTransferred: Int, totalBytes: Int, bytesPerSecond: Double?) {
        self.bytesTransferred = bytesTransferred
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
    }

    /// 0…1.
    public var fractionCompleted: Double {
        totalBytes == 0 ? 1 : Double(bytesTransferred) / Double(totalBytes)
    }
}

/// Receives transfer progress; called from the uploading task.
public typealias TransferProgressHandler = @Sendable (TransferProgress) -> Void

/// What a finished upload did.
public struct UploadResult: Sendable, Hashable {
    /// Total bytes of the upload.
    public var totalBytes: Int
    /// Where the device said it already was when the upload started (0 for a fresh upload; > 0 on resume).
    public var resumedFrom: Int
    /// Data bytes per chunk used (the largest chunk).
    public var chunkSize: Int
    /// Chunks in flight at once.
    public var pipelineDepth: Int
    /// Chunk requests sent (including resends).
    public var chunksSent: Int
    /// Wall-clock time.
    public var duration: Duration
}
