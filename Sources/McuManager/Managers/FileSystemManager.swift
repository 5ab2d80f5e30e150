import Crypto
import Foundation
import McuMgrCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file-system group (8): streamed, pipelined, verified file transfers.
public struct FileSystemManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// How a transfer was checked against the device's copy.
    public enum Verification: Sendable, Hashable, CustomStringConvertible {
        /// The device's SHA-256 matched.
        case sha256
        /// The device's CRC-32 matched.
        case crc32
        /// Not checked, and why (device without hash support, or not asked for).
        case skipped(String)

        public var description: String {
            switch self {
            case .sha256: return "verified by SHA-256"
            case .crc32: return "verified by CRC-32"
            case .skipped(let why): return "not verified (\(why))"
            }
        }
    }

    /// What a finished transfer did.
    public struct TransferResult: Sendable, Hashable {
        /// Bytes transferred (the file's size).
        public var bytes: Int
        /// How the result was checked.
        public var verification: Verification
        /// Wall-clock time.
        public var duration: Duration
        /// Time spent moving the data alone (without the hash check afterwards).
        public var transferDuration: Duration
    }

    /// Uploads a local file to `remote` (an absolute path on the device), streaming it from disk.
    ///
    /// Chunks are pipelined as for image uploads. Afterwards the device's SHA-256 (else CRC-32) of the
    /// file is compared with the local one when the device offers a hash.
    /// - Throws: `McuMgrError`; kind `.protocolViolation` when verification finds a difference.
    public func upload(
        _ local: URL, to remote: String, verify: Bool = true, configuration: UploadConfiguration = .init(),
        progress: TransferProgressHandler? = nil
    ) async throws -> TransferResult {
        let clock = ContinuousClock()
        let started = clock.now
        let source = try FileUploadSource(url: local)
        let uploader = ChunkedUploader(client: client, target: FileUploadTarget(name: remote), configuration: configuration)
        _ = try await uploader.upload(source, progress: progress)
        let transferred = clock.now - started
        var verification = Verification.skipped("not requested")
        if verify {
            verification = try await self.verify(remote: remote, length: source.size) { type in
                try LocalDigest.digest(type, of: source)
            }
        }
        return TransferResult(
            bytes: source.size, verification: verification, duration: clock.now - started,
            transferDuration: transferred)
    }

    /// Downloads `remote` into `destination`.
    ///
    /// Data goes to a temporary file beside `destination`, which is renamed into place only after the
    /// whole file arrived and (when the device offers a hash) matched; on any failure or cancellation the
    /// temporary file is removed and nothing appears under `destination`.
    /// - Throws: `McuMgrError`; kind `.protocolViolation` when verification finds a difference.
    public func download(
        _ remote: String, to destination: URL, verify: Bool = true, progress: TransferProgressHandler? = nil
    ) async throws -> TransferResult {
        let clock = ContinuousClock()
        let started = clock.now
        let directory = destination.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            ".\(destination.lastPathComponent).\(UUID().uuidString).download")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
            throw McuMgrError(
                .file, "cannot create \(temporary.path); check that \(directory.path) exists and is writable")
        }
        let handle: FileHandle
        do {
            handle = try FileHandle(forWritingTo: temporary)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw McuMgrError(.file, "cannot write \(temporary.path): \(error.localizedDescription)")
        }
        do {
            var sha = SHA256()
            var crc = CRC32()
            var offset = 0
            var total: Int?
            repeat {
                let response = try await sendRetryingBusy(FileDownloadRequest(name: remote, offset: offset))
                if offset == 0 {
                    guard let length = response.length else {
                        throw McuMgrError(.protocolViolation, "file download: the device did not send the file's length (`len`)")
                    }
                    total = length
                }
                guard response.offset == offset else {
                    throw McuMgrError(
                        .protocolViolation,
                        "file download: asked for offset \(offset), the device sent offset \(response.offset); retry the download")
                }
                let length = total ?? 0
                if response.data.isEmpty, offset < length {
                    throw McuMgrError(
                        .protocolViolation,
                        "file download: the device sent no data at offset \(offset) of \(length); the file may have changed, retry")
                }
                guard offset + response.data.count <= length else {
                    throw McuMgrError(
                        .protocolViolation, "file download: the device sent more than the \(length) bytes it announced")
                }
                do {
                    try handle.write(contentsOf: response.data)
                } catch {
                    throw McuMgrError(.file, "cannot write \(temporary.path): \(error.localizedDescription)")
                }
                sha.update(data: response.data)
                crc.update(response.data)
                offset += response.data.count
                let elapsed = (clock.now - started).seconds
                progress?(
                    TransferProgress(
                        bytesTransferred: offset, totalBytes: length,
                        bytesPerSecond: elapsed > 0 ? Double(offset) / elapsed : 0))
            } while offset < (total ?? 0)
            let transferred = clock.now - started
            try handle.close()
            let shaDigest = Data(sha.finalize())
            let crcDigest = crc.bigEndianBytes
            var verification = Verification.skipped("not requested")
            if verify {
                verification = try await self.verify(remote: remote, length: offset) { type in
                    type == "sha256" ? shaDigest : type == "crc32" ? crcDigest : nil
                }
            }
            guard rename(temporary.path, destination.path) == 0 else {
                let reason = String(cString: strerror(errno))
                throw McuMgrError(.file, "cannot move the download to \(destination.path): \(reason)")
            }
            return TransferResult(
                bytes: offset, verification: verification, duration: clock.now - started,
                transferDuration: transferred)
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(at: temporary)
            if error is CancellationError { throw McuMgrError(.cancelled, "file download was cancelled") }
            throw error
        }
    }

    /// A file's size in bytes.
    public func status(name: String) async throws -> Int {
        try await client.send(FileStatusRequest(name: name)).length
    }

    /// The device's hash or checksum of (part of) a file; `type` is "sha256" or "crc32" (nil = device default).
    public func hash(name: String, type: String? = nil, offset: Int? = nil, length: Int? = nil) async throws
        -> FileHashResponse
    {
        try await client.send(FileHashRequest(name: name, type: type, offset: offset, length: length))
    }

    /// The hash types the device offers, by name.
    public func supportedHashTypes() async throws -> [String: FileSupportedHashTypesResponse.HashType] {
        try await client.send(FileSupportedHashTypesRequest()).types
    }

    /// Closes the file the device holds open for a transfer.
    public func close() async throws {
        _ = try await client.send(FileCloseRequest())
    }

    // MARK: - Internals

    private func sendRetryingBusy(_ request: FileDownloadRequest) async throws -> FileDownloadResponse {
        var attempts = 0
        while true {
            do {
                return try await client.send(request)
            } catch let error as McuMgrError where error.returnCode == .busy && attempts < 50 {
                attempts += 1
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// Compares the device's digest of `remote` with `local(type)`; skips when the device has none.
    private func verify(
        remote: String, length: Int, local: (String) throws -> Data?
    ) async throws -> Verification {
        var type: String?
        do {
            let types = try await supportedHashTypes()
            if types["sha256"] != nil {
                type = "sha256"
            } else if types["crc32"] != nil {
                type = "crc32"
            } else {
                return .skipped("the device offers neither sha256 nor crc32")
            }
        } catch let error as McuMgrError where Self.isUnsupported(error) {
            type = nil  // Ask for the device's default type.
        }
        let response: FileHashResponse
        do {
            response = try await hash(name: remote, type: type)
        } catch let error as McuMgrError where Self.isUnsupported(error) {
            return .skipped("the device does not support file hashes")
        }
        guard let used = response.type ?? type, used == "sha256" || used == "crc32" else {
            return .skipped("the device used an unknown hash type \(response.type ?? "?")")
        }
        guard let deviceDigest = response.outputBytes else {
            throw McuMgrError(.protocolViolation, "file hash: the device's answer has no usable `output`")
        }
        if let hashed = response.length, hashed != length {
            throw McuMgrError(
                .protocolViolation,
                "verification of \(remote) failed: the device's file has \(hashed) bytes, the local one \(length); transfer the file again")
        }
        guard let localDigest = try local(used) else { return .skipped("no local \(used)") }
        guard localDigest == deviceDigest else {
            throw McuMgrError(
                .protocolViolation,
                "verification of \(remote) failed: the device's \(used) is \(deviceDigest.hexString), the local file's is \(localDigest.hexString); the data was corrupted on the way, transfer the file again")
        }
        return used == "sha256" ? .sha256 : .crc32
    }

    /// rc 8 (not supported) or FS error 13 (hash type not found).
    private static func isUnsupported(_ error: McuMgrError) -> Bool {
        if error.returnCode == .notSupported { return true }
        if let group = error.groupError, group.group == .fileSystem, group.rc == 13 { return true }
        return false
    }
}

/// File upload chunks: `len` on the first; FS error 11 (offset not valid) continues from the device's `len`.
public struct FileUploadTarget: ChunkedUploadTarget {
    /// Absolute path on the device.
    public var name: String

    /// Creates a target.
    public init(name: String) { self.name = name }

    public func request(offset: Int, data: Data, totalSize: Int) -> FileUploadRequest {
        FileUploadRequest(name: name, offset: offset, data: data, length: offset == 0 ? totalSize : nil)
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        if let item = try? CBOR(decoding: packet.payload),
            case .groupError(let error) = SMPResponseStatus(response: item),
            error.group == .fileSystem, error.rc == 11, let length = item["len"]?.int
        {
            return length
        }
        let response = try McuMgrClient.decode(FileUploadResponse.self, from: packet, operation: FileUploadRequest.operationName)
        guard let offset = response.offset else {
            throw McuMgrError(.protocolViolation, "file upload: the device's answer has no offset (`off`)")
        }
        return offset
    }
}
