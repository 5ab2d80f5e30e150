import McuMgrCore

/// File-system group (8): download, upload, status, hash/checksum, supported hashes, close
/// (PROTOCOL.md 3.6), answered as Zephyr's fs_mgmt answers on LittleFS.
///
/// Measured on native_sim_udp 4.4.0 (the facts this handler reproduces):
/// - A request without `name`, or `off`, with a name of more than 64 bytes, a key of the wrong type, or
///   an upload at offset 0 without `len` gets `rc 3` (EINVAL), not a group error. Unknown keys are ignored.
/// - Upload at offset 0 opens (creating) the file and, when the chunk has data and the file had
///   committed data, truncates it. `len` is only used to close the file once that many bytes arrived:
///   data beyond it is accepted. An upload with empty data writes nothing: an existing file keeps its
///   contents (answer `off: 0`).
/// - A second offset-0 write while the same upload is open does not start over: the open file is
///   truncated only if its committed size is non-zero, the expected offset keeps counting, and a file
///   created in this upload gets the data appended (`abc` then `XY` at offset 0 answers `off: 5` and
///   leaves `abcXY`).
/// - A write at another offset than the expected one (a duplicate, a gap, or any offset > 0 with no
///   upload open: then the file's committed size is expected, and a missing file is created empty)
///   answers `err {8, 11}` with `len` = the expected offset and closes the file; the next write at `len`
///   reopens it and succeeds.
/// - A write the file system has no room for answers `err {8, 10}`; the file keeps its last committed
///   contents (a new file stays empty).
/// - While an upload is open, stat and hash see the committed size (0 for a new file: hash answers
///   FILE_EMPTY 16); a download of any file closes (commits) the upload.
/// - Paths: no leading `/` is FILE_INVALID_NAME (2) everywhere, as is `/` for an upload (stat of `/`
///   is FILE_IS_DIRECTORY 4); outside the mount point or in a missing directory an upload gets
///   MOUNT_POINT_NOT_FOUND (14) and stat, hash and download get FILE_NOT_FOUND (3); an upload to a
///   directory gets UNKNOWN (1).
/// - Download: `off` past the end answers `{off, data: h''}` (no error); `len` only at offset 0; chunks
///   of `buf_size` - 44 bytes (2004 at 2048).
/// - Hash: an empty file is FILE_EMPTY (16), `off` >= size is OFFSET_LARGER_THAN_FILE (12), `len: 0` or a
///   type name longer than 8 bytes is `rc 3`, an unknown type is CHECKSUM_HASH_NOT_FOUND (13); `off` is
///   echoed only when non-zero; `len` is what was hashed.
/// - In SMP v1 a group error becomes its `rc` alone (the `len` of err 11 is not sent).
/// - An open file is closed after ~4 s without requests (between 3 and 4.5 s measured).
extension DeviceState {
    /// `CONFIG_MCUMGR_GRP_FS_PATH_LEN`.
    static let maximumPathLength = 64
    /// Bytes of a download response that are not file data (`CBOR_AND_OTHER_HDR` in Zephyr's
    /// fs_mgmt_config.h): 2004-byte chunks at buf_size 2048, measured.
    static let downloadOverhead = 44

