import McuMgrCore

/// An in-memory LittleFS under one mount point, as Zephyr's fs_mgmt sees it (PROTOCOL.md 3.6): files whose
/// size counts only once committed (a file open for writing shows its old size to stat and hash until
/// it is closed), a block budget that makes writes fail when the file system is full, and the one file
/// fs_mgmt keeps open between requests.
///
/// Measured on native_sim_udp 4.4.0 (LittleFS with four 4 KiB blocks at /lfs1): the root directory's
/// metadata pair takes two blocks; a file of up to 64 bytes lives inline in the metadata (no block);
/// a larger one takes data blocks as LittleFS's CTZ skip list lays them out (the first block holds 4096
/// bytes, the next 4092, ...): one file of 8188 bytes fits, 8189 does not; two 4096-byte files fit, a
/// third file larger than 64 bytes does not; two 65-byte files take both blocks. Rewriting a file
/// writes its new blocks before the old ones are released (copy on write): with both blocks taken,
/// rewriting one of the files fails at its first chunk. A failed write leaves the file as it was last
/// committed (a new file stays empty).
struct FileStore: Sendable {
    /// The file fs_mgmt holds open between requests (`fs_mgmt_ctxt`).
    struct Transfer: Sendable, Hashable {
        enum Kind: Sendable, Hashable { case upload, download }
        var kind: Kind
        var path: String
        /// The offset the next request is expected at (`fs_mgmt_ctxt.off`).
        var offset: Int = 0
        /// The total length: from the upload's first request (0 if unknown), or the file's size when a
        /// download opened it.
        var length: Int = 0
        /// An upload's file contents with the writes not yet committed.
        var working: [UInt8] = []
        /// The file position (`fs_tell`) of an upload.
        var position: Int = 0
        /// Whether this upload truncated the file (its old blocks stay taken until the commit).
        var truncated = false
        /// When the last request touched it: Zephyr closes an idle file after
        /// `CONFIG_MCUMGR_GRP_FS_FILE_AUTOMATIC_IDLE_CLOSE_TIME`.
        var lastUse: SMPInstant = .zero
    }

    /// Block layout of the simulated LittleFS.
    struct Geometry: Sendable, Hashable {
        var blockSize: Int
        var blockCount: Int
        /// Blocks the root directory's metadata pair takes.
        var metadataBlocks: Int = 2
        /// Largest file kept inline in the metadata (LittleFS: the cache size, 64 on the shared builds).
        var inlineLimit: Int = 64

        var dataBlocks: Int { max(0, blockCount - metadataBlocks) }

        /// Data blocks a file of `size` bytes takes: none when inline, else the CTZ skip list's count
        /// (block i > 0 gives up 4 bytes per pointer, ctz(i) + 1 pointers).
        func blocks(forSize size: Int) -> Int {
            guard size > inlineLimit else { return 0 }
            var remaining = size
            var count = 0
            while remaining > 0 {
                let pointers = count == 0 ? 0 : count.trailingZeroBitCount + 1
                remaining -= blockSize - 4 * pointers
                count += 1
            }
            return count
        }
    }

    let mountPoint: String
    let geometry: Geometry?
    /// Committed contents by path.
    private(set) var files: [String: [UInt8]]
    var transfer: Transfer?
    /// The flash under the mounted file system was erased (Zephyr basic group): every operation on a
    /// path under the mount point fails until the next mount.
    var storageErased = false

    /// - Parameter geometry: nil = unlimited space.
    init(mountPoint: String, files: [String: [UInt8]], geometry: Geometry? = nil) {
        self.mountPoint = mountPoint
        self.files = files
        self.geometry = geometry
    }

    enum PathKind { case file, directory, missing }

    /// Whether the path lies under the mount point.
    func isMounted(_ path: String) -> Bool {
        path == mountPoint || path.hasPrefix(mountPoint + "/")
    }

    func kind(of path: String) -> PathKind {
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        if files[path] != nil { return .file }
        let prefix = path + "/"
        if path == mountPoint || files.keys.contains(where: { $0.hasPrefix(prefix) }) { return .directory }
        return .missing
    }

    /// The committed size (what `fs_stat` reports).
    func size(of path: String) -> Int? { files[path]?.count }

    /// The committed contents.
    func contents(of path: String) -> [UInt8]? { files[path] }

    /// Creates or replaces a committed file (tests, inspection).
    mutating func write(_ path: String, _ data: [UInt8]) { files[path] = data }

    mutating func remove(_ path: String) { files[path] = nil }

    /// Creates an empty committed file if there is none (`fs_open` with `FS_O_CREATE`).
    mutating func create(_ path: String) {
        if files[path] == nil { files[path] = [] }
    }

    /// Closes the open file (`fs_mgmt_cleanup`): an upload's writes are committed.
    mutating func closeTransfer() {
        if let transfer, transfer.kind == .upload { files[transfer.path] = transfer.working }
        transfer = nil
    }

    /// Drops the open upload without committing (a write failed: LittleFS leaves the file as last synced).
    mutating func abandonTransfer() { transfer = nil }

    /// A reboot after the storage was erased: LittleFS cannot mount the blank partition and formats it.
    mutating func remountAfterErase() {
        guard storageErased else { return }
        storageErased = false
        files = [:]
        transfer = nil
    }

    /// Whether the open upload's file can hold `working` bytes without running out of blocks.
    func hasSpace(forWorking size: Int) -> Bool {
        guard let geometry, let transfer else { return true }
        var used = 0
        for (path, bytes) in files where path != transfer.path {
            used += geometry.blocks(forSize: bytes.count)
        }
        let committed = geometry.blocks(forSize: files[transfer.path]?.count ?? 0)
        let working = geometry.blocks(forSize: size)
        used += transfer.truncated ? committed + working : max(committed, working)
        return used <= geometry.dataBlocks
    }

    /// Entries directly inside a directory: (name, size or nil for a subdirectory), sorted.
    func list(_ directory: String) -> [(name: String, size: Int?)] {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        var result: [String: Int?] = [:]
        for (path, bytes) in files where path.hasPrefix(prefix) {
            let rest = path.dropFirst(prefix.count)
            if let slash = rest.firstIndex(of: "/") {
                result[String(rest[..<slash])] = .some(nil)
            } else {
                result[String(rest)] = bytes.count
            }
        }
        return result.keys.sorted().map { ($0, result[$0]!) }
    }
}
