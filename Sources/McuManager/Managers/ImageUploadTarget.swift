#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Image upload chunks (PROTOCOL.md 4.1): first-chunk keys only at offset 0, `image` only when > 0.
public struct ImageUploadTarget: ChunkedUploadTarget {
    /// Image number.
    public var image: Int
    /// SHA-256 of the whole file.
    public var sha: Data?
    /// `upgrade` flag for the first chunk.
    public var upgrade: Bool?

    /// Creates a target.
    public init(image: Int, sha: Data?, upgrade: Bool? = nil) {
        self.image = image
        self.sha = sha
        self.upgrade = upgrade
    }

    public func request(offset: Int, data: Data, totalSize: Int) -> ImageUploadRequest {
        if offset == 0 {
            return ImageUploadRequest(
                offset: 0, data: data, length: totalSize, image: image > 0 ? image : nil, sha: sha, upgrade: upgrade)
        }
        return ImageUploadRequest(offset: offset, data: data)
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        let response = try McuMgrClient.decode(ImageUploadResponse.self, from: packet, operation: ImageUploadRequest.operationName)
        guard let offset = response.offset else {
            throw McuMgrError(.protocolViolation, "image upload: the device's answer has no offset (`off`)")
        }
        if response.match == false {
            throw McuMgrError(
                .device,
                "image upload: the device reports that the uploaded image does not match its SHA-256; upload it again")
        }
        return offset
    }
}
