#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The image group (1): image list, test / confirm, erase, slot info and firmware upload.
public struct ImageManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Timeout for the erase command (synchronous and slow on the device).
    public static let eraseTimeout: Duration = .seconds(75)

    /// The image list: one entry per slot holding a valid image.
    public func list() async throws -> McuMgrImageStateResponse {
        try await client.send(ImageStateReadRequest())
    }

    /// Marks the image with this TLV `hash` to be tried on the next boot (reverted unless confirmed).
    /// - Returns: the image list after the change.
    public func test(hash: Data) async throws -> McuMgrImageStateResponse {
        try await client.send(ImageStateWriteRequest(hash: hash, confirm: false))
    }

    /// Confirms the image with this TLV `hash` permanently, or the running image when `hash` is nil.
    /// - Returns: the image list after the change.
    public func confirm(hash: Data? = nil) async throws -> McuMgrImageStateResponse {
        try await client.send(ImageStateWriteRequest(hash: hash, confirm: true))
    }

    /// Erases a slot: the absolute `slot` (`image * 2 + slot`), or the one opposite the active slot when nil.
    public func erase(slot: Int? = nil) async throws {
        _ = try await client.send(ImageEraseRequest(slot: slot), timeout: Self.eraseTimeout)
    }

    /// Slot sizes per image (needs `CONFIG_MCUMGR_GRP_IMG_SLOT_INFO`).
    public func slotInfo() async throws -> ImageSlotInfoResponse {
        try await client.send(ImageSlotInfoRequest())
    }

    /// Lists core dumps (mynewt).
    public func coreList() async throws {
        _ = try await client.send(CoreListRequest())
    }

    /// Reads a piece of the core dump at `offset` (mynewt).
    public func coreLoad(offset: Int) async throws -> CoreLoadResponse {
        try await client.send(CoreLoadRequest(offset: offset))
    }

    /// Erases the core dump (mynewt).
    public func coreErase() async throws {
        _ = try await client.send(CoreEraseRequest())
    }

    /// Uploads a firmware image (the whole `.bin` file) to `image`'s secondary slot.
    ///
    /// The first chunk carries `len`, `sha` (SHA-256 of the whole file, computed when nil) and `image`
    /// (only when > 0). Uploading the same file again after an interruption resumes where the device
    /// stopped: the device recognises `sha` and answers its offset.
    /// - Parameters:
    ///   - data: the image file's bytes.
    ///   - image: the image number (0 = application core).
    ///   - sha: SHA-256 of `data`; nil computes it.
    ///   - upgrade: ask the device to refuse images not newer than the running one.
    ///   - configuration: chunking and pipelining.
    ///   - progress: called as the device confirms bytes.
    public func upload(
        data: Data, image: Int = 0, sha: Data? = nil, upgrade: Bool? = nil,
        configuration: UploadConfiguration = .init(), progress: TransferProgressHandler? = nil
    ) async throws -> UploadResult {
        let source = DataUploadSource(data)
        return try await upload(source, image: image, sha: sha, upgrade: upgrade, configuration: configuration, progress: progress)
    }

    /// Uploads a firmware image file, streamed from disk. See `upload(data:image:sha:upgrade:configuration:progress:)`.
    public func upload(
        file: URL, image: Int = 0, sha: Data? = nil, upgrade: Bool? = nil,
        configuration: UploadConfiguration = .init(), progress: TransferProgressHandler? = nil
    ) async throws -> UploadResult {
        let source = try FileUploadSource(url: file)
        return try await upload(source, image: image, sha: sha, upgrade: upgrade, configuration: configuration, progress: progress)
    }

    private func upload(
        _ source: some UploadSource, image: Int, sha: Data?, upgrade: Bool?,
        configuration: UploadConfiguration, progress: TransferProgressHandler?
    ) async throws -> UploadResult {
        guard source.size >= 32 else {
            throw McuMgrError(
                .usage, "image upload: the image is \(source.size) bytes; an MCUboot image holds at least its 32-byte header")
        }
        guard image >= 0 else { throw McuMgrError(.usage, "image upload: image number \(image) is negative") }
        let digest = try sha ?? LocalDigest.sha256(of: source)
        let target = ImageUploadTarget(image: image, sha: digest, upgrade: upgrade)
        return try await ChunkedUploader(client: client, target: target, configuration: configuration)
            .upload(source, progress: progress)
    }
}
