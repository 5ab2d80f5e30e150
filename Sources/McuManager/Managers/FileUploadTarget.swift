#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// File upload chunks (Zephyr fs_mgmt): `len` on the chunk at offset 0; FS error 11 (offset not valid)
/// continues from the device's `len`; an offset outside the file is an error.
public struct FileUploadTarget: ChunkedUploadTarget {
    /// Absolute path on the device.
    public var name: String
    /// Where this upload starts in the device's file: 0 for a new file (the chunk at offset 0 carries
    /// `len` and truncates a closed file), > 0 to append to the `start` bytes the device already holds.
    public var start: Int
    /// The whole file's size; nil: `start` plus the uploader's total.
    public var fileSize: Int?
    /// The data length of the chunk at offset 0 until its answer is read (the uploader sends that chunk
    /// alone and waits for it, so the first offset answer read belongs to it).
    private let firstChunk = LockedState<FirstChunk>(.notSent)

    private enum FirstChunk {
        case notSent
        case sent(length: Int)
        case answered
    }

    /// Creates a target; the uploader's offsets count from `start`.
    public init(name: String, start: Int = 0, fileSize: Int? = nil) {
        self.name = name
        self.start = max(0, start)
        self.fileSize = fileSize
    }

    /// A file's first chunk erases nothing: resent after the round-trip timeout like any other (a repeated
    /// first chunk that the device appended is caught by `deviceOffset(from:)`).
    public var firstChunkMayErase: Bool { false }

    public func request(offset: Int, data: Data, totalSize: Int) -> FileUploadRequest {
        let size = fileSize ?? (start + totalSize)
        var fileOffset = start + offset
        // The uploader sizes chunks from a request with empty data; past `start` the file offsets are
        // larger than the uploader's, so size with the largest one (its CBOR head is the longest).
        if start > 0, data.isEmpty { fileOffset = max(fileOffset, size) }
        if fileOffset == 0, !data.isEmpty {
            firstChunk.withLock { if case .notSent = $0 { $0 = .sent(length: data.count) } }
        }
        return FileUploadRequest(name: name, offset: fileOffset, data: data, length: fileOffset == 0 ? size : nil)
    }

    /// FS error 11 with `len`: the device took nothing of the chunk and holds `len` bytes.
    public func refusesChunkOffset(_ packet: SMPPacket) -> Bool {
        guard let item = try? CBOR(decoding: packet.payload), case .groupError(let error) = SMPResponseStatus(response: item)
        else { return false }
        return error.group == .fileSystem && error.rc == 11 && item["len"] != nil
    }

    public func deviceOffset(from packet: SMPPacket) throws -> Int {
        let fileOffset: Int
        if let item = try? CBOR(decoding: packet.payload),
            case .groupError(let error) = SMPResponseStatus(response: item),
            error.group == .fileSystem, error.rc == 11, let lengthItem = item["len"]
        {
            // The device's offset differs from the chunk's (a lost chunk, or a repeated one whose first
            // answer was lost): it has closed the file and holds `len` bytes.
            guard let length = lengthItem.int, length >= 0 else {
                throw McuMgrError(.protocolViolation, "file upload: the device sent an invalid length (\(lengthItem))")
            }
            fileOffset = length
        } else {
            let response = try McuMgrClient.decode(
                FileUploadResponse.self, from: packet, operation: FileUploadRequest.operationName)
            guard let offset = response.offset else {
                throw McuMgrError(.protocolViolation, "file upload: the device's answer has no offset (`off`)")
            }
            fileOffset = offset
            // Zephyr appends a repeated offset-0 chunk while the file is open: when the answer to the
            // first chunk was lost and the chunk was sent again, the device reports more than that chunk.
            let first = firstChunk.withLock { state -> Int? in
                guard case .sent(let length) = state else { return nil }
                state = .answered
                return length
            }
            if let first, offset > first {
                throw McuMgrError(
                    .protocolViolation,
                    "file upload: the device reports \(offset) bytes of \(name) after the first chunk of \(first) bytes (the chunk was written twice: a repeated first chunk is appended to the open file)")
            }
        }
        if let fileSize, fileOffset > fileSize {
            throw McuMgrError(
                .protocolViolation,
                "file upload: the device holds \(fileOffset) bytes of \(name), more than the \(fileSize)-byte file (a repeated first chunk was appended to the open file)")
        }
        guard fileOffset >= start else {
            throw McuMgrError(
                .protocolViolation,
                "file upload: the device holds \(fileOffset) bytes of \(name), fewer than the \(start) this upload continues from (the file changed)")
        }
        return fileOffset - start
    }
}