    mutating func handleFileSystem(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        closeIdleFile()
        if files.storageErased, [0, 1, 2].contains(request.command.rawValue),
            let name = try? request.decodedFields().text("name"), files.isMounted(name), name != files.mountPoint
        {
            // The erased partition under LittleFS: every file operation fails (EIO and the like → UNKNOWN);
            // the mount point itself is still a directory to the VFS. Measured on the mps2_an385 app.
            files.abandonTransfer()
            throw .group(.fileSystem, 1)
        }
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

    /// Zephyr's idle-close work item, run lazily: a file untouched for the idle time is closed.
    private mutating func closeIdleFile() {
        guard let transfer = files.transfer else { return }
        if now - transfer.lastUse >= configuration.fileIdleCloseTime { files.closeTransfer() }
    }

    /// The request's `name`: `rc 3` when missing, empty or longer than the path buffer.
    private func fileName(_ fields: RequestFields) throws(SimulatorFault) -> String {
        guard let name = try fields.text("name"), !name.isEmpty, name.utf8.count <= Self.maximumPathLength else {
            throw .invalidValue
        }
        return name
    }

    /// `fs_stat` as fs_mgmt maps it: the committed size of a regular file, or FS err 2 (bad path),
    /// 3 (missing, or outside every mount point), 4 (a directory).
    private func committedSize(_ path: String) throws(SimulatorFault) -> Int {
        guard path.hasPrefix("/") else { throw .group(.fileSystem, 2) }  // FILE_INVALID_NAME
        if path == "/" { throw .group(.fileSystem, 4) }  // the root is a directory
        guard files.isMounted(path) else { throw .group(.fileSystem, 3) }  // FILE_NOT_FOUND
        switch files.kind(of: path) {
        case .file: return files.size(of: path) ?? 0
        case .directory: throw .group(.fileSystem, 4)  // FILE_IS_DIRECTORY
        case .missing: throw .group(.fileSystem, 3)  // FILE_NOT_FOUND
        }
    }

    /// `fs_open(FS_O_CREATE | FS_O_WRITE)` as the upload maps its errors.
    private mutating func openForWriting(_ path: String) throws(SimulatorFault) {
        guard path.hasPrefix("/"), path != "/" else { throw .group(.fileSystem, 2) }  // FILE_INVALID_NAME
        guard files.isMounted(path), path != files.mountPoint else {
            throw .group(.fileSystem, path == files.mountPoint ? 1 : 14)  // EISDIR → UNKNOWN; MOUNT_POINT_NOT_FOUND
        }
        switch files.kind(of: path) {
        case .file: return
        case .directory: throw .group(.fileSystem, 1)  // UNKNOWN (EISDIR)
        case .missing:
            let parent = String(path[..<path.lastIndex(of: "/")!])
            guard parent == files.mountPoint || files.kind(of: parent) == .directory else {
                throw .group(.fileSystem, 14)  // ENOENT → MOUNT_POINT_NOT_FOUND
            }
            files.create(path)
        }
    }

    /// The largest download chunk (`MCUMGR_GRP_FS_DL_CHUNK_SIZE`).
    func downloadChunkSize() -> Int {
        var chunk = configuration.bufferSize - Self.downloadOverhead - (includesReturnCode ? 4 : 0)
        if let cap = configuration.downloadChunkSize { chunk = min(chunk, cap) }
        return max(1, chunk)
    }

    private mutating func fileDownload(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.decodedFields()
        guard let offset = try fields.count("off") else { throw .invalidValue }
        let path = try fileName(fields)
        if let transfer = files.transfer, transfer.kind != .download || transfer.path != path {
            files.closeTransfer()
        }
        if files.transfer == nil {
            let size = try committedSize(path)
            files.transfer = FileStore.Transfer(kind: .download, path: path, length: size)
        }
        let contents = files.contents(of: path) ?? []
        // LittleFS seeks past the end; the read there is empty.
        let start = min(offset, contents.count)
        let end = min(contents.count, start + downloadChunkSize())
        files.transfer!.offset = offset + (end - start)
        files.transfer!.lastUse = now
        var entries: [CBORMapEntry] = .entries([
            "off": .unsigned(UInt64(offset)), "data": .bytes(Array(contents[start..<end])),
        ])
        if offset == 0 { entries.append("len", .unsigned(UInt64(files.transfer!.length))) }
        finishTransferIfComplete()
        return .success(entries)
    }

    /// Closes the open file once `len` bytes have gone through (`fs_mgmt_upload_download_finish_check`).
    private mutating func finishTransferIfComplete() {
        guard let transfer = files.transfer, transfer.length > 0, transfer.offset >= transfer.length else { return }
        files.closeTransfer()
    }

    private mutating func fileUpload(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.decodedFields()
        guard let offset = try fields.count("off") else { throw .invalidValue }
        let path = try fileName(fields)
        let data = try fields.bytes("data") ?? []
        let length = try fields.count("len")
        if offset == 0 && length == nil { throw .invalidValue }

        if let transfer = files.transfer, transfer.kind != .upload || transfer.path != path {
            files.closeTransfer()
        }
        if files.transfer == nil {
            try openForWriting(path)
            files.transfer = FileStore.Transfer(
                kind: .upload, path: path, working: files.contents(of: path) ?? [])
        }
        files.transfer!.lastUse = now
        var existingSize = 0
        if offset == 0 {
            files.transfer!.length = length ?? 0
            existingSize = files.size(of: path) ?? 0
        } else if files.transfer!.offset == 0 {
            files.transfer!.offset = files.size(of: path) ?? 0
        }
        let expected = files.transfer!.offset
        if offset > 0 && offset != expected {
            files.closeTransfer()
            throw .group(.fileSystem, 11, extra: .entries(["len": .unsigned(UInt64(expected))]))  // OFFSET_NOT_VALID
        }
        if !data.isEmpty {
            var transfer = files.transfer!
            if offset == 0 && existingSize != 0 {
                transfer.working = []
                transfer.position = 0
                transfer.truncated = true
            } else if transfer.position != offset {
                transfer.position = transfer.working.count
            }
            let end = transfer.position + data.count
            files.transfer = transfer
            guard files.hasSpace(forWorking: max(end, transfer.working.count)) else {
                files.abandonTransfer()
                throw .group(.fileSystem, 10)  // FILE_WRITE_FAILED (ENOSPC)
            }
            if end > transfer.working.count {
                transfer.working.append(contentsOf: repeatElement(0, count: end - transfer.working.count))
            }
            transfer.working.replaceSubrange(transfer.position..<end, with: data)
            transfer.position = end
            transfer.offset += data.count
            files.transfer = transfer
        }
        let written = files.transfer!.offset
        finishTransferIfComplete()
        return .ok(["off": .unsigned(UInt64(written))])
    }

    private func fileStatus(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let size = try committedSize(try fileName(try request.decodedFields()))
        return .ok(["len": .unsigned(UInt64(size))])
    }

    private func fileHash(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.decodedFields()
        let type = try fields.text("type")
        let path = try fileName(fields)
        let offset = try fields.count("off") ?? 0
        let requested = try fields.count("len")
        guard (type?.utf8.count ?? 0) <= 8, requested != 0 else { throw .invalidValue }
        let name = (type?.isEmpty ?? true) ? "crc32" : type!
        guard name == "crc32" || name == "sha256" else { throw .group(.fileSystem, 13) }  // HASH_NOT_FOUND
        let size = try committedSize(path)
        guard offset < size else { throw .group(.fileSystem, size == 0 ? 16 : 12) }  // FILE_EMPTY, OFFSET_LARGER
        let contents = files.contents(of: path) ?? []
        let length = min(size - offset, requested ?? Int.max)
        let range = contents[offset..<(offset + length)]
        let output: CBOR =
            name == "crc32"
            ? .unsigned(UInt64(CRC32.checksum(range)))
            : .bytes(Array(SHA256.hash(data: range)))
        var entries: [CBORMapEntry] = .entries(["type": .text(name)])
        if offset != 0 { entries.append("off", .unsigned(UInt64(offset))) }
        entries.append("len", .unsigned(UInt64(length)))
        entries.append("output", output)
        return .success(entries)
    }
}
