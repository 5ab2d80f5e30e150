/// An in-memory file system under one mount point: path → bytes, directories implied by the paths,
/// and the one open transfer Zephyr's fs_mgmt keeps (PROTOCOL.md 3.6).
struct FileStore: Sendable {
    /// The open upload/download: which file, and the total length announced at offset 0.
    struct Transfer: Sendable, Hashable {
        var path: String
        var length: Int?
    }

    let mountPoint: String
    private(set) var files: [String: [UInt8]]
    var transfer: Transfer?

    init(mountPoint: String, files: [String: [UInt8]]) {
        self.mountPoint = mountPoint
        self.files = files
    }

    enum PathKind { case file, directory, missing }

    /// Whether the path lies under the mount point.
    func isMounted(_ path: String) -> Bool {
        path == mountPoint || path.hasPrefix(mountPoint + "/")
    }

    func kind(of path: String) -> PathKind {
        if files[path] != nil { return .file }
        let prefix = path.hasSuffix("/") ? path : path + "/"
        if path == mountPoint || files.keys.contains(where: { $0.hasPrefix(prefix) }) { return .directory }
        return .missing
    }

    func size(of path: String) -> Int? { files[path]?.count }

    func contents(of path: String) -> [UInt8]? { files[path] }

    mutating func truncate(_ path: String) { files[path] = [] }

    /// Appends in place (no copy of the existing bytes).
    mutating func append(_ path: String, _ data: [UInt8]) {
        files[path, default: []].append(contentsOf: data)
    }

    mutating func write(_ path: String, _ data: [UInt8]) { files[path] = data }

    mutating func remove(_ path: String) { files[path] = nil }

    mutating func closeTransfer() { transfer = nil }

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
