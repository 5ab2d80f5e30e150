#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Cache chunks (group 66, command 5).
public struct SuitCacheUploadTarget: ChunkedUploadTarget {
    /// The cache pool (`target_id`).
    public var targetID: Int
    /// Creates a target.
    public init(targetID: Int) { self.targetID = targetID }

    public func request(offset: Int, data: Data, totalSize: Int) -> SuitCacheRawUploadRequest {
        offset == 0
            ? SuitCacheRawUploadRequest(offset: 0, data: data, length: totalSize, targetID: targetID)
            : SuitCacheRawUploadRequest(offset: offset, data: data)
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        try suitOffset(packet, operation: SuitCacheRawUploadRequest.operationName)
    }
}
