import Crypto
import McuMgrCore

/// File-system group (8): download, upload, status, hash/checksum, supported hashes, close
/// (PROTOCOL.md 3.6).
extension DeviceState {
    /// `CONFIG_MCUMGR_GRP_FS_PATH_LEN`.
    static let maximumPathLength = 64

    mutating func handleFileSystem(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch (request.command.rawValue, request.isRead) {
        case (0, true): return try fileDownload(request)
        case (0, false): return try fileUpload(request)
        case (1, _): return try fileStatus(request)
        case (2, _): return try fileHash(request)
        case (3, _):
            return .ok([
                "types": .map(.entries([
                    "crc32": .map(.entries(["format": 0, "size": 4])),
                    "sha256": .map(.entries(["format": 1, "size": 32])),
                ]))
            ])
        case (4, _):
            files.closeTransfer()
            return .empty
        default:
            throw .notSupported
        }
    }

    /// The request's `name`, checked: FS err 2 for a bad name, 14 outside the mount point.
    private func filePath(_ fields: RequestFields) throws(SimulatorFault) -> String {
        guard let name = try fields.text("name") else { throw .invalidValue }
        guard !name.isEmpty, name.utf8.count <= Self.maximumPathLength, name.hasPrefix("/") else {
            throw .group(.fileSystem, 2)  // FILE_INVALID_NAME
        }
        guard files.isMounted(name) else { throw .group(.fileSystem, 14) }  // MOUNT_POINT_NOT_FOUND
        return name
    }

    /// The path of an existing regular file: FS err 3 if missing, 4 for a directory.
    private func existingFile(_ fields: RequestFields) throws(SimulatorFault) -> String {
        let path = try filePath(fields)
        switch files.kind(of: path) {
        case .file: return path
        case .directory: throw .group(.fileSystem, 4)  // FILE_IS_DIRECTORY
        case .missing: throw .group(.fileSystem, 3)  // FILE_NOT_FOUND
        }
    }

    /// The largest download chunk whose response fits one buffer.
    func downloadChunkSize(offset: Int, fileSize: Int) -> Int {
        var fixed = SMPHeader.size + (configuration.indefiniteLengthMaps ? 2 : 1)
        fixed += 4 + CBORWriter.headSize(argument: UInt64(offset))  // "off"
        fixed += 5  // "data"
        if offset == 0 { fixed += 4 + CBORWriter.headSize(argument: UInt64(fileSize)) }  // "len"
        if includesReturnCode { fixed += 4 }
        let available = configuration.bufferSize - fixed
        var chunk = 0
        for headSize in [1, 2, 3, 5, 9] {
            let n = available - headSize
            if n > 0 && CBORWriter.headSize(argument: UInt64(n)) <= headSize {
                chunk = n
                break
            }
        }
        if let cap = configuration.downloadChunkSize { chunk = min(chunk, cap) }
        return max(0, chunk)
    }

    private mutating func fileDownload(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.fields()
        let path = try existingFile(fields)
        guard let offset = try fields.count("off") else { throw .invalidValue }
        guard let contents = files.contents(of: path) else { throw .group(.fileSystem, 3) }
        guard offset <= contents.count else { throw .group(.fileSystem, 12) }  // OFFSET_LARGER_THAN_FILE
        let chunk = min(downloadChunkSize(offset: offset, fileSize: contents.count), contents.count - offset)
        let end = offset + chunk
        if end >= contents.count {
            files.closeTransfer()
        } else {
            files.transfer = FileStore.Transfer(path: path, length: contents.count)
        }
        var entries: [CBORMapEntry] = .entries([
            "off": .unsigned(UInt64(offset)), "data": .bytes(Array(contents[offset..<end])),
        ])
        if offset == 0 { entries.append("len", .unsigned(UInt64(contents.count))) }
        return .success(entries)
    }

    private mutating func fileUpload(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.fields()
        let path = try filePath(fields)
        guard let offset = try fields.count("off"), let data = try fields.bytes("data") else { throw .invalidValue }
        let length = try fields.count("len")
        if files.kind(of: path) == .directory { throw .group(.fileSystem, 4) }  // FILE_IS_DIRECTORY

        if offset == 0 {
            guard let length else { throw .invalidValue }
            guard data.count <= length else { throw .invalidValue }
            // Offset 0 truncates and (re)opens the transfer.
            files.transfer = FileStore.Transfer(path: path, length: length)
            files.write(path, data)
        } else {
            let current = files.size(of: path) ?? 0
            guard offset == current else {
                files.closeTransfer()
                throw .group(.fileSystem, 11, extra: .entries(["len": .unsigned(UInt64(current))]))  // OFFSET_NOT_VALID
            }
            if files.transfer?.path != path { files.transfer = FileStore.Transfer(path: path, length: nil) }
            if let total = files.transfer?.length, offset + data.count > total { throw .invalidValue }
            files.append(path, data)
        }
        let written = files.size(of: path) ?? 0
        if let total = files.transfer?.length, written >= total { files.closeTransfer() }
        return .ok(["off": .unsigned(UInt64(written))])
    }

    private func fileStatus(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let path = try existingFile(try request.fields())
        return .ok(["len": .unsigned(UInt64(files.size(of: path) ?? 0))])
    }

    private func fileHash(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.fields()
        let path = try existingFile(fields)
        let type = try fields.text("type") ?? "crc32"
        guard type == "crc32" || type == "sha256" else { throw .group(.fileSystem, 13) }  // HASH_NOT_FOUND
        let offset = try fields.count("off") ?? 0
        let requested = try fields.count("len")
        guard let contents = files.contents(of: path) else { throw .group(.fileSystem, 3) }
        guard !contents.isEmpty else { throw .group(.fileSystem, 16) }  // FILE_EMPTY
        guard offset < contents.count else { throw .group(.fileSystem, 12) }  // OFFSET_LARGER_THAN_FILE
        var length = contents.count - offset
        if let requested, requested > 0 { length = min(length, requested) }
        let range = contents[offset..<(offset + length)]
        let output: CBOR =
            type == "crc32"
            ? .unsigned(UInt64(CRC32.checksum(range)))
            : .bytes(Array(SHA256.hash(data: range)))
        var entries: [CBORMapEntry] = .entries(["type": .text(type)])
        if offset != 0 { entries.append("off", .unsigned(UInt64(offset))) }
        entries.append("len", .unsigned(UInt64(length)))
        entries.append("output", output)
        return .success(entries)
    }
}
