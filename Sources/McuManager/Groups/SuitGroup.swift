#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// SUIT group (66, nRF Connect SDK, nRF54H series): PROTOCOL.md 3.11. Every answer carries `rc`.

extension McuMgrCommand {
    /// SUIT group commands.
    public enum Suit {
        /// Manifests list (R).
        public static let manifestList = McuMgrCommand(0)
        /// Manifest state (R).
        public static let manifestState = McuMgrCommand(1)
        /// Candidate envelope upload (W).
        public static let envelopeUpload = McuMgrCommand(2)
        /// Missing image state: poll for a resource the device needs (R).
        public static let missingImageState = McuMgrCommand(3)
        /// Missing image upload: the requested resource (W).
        public static let missingImageUpload = McuMgrCommand(4)
        /// Cache raw upload (W).
        public static let cacheRawUpload = McuMgrCommand(5)
        /// Cleanup: erase the DFU and cache partitions (W).
        public static let cleanup = McuMgrCommand(6)
    }
}

/// Lists the manifests (roles) the device knows.
public struct SuitManifestListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.manifestList }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "SUIT manifest list" }
    public typealias Response = SuitManifestListResponse
    /// Creates the request.
    public init() {}
}

/// The device's manifests.
public struct SuitManifestListResponse: Decodable, Sendable, Hashable {
    /// One manifest.
    public struct Manifest: Decodable, Sendable, Hashable {
        /// Role byte: domain nibble and index, e.g. 0x20 application root (`role`).
        public var role: Int
    }

    /// Manifests (`manifests`); empty when missing.
    public var manifests: [Manifest]

    enum CodingKeys: String, CodingKey { case manifests }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        manifests = try c.decodeIfPresent([Manifest].self, forKey: .manifests) ?? []
    }
}

/// Reads the state of the manifest in one role.
public struct SuitManifestStateRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.manifestState }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "SUIT manifest state" }
    public typealias Response = SuitManifestStateResponse

    /// The manifest role (`role`).
    public var role: Int

    /// Creates the request.
    public init(role: Int) { self.role = role }
}

/// The state of one manifest.
public struct SuitManifestStateResponse: Decodable, Sendable, Hashable {
    /// Class UUID (`class_id`).
    public var classID: Data?
    /// Vendor UUID (`vendor_id`).
    public var vendorID: Data?
    /// Digest of the installed manifest (`digest`).
    public var digest: Data?
    /// Digest algorithm (`digest_algorithm`: −16 SHA-256, −44 SHA-512).
    public var digestAlgorithm: Int?
    /// Signature check result (`signature_check`).
    public var signatureCheck: Int?
    /// Sequence number of the installed manifest (`sequence_number`).
    public var sequenceNumber: Int?
    /// Semantic version, up to five numbers (`semantic_version`).
    public var semanticVersion: [Int]?
    /// Downgrade prevention policy (`downgrade_prevention_policy`).
    public var downgradePreventionPolicy: Int?
    /// Independent updateability policy (`independent_updateability_policy`).
    public var independentUpdateabilityPolicy: Int?
    /// Signature verification policy (`signature_verification_policy`).
    public var signatureVerificationPolicy: Int?

    enum CodingKeys: String, CodingKey {
        case classID = "class_id", vendorID = "vendor_id", digest, digestAlgorithm = "digest_algorithm"
        case signatureCheck = "signature_check", sequenceNumber = "sequence_number"
        case semanticVersion = "semantic_version"
        case downgradePreventionPolicy = "downgrade_prevention_policy"
        case independentUpdateabilityPolicy = "independent_updateability_policy"
        case signatureVerificationPolicy = "signature_verification_policy"
    }
}

