import Foundation
import ZIPFoundation

/// A zip read entirely in memory, with every entry checked before any is read: no `..` or absolute
/// paths, no duplicate names, declared sizes within the limits. Nothing is ever written to disk.
struct PackageArchive {
    /// Entry paths of regular files, in archive order.
    let paths: [String]
    private let archive: Archive
    private let entries: [String: Entry]
    private let limits: McuMgrPackage.Limits
    private let name: String

    /// Opens and checks the zip in `data`; `name` names the package in error messages.
    init(data: Data, name: String, limits: McuMgrPackage.Limits) throws {
        self.name = name
        self.limits = limits
        try Self.checkBounds([UInt8](data), name: name)
        do {
            archive = try Archive(data: data, accessMode: .read)
        } catch {
            throw McuMgrError(
                .file,
                "\(name) is not a readable zip archive (\(error)); it may be truncated or corrupt, "
                    + "download or copy it again"
            )
        }
        var entries: [String: Entry] = [:]
        var paths: [String] = []
        var total: UInt64 = 0
        for entry in archive {
            let path = entry.path
            try Self.checkPath(path, package: name)
            guard entry.type != .symlink else {
                throw McuMgrError(
                    .file, "\(name) holds a symbolic link \"\(path)\"; firmware packages never do, so it is refused")
            }
            guard entry.type == .file else { continue }
            guard entries[path] == nil else {
                throw McuMgrError(
                    .file, "\(name) holds two entries named \"\(path)\"; the package is refused, rebuild it")
            }
            let size = entry.uncompressedSize
            guard size <= UInt64(limits.maximumEntrySize) else {
                throw McuMgrError(
                    .file,
                    "\(name): entry \"\(path)\" declares \(size) bytes uncompressed, more than the "
                        + "\(limits.maximumEntrySize)-byte limit per file; the package is refused "
                        + "(raise McuMgrPackage.Limits if it is genuine)"
                )
            }
            total += size
            guard total <= UInt64(limits.maximumTotalSize) else {
                throw McuMgrError(
                    .file,
                    "\(name): its entries declare more than \(limits.maximumTotalSize) bytes uncompressed in all; "
                        + "the package is refused (raise McuMgrPackage.Limits if it is genuine)"
                )
            }
            entries[path] = entry
            paths.append(path)
        }
        self.entries = entries
        self.paths = paths
    }

    /// Checks that every offset and length the zip's directory declares stays inside the data, before
    /// ZIPFoundation (whose in-memory reader traps on offsets past the end) reads it. Zip64 is refused:
    /// firmware packages are far below 4 GiB.
    static func checkBounds(_ bytes: [UInt8], name: String) throws {
        func corrupt(_ why: String) -> McuMgrError {
            McuMgrError(
                .file,
                "\(name) is not a readable zip archive (\(why)); it may be truncated or corrupt, download or copy it again"
            )
        }
        func u16(_ i: Int) -> Int { Int(bytes[i]) | Int(bytes[i + 1]) << 8 }
        func u32(_ i: Int) -> Int { u16(i) | u16(i + 2) << 16 }
        func signature(_ i: Int, _ value: Int) -> Bool { i >= 0 && i + 4 <= bytes.count && u32(i) == value }

        guard bytes.count >= 22 else { throw corrupt("\(bytes.count) bytes, too short for a zip") }
        var eocd = bytes.count - 22
        let lowest = max(0, bytes.count - 22 - 0xFFFF)
        while eocd >= lowest && !signature(eocd, 0x0605_4B50) { eocd -= 1 }
        guard eocd >= lowest else { throw corrupt("no end of central directory record") }
        let count = u16(eocd + 10)
        let directorySize = u32(eocd + 12)
        let directoryOffset = u32(eocd + 16)
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            throw corrupt("zip64 archives are not supported for firmware packages")
        }
        let directoryEnd = directoryOffset + directorySize
        guard directoryEnd <= eocd else { throw corrupt("the central directory lies outside the file") }
        var p = directoryOffset
        for _ in 0..<count {
            guard p + 46 <= directoryEnd, signature(p, 0x0201_4B50) else {
                throw corrupt("a central directory entry is damaged")
            }
            let compressed = u32(p + 20)
            let uncompressed = u32(p + 24)
            let local = u32(p + 42)
            if compressed == 0xFFFF_FFFF || uncompressed == 0xFFFF_FFFF || local == 0xFFFF_FFFF {
                throw corrupt("zip64 entries are not supported for firmware packages")
            }
            let next = p + 46 + u16(p + 28) + u16(p + 30) + u16(p + 32)
            guard next <= directoryEnd else { throw corrupt("a central directory entry runs past the directory") }
            guard local + 30 <= bytes.count, signature(local, 0x0403_4B50) else {
                throw corrupt("an entry's local header lies outside the file or is damaged")
            }
            let dataStart = local + 30 + u16(local + 26) + u16(local + 28)
            guard dataStart + max(compressed, u32(local + 18)) <= bytes.count else {
                throw corrupt("an entry's data runs past the end of the file")
            }
            p = next
        }
    }

    /// Refuses paths that could point outside the archive.
    static func checkPath(_ path: String, package name: String) throws {
        let components = path.split(whereSeparator: { $0 == "/" || $0 == "\\" })
        if path.hasPrefix("/") || path.hasPrefix("\\") || (path.count >= 2 && path.dropFirst().first == ":") {
            throw McuMgrError(
                .file,
                "\(name) holds an entry with an absolute path (\"\(path)\"); the package is refused. "
                    + "Use the dfu_application.zip your nRF Connect SDK build wrote"
            )
        }
        if components.contains("..") {
            throw McuMgrError(
                .file,
                "\(name) holds an entry whose path climbs out of the archive with \"..\" (\"\(path)\"); "
                    + "the package is refused. Use the dfu_application.zip your nRF Connect SDK build wrote"
            )
        }
        if path.contains("\0") {
            throw McuMgrError(.file, "\(name) holds an entry whose path contains a NUL byte; the package is refused")
        }
    }

    /// Whether the archive holds a regular file at `path`.
    func contains(_ path: String) -> Bool { entries[path] != nil }

    /// The bytes of the file at `path`, read in memory; never more than its declared size.
    func read(_ path: String) throws -> Data {
        guard let entry = entries[path] else {
            throw McuMgrError(.file, "\(name) has no file \"\(path)\"")
        }
        let declared = Int(entry.uncompressedSize)
        var data = Data()
        data.reserveCapacity(declared)
        do {
            _ = try archive.extract(entry, skipCRC32: false) { chunk in
                guard data.count + chunk.count <= declared else {
                    throw McuMgrError(
                        .file,
                        "\(name): entry \"\(path)\" holds more data than the \(declared) bytes it declares; "
                            + "the package is refused"
                    )
                }
                data.append(chunk)
            }
        } catch let error as McuMgrError {
            throw error
        } catch {
            throw McuMgrError(
                .file,
                "\(name): entry \"\(path)\" cannot be read (\(error)); the zip is corrupt or truncated, "
                    + "download or copy it again"
            )
        }
        guard data.count == declared else {
            throw McuMgrError(
                .file,
                "\(name): entry \"\(path)\" holds \(data.count) bytes but declares \(declared); the zip is corrupt, "
                    + "download or copy it again"
            )
        }
        return data
    }
}
