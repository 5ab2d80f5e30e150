import CZlibSystem
import McuMgrCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#endif

/// A zip read entirely in memory, with every entry checked before any is read: no `..` or absolute
/// paths, no duplicate names, declared sizes within the limits, every offset and length inside the
/// data. Nothing is ever written to disk.
///
/// Reads what firmware packages hold: stored and deflated entries (zlib inflates), each checked
/// against its CRC-32 and declared size. Zip64, encrypted entries, other compression methods and
/// archives split over several files are refused with a clear error.
struct PackageArchive {
    /// One file or directory as the central directory describes it.
    struct Entry {
        enum Kind { case file, directory, symbolicLink }

        var path: String
        var kind: Kind
        var method: Int
        var flags: Int
        var crc32: UInt32
        var compressedSize: Int
        var uncompressedSize: Int
        /// Offset of the entry's data (after its local header) in the archive.
        var dataOffset: Int
    }

    /// Entry paths of regular files, in archive order.
    let paths: [String]
    private let bytes: [UInt8]
    private let entries: [String: Entry]
    private let name: String

    /// Opens and checks the zip in `data`; `name` names the package in error messages.
    init(data: Data, name: String, limits: McuMgrPackage.Limits) throws {
        self.name = name
        bytes = [UInt8](data)
        var entries: [String: Entry] = [:]
        var paths: [String] = []
        var total: UInt64 = 0
        for entry in try Self.centralDirectory(bytes, name: name) {
            let path = entry.path
            try Self.checkPath(path, package: name)
            guard entry.kind != .symbolicLink else {
                throw McuMgrError(
                    .file, "\(name) holds a symbolic link \"\(path)\"; firmware packages never do, so it is refused")
            }
            guard entry.kind == .file else { continue }
            guard entries[path] == nil else {
                throw McuMgrError(
                    .file, "\(name) holds two entries named \"\(path)\"; the package is refused, rebuild it")
            }
            let size = UInt64(entry.uncompressedSize)
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

    /// Reads the central directory, checking that every offset and length it declares stays inside
    /// the data. Zip64 is refused: firmware packages are far below 4 GiB.
    static func centralDirectory(_ bytes: [UInt8], name: String) throws -> [Entry] {
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
        if u16(eocd + 4) != 0 || u16(eocd + 6) != 0 || u16(eocd + 8) != count {
            throw corrupt("archives split over several files are not supported for firmware packages")
        }
        let directoryEnd = directoryOffset + directorySize
        guard directoryEnd <= eocd else { throw corrupt("the central directory lies outside the file") }
        var entries: [Entry] = []
        var p = directoryOffset
        for _ in 0..<count {
            guard p + 46 <= directoryEnd, signature(p, 0x0201_4B50) else {
                throw corrupt("a central directory entry is damaged")
            }
            let madeBy = u16(p + 4)
            let flags = u16(p + 8)
            let method = u16(p + 10)
            let crc32 = UInt32(u32(p + 16))
            let compressed = u32(p + 20)
            let uncompressed = u32(p + 24)
            let nameLength = u16(p + 28)
            let externalAttributes = u32(p + 38)
            let local = u32(p + 42)
            if compressed == 0xFFFF_FFFF || uncompressed == 0xFFFF_FFFF || local == 0xFFFF_FFFF {
                throw corrupt("zip64 entries are not supported for firmware packages")
            }
            let next = p + 46 + nameLength + u16(p + 30) + u16(p + 32)
            guard next <= directoryEnd else { throw corrupt("a central directory entry runs past the directory") }
            guard local + 30 <= bytes.count, signature(local, 0x0403_4B50) else {
                throw corrupt("an entry's local header lies outside the file or is damaged")
            }
            let dataStart = local + 30 + u16(local + 26) + u16(local + 28)
            guard dataStart + max(compressed, u32(local + 18)) <= bytes.count else {
                throw corrupt("an entry's data runs past the end of the file")
            }
            let path = Self.decodePath(bytes[(p + 46)..<(p + 46 + nameLength)], utf8: flags & 0x0800 != 0)
            guard let path else { throw corrupt("an entry's name is not valid UTF-8") }
            entries.append(
                Entry(
                    path: path, kind: Self.kind(path: path, madeBy: madeBy, externalAttributes: externalAttributes),
                    method: method, flags: flags, crc32: crc32, compressedSize: compressed,
                    uncompressedSize: uncompressed, dataOffset: dataStart))
            p = next
        }
        return entries
    }

    /// An entry's name: UTF-8 when its flags say so (nil when it is not valid UTF-8), else code page
    /// 437, the zip format's default.
    static func decodePath(_ raw: ArraySlice<UInt8>, utf8: Bool) -> String? {
        if utf8 {
            let path = String(decoding: raw, as: UTF8.self)
            return path.utf8.elementsEqual(raw) ? path : nil
        }
        var path = String.UnicodeScalarView()
        for byte in raw {
            path.append(byte < 0x80 ? Unicode.Scalar(byte) : codePage437High[Int(byte) - 0x80])
        }
        return String(path)
    }

    /// Code page 437's characters for bytes 0x80...0xFF, in order.
    private static let codePage437High: [Unicode.Scalar] = Array(
        ("ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐"
            + "└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{00A0}").unicodeScalars)

    /// Whether an entry is a file, a directory or a symbolic link: from the Unix mode the archiver
    /// stored (hosts Unix and macOS), the MS-DOS directory attribute, or a name ending in `/`.
    static func kind(path: String, madeBy: Int, externalAttributes: Int) -> Entry.Kind {
        let host = madeBy >> 8
        let namedLikeDirectory = path.hasSuffix("/")
        switch host {
        case 3, 19:  // Unix, OS X: st_mode in the high 16 bits
            switch (externalAttributes >> 16) & 0o170000 {
            case 0o100000: return .file
            case 0o040000: return .directory
            case 0o120000: return .symbolicLink
            default: return namedLikeDirectory ? .directory : .file
            }
        case 0:  // MS-DOS attributes: 0x10 is a directory
            return namedLikeDirectory || externalAttributes & 0x10 != 0 ? .directory : .file
        default:
            return namedLikeDirectory ? .directory : .file
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
        func unreadable(_ why: String) -> McuMgrError {
            McuMgrError(
                .file,
                "\(name): entry \"\(path)\" cannot be read (\(why)); the zip is corrupt or truncated, "
                    + "download or copy it again"
            )
        }
        let declared = entry.uncompressedSize
        guard entry.flags & 0x0001 == 0 else { throw unreadable("it is encrypted") }
        let stored = bytes[entry.dataOffset..<(entry.dataOffset + entry.compressedSize)]
        let content: [UInt8]
        switch entry.method {
        case 0:
            content = Array(stored)
        case 8:
            content = try Self.inflate(stored, atMost: declared, unreadable: unreadable)
        default:
            throw unreadable("compression method \(entry.method); only stored and deflated entries are supported")
        }
        guard content.count <= declared else {
            throw McuMgrError(
                .file,
                "\(name): entry \"\(path)\" holds more data than the \(declared) bytes it declares; "
                    + "the package is refused"
            )
        }
        guard content.count == declared else {
            throw McuMgrError(
                .file,
                "\(name): entry \"\(path)\" holds \(content.count) bytes but declares \(declared); the zip is corrupt, "
                    + "download or copy it again"
            )
        }
        guard CRC32.checksum(content) == entry.crc32 else { throw unreadable("CRC-32 mismatch") }
        return Data(content)
    }

    /// Inflates a raw deflate stream into at most `limit` + 1 bytes: one byte more than declared shows
    /// an entry that holds more than it says, without inflating the rest.
    static func inflate(
        _ input: ArraySlice<UInt8>, atMost limit: Int, unreadable: (String) -> McuMgrError
    ) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: limit + 1)
        var stream = z_stream()
        guard inflateInit2_(&stream, -MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw unreadable("zlib could not start inflating")
        }
        defer { inflateEnd(&stream) }
        let produced: Int = try input.withUnsafeBufferPointer { source in
            try output.withUnsafeMutableBufferPointer { target in
                // zlib does not write through next_in; the cast only satisfies its C signature.
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress
                stream.avail_out = uInt(target.count)
                while true {
                    let status = CZlibSystem.inflate(&stream, Z_NO_FLUSH)
                    let produced = target.count - Int(stream.avail_out)
                    switch status {
                    case Z_STREAM_END:
                        return produced
                    case Z_OK where stream.avail_out > 0 && stream.avail_in > 0:
                        continue
                    case Z_OK, Z_BUF_ERROR:
                        // Out of room: more data than declared. Out of input: the stream was cut short.
                        if stream.avail_out == 0 { return produced }
                        throw unreadable("the deflated data ends early")
                    default:
                        let message = stream.msg.map { String(cString: $0) } ?? "error \(status)"
                        throw unreadable("invalid deflated data: \(message)")
                    }
                }
            }
        }
        output.removeSubrange(produced...)
        return output
    }
}