/// One chunk of a candidate envelope. `len 0, off 0` without `defer_install` asks the device to
/// process an envelope delivered earlier (with `defer_install`).
public struct SuitEnvelopeUploadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.envelopeUpload }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "SUIT envelope upload" }
    public typealias Response = SuitUploadResponse

    /// Offset of `data` (`off`).
    public var offset: Int
    /// Bytes (`data`).
    public var data: Data
    /// Total size (`len`), first chunk only.
    public var length: Int?
    /// Keep the envelope without installing it yet (`defer_install`), first chunk only.
    public var deferInstall: Bool?

    /// Creates a chunk request.
    public init(offset: Int, data: Data, length: Int? = nil, deferInstall: Bool? = nil) {
        self.offset = offset
        self.data = data
        self.length = length
        self.deferInstall = deferInstall
    }

    enum CodingKeys: String, CodingKey { case offset = "off", data, length = "len", deferInstall = "defer_install" }
}

/// Asks whether the device needs a resource (an image the manifest fetches).
public struct SuitMissingImageStateRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.missingImageState }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "SUIT missing image poll" }
    public typealias Response = SuitMissingImageStateResponse
    /// Creates the request.
    public init() {}
}

/// What the device needs next; both fields absent means nothing.
public struct SuitMissingImageStateResponse: Decodable, Sendable, Hashable {
    /// The stream session to upload the resource in (`stream_session_id`).
    public var streamSessionID: Int?
    /// The resource's URI, e.g. `file://app.bin` (`resource_id`, a byte string).
    public var resourceID: Data?

    /// Creates a value (tests, simulators).
    public init(streamSessionID: Int? = nil, resourceID: Data? = nil) {
        self.streamSessionID = streamSessionID
        self.resourceID = resourceID
    }

    /// The resource URI as text.
    public var resource: String? { resourceID.map { String(decoding: $0, as: UTF8.self) } }

    /// The resource's name without a `file://` scheme.
    public var resourceName: String? {
        guard var text = resource else { return nil }
        if let range = text.firstRange(of: "://") { text = String(text[range.upperBound...]) }
        return text
    }

    enum CodingKeys: String, CodingKey { case streamSessionID = "stream_session_id", resourceID = "resource_id" }
}

/// One chunk of a resource the device asked for.
public struct SuitMissingImageUploadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.missingImageUpload }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "SUIT resource upload" }
    public typealias Response = SuitUploadResponse

    /// The session the device named (`stream_session_id`), first chunk only.
    public var streamSessionID: Int?
    /// Offset of `data` (`off`).
    public var offset: Int
    /// Bytes (`data`).
    public var data: Data
    /// Total size (`len`), first chunk only.
    public var length: Int?

    /// Creates a chunk request.
    public init(offset: Int, data: Data, length: Int? = nil, streamSessionID: Int? = nil) {
        self.streamSessionID = streamSessionID
        self.offset = offset
        self.data = data
        self.length = length
    }

    enum CodingKeys: String, CodingKey {
        case streamSessionID = "stream_session_id", offset = "off", data, length = "len"
    }
}

/// One chunk of a raw cache partition image.
public struct SuitCacheRawUploadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.cacheRawUpload }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "SUIT cache upload" }
    public typealias Response = SuitUploadResponse

    /// The cache pool (`target_id`), first chunk only.
    public var targetID: Int?
    /// Offset of `data` (`off`).
    public var offset: Int
    /// Bytes (`data`).
    public var data: Data
    /// Total size (`len`), first chunk only.
    public var length: Int?

    /// Creates a chunk request.
    public init(offset: Int, data: Data, length: Int? = nil, targetID: Int? = nil) {
        self.targetID = targetID
        self.offset = offset
        self.data = data
        self.length = length
    }

    enum CodingKeys: String, CodingKey { case targetID = "target_id", offset = "off", data, length = "len" }
}

/// Erases the DFU and cache partitions.
public struct SuitCleanupRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .suit }
    public static var command: McuMgrCommand { McuMgrCommand.Suit.cleanup }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "SUIT cleanup" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}

/// The answer to a SUIT upload chunk.
public struct SuitUploadResponse: Decodable, Sendable, Hashable {
    /// The next byte the device expects (`off`).
    public var offset: Int?

    enum CodingKeys: String, CodingKey { case offset = "off" }
}
