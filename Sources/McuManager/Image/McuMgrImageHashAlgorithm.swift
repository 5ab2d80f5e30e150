import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The digest an image's hash TLV holds: SHA-256 (the default and what Zephyr reports), SHA-384 or SHA-512.
public enum McuMgrImageHashAlgorithm: String, Sendable, Hashable, CaseIterable {
    case sha256 = "SHA-256"
    case sha384 = "SHA-384"
    case sha512 = "SHA-512"

    /// The TLV type that holds this hash.
    public var tlvType: McuMgrImageTLVType {
        switch self {
        case .sha256: .sha256
        case .sha384: .sha384
        case .sha512: .sha512
        }
    }

    /// The digest length in bytes.
    public var digestLength: Int {
        switch self {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// The algorithm a hash TLV type stands for, or nil if the type is not a hash.
    public init?(tlvType: McuMgrImageTLVType) {
        guard let found = Self.allCases.first(where: { $0.tlvType == tlvType }) else { return nil }
        self = found
    }

    /// The digest of `bytes`.
    public func digest<D: DataProtocol>(_ bytes: D) -> Data {
        switch self {
        case .sha256: Data(SHA256.hash(data: bytes))
        case .sha384: Data(SHA384.hash(data: bytes))
        case .sha512: Data(SHA512.hash(data: bytes))
        }
    }
}
