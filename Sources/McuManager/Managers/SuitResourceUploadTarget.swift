#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Resource chunks (group 66, command 4).
public struct SuitResourceUploadTarget: ChunkedUploadTarget {
    /// The session the device named (`stream_session_id`).
    public var streamSessionID: Int
    /// Creates a target.
    public init(streamSessionID: Int) { self.streamSessionID = streamSessionID }

    public func request(offset: Int, data: Data, totalSize: Int) -> SuitMissingImageUploadRequest {
        offset == 0
            ? SuitMissingImageUploadRequest(offset: 0, data: data, length: totalSize, streamSessionID: streamSessionID)
            : SuitMissingImageUploadRequest(offset: offset, data: data)
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        try suitOffset(packet, operation: SuitMissingImageUploadRequest.operationName)
    }
}
