import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// One occupied image slot as the device reports it.
public struct SimulatedImageSlot: Sendable, Hashable {
    public var image: Int
    public var slot: Int
    public var version: McuMgrImageVersion
    /// The SHA-256 TLV value.
    public var hash: [UInt8]
    /// The whole image file.
    public var bytes: [UInt8]
    public var pending: Bool
    public var confirmed: Bool
    public var active: Bool
    public var permanent: Bool
}
