#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The SUIT group (66) of nRF Connect SDK devices (nRF54H series): manifest list and state, deferred
/// envelope processing, missing images, cleanup. PROTOCOL.md 3.11.
///
/// A SUIT update: upload the envelope (a ``ChunkedUploader`` with ``SuitEnvelopeUploadTarget``; cache
/// images with ``SuitCacheUploadTarget``), then poll ``missingImageState(timeout:)`` and upload each
/// resource the device asks for (with ``SuitResourceUploadTarget``) until it asks for nothing more or
/// reboots. `FirmwareUpgradeManager` runs this flow for SUIT packages.
public struct SuitManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// The manifest roles the device knows.
    public func manifests() async throws -> [SuitManifestListResponse.Manifest] {
        try await client.send(SuitManifestListRequest()).manifests
    }

    /// The state of the manifest in `role` (e.g. 0x20, the application root manifest).
    public func manifestState(role: Int) async throws -> SuitManifestStateResponse {
        try await client.send(SuitManifestStateRequest(role: role))
    }

    /// Starts processing an envelope uploaded with `deferInstall` (an empty upload: `len 0`, `off 0`).
    public func processDeferredEnvelope() async throws {
        _ = try await client.send(SuitEnvelopeUploadRequest(offset: 0, data: Data(), length: 0))
    }

    /// What the device needs next: a resource to upload, or nothing (both fields nil).
    public func missingImageState(timeout: Duration? = nil) async throws -> SuitMissingImageStateResponse {
        try await client.send(SuitMissingImageStateRequest(), timeout: timeout)
    }

    /// Erases the DFU and cache partitions.
    public func cleanup() async throws {
        _ = try await client.send(SuitCleanupRequest(), timeout: .seconds(75))
    }
}

/// Reads the device's `off` from a SUIT upload answer.
func suitOffset(_ packet: SMPPacket, operation: String) throws -> Int {
    let response = try McuMgrClient.decode(SuitUploadResponse.self, from: packet, operation: operation)
    guard let offset = response.offset else {
        throw McuMgrError(.protocolViolation, "\(operation): the device's answer has no offset (`off`)")
    }
    return offset
}
