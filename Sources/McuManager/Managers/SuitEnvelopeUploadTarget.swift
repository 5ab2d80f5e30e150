#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// Envelope chunks (group 66, command 2).
public struct SuitEnvelopeUploadTarget: ChunkedUploadTarget {
    /// `defer_install` on the first chunk.
    public var deferInstall: Bool
    /// Creates a target.
    public init(deferInstall: Bool = false) { self.deferInstall = deferInstall }

    public func request(offset: Int, data: Data, totalSize: Int) -> SuitEnvelopeUploadRequest {
        offset == 0
            ? SuitEnvelopeUploadRequest(offset: 0, data: data, length: totalSize, deferInstall: deferInstall ? true : nil)
            : SuitEnvelopeUploadRequest(offset: offset, data: data)
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        try suitOffset(packet, operation: SuitEnvelopeUploadRequest.operationName)
    }
}
