import McuMgrCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A firmware package opened for upgrade: a signed MCUboot image (`.bin`), an nRF Connect SDK
/// `dfu_application.zip` with `manifest.json` (multi-image, Direct-XIP or SUIT), or a SUIT envelope
/// (`.suit`). PROTOCOL.md sections 6 and 7.
///
/// Zips are read in memory only; entries with `..` or absolute paths, declared sizes above
/// ``Limits``, or a manifest that names missing files are refused with `McuMgrError(.file)`.
public struct McuMgrPackage: Sendable {
    /// Size limits applied before any zip entry is read.
    public struct Limits: Sendable, Hashable {
        /// Largest uncompressed size one entry may declare, and largest `.bin` / `.suit` file.
        public var maximumEntrySize: Int
        /// Largest uncompressed size all entries together may declare, and largest package file.
        public var maximumTotalSize: Int

        /// Creates limits.
        public init(maximumEntrySize: Int, maximumTotalSize: Int) {
            self.maximumEntrySize = maximumEntrySize
            self.maximumTotalSize = maximumTotalSize
        }

        /// 64 MiB per entry, 256 MiB in all.
        public static let `default` = Limits(maximumEntrySize: 64 << 20, maximumTotalSize: 256 << 20)
    }

    /// The kind of file the package was opened from.
    public enum Format: String, Sendable, Hashable {
        /// A single signed MCUboot image (`.bin`).
        case mcubootImage
        /// A `dfu_application.zip` with `manifest.json`.
        case zip
        /// A SUIT envelope (`.suit`).
        case suitEnvelope
    }

    /// The package's name: the manifest's `name` when it has one, else the file name.
    public var name: String
    /// The file name the package was opened from.
    public var fileName: String
    /// The kind of file the package was opened from.
    public var format: Format
    /// The manifest, for zips.
    public var manifest: McuMgrManifest?
    /// Every file to send, in manifest order (SUIT envelope first for SUIT zips).
    public var images: [Image]

    /// Opens the package at `url`, choosing the format from its extension (`.bin`, `.zip`, `.suit`).
    ///
    /// - Throws: `McuMgrError(.file)` saying what is wrong with the file and what to do.
    public init(url: URL, limits: Limits = .default) throws {
        let fileName = url.lastPathComponent
        try Self.checkExtension(of: fileName)
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        } catch {
            throw McuMgrError(.file, "cannot open \(url.path): no such file or it is not readable; check the path")
        }
        if let size = Self.fileSize(attributes), size > limits.maximumTotalSize {
            throw McuMgrError(
                .file,
                "\(fileName) is \(size) bytes, more than the \(limits.maximumTotalSize)-byte package limit; "
                    + "check that it is a firmware package"
            )
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path) (\(describeFileError(error))); check the path and permissions")
        }
        try self.init(data: data, fileName: fileName, limits: limits)
    }

    /// Opens a package held in memory; `fileName` chooses the format by its extension.
    ///
    /// - Throws: `McuMgrError(.file)` saying what is wrong with the file and what to do.
    public init(data: Data, fileName: String, limits: Limits = .default) throws {
        self.fileName = fileName
        self.manifest = nil
        switch try Self.checkExtension(of: fileName) {
        case .mcubootImage:
            try Self.checkSingleFileSize(data.count, name: fileName, limits: limits)
            let info = try PackageImageInfo(parsing: data, name: fileName)
            self.format = .mcubootImage
            self.name = fileName
            self.images = [
                Image(
                    image: 0, contentType: .mcubootImage, hash: info.hash, version: info.version, data: data,
                    fileName: fileName)
            ]
        case .suitEnvelope:
            try Self.checkSingleFileSize(data.count, name: fileName, limits: limits)
            self.format = .suitEnvelope
            self.name = fileName
            self.images = [try Self.envelopeImage(data, fileName: fileName)]
        case .zip:
            guard data.count <= limits.maximumTotalSize else {
                throw McuMgrError(
                    .file, "\(fileName) is \(data.count) bytes, more than the \(limits.maximumTotalSize)-byte package limit")
            }
            let archive = try PackageArchive(data: data, name: fileName, limits: limits)
            guard archive.contains("manifest.json") else {
                throw McuMgrError(
                    .file,
                    "\(fileName) has no manifest.json, so it is not an nRF Connect SDK dfu_application.zip; "
                        + "use the dfu_application.zip from the build directory, or upload a single .bin"
                )
            }
            let manifest = try McuMgrManifest(json: try archive.read("manifest.json"))
            self.format = .zip
            self.manifest = manifest
            self.name = manifest.name.flatMap { $0.isEmpty ? nil : $0 } ?? fileName
            self.images = try Self.images(of: manifest, in: archive, package: fileName)
        }
    }

    // MARK: Queries

    /// Total size in bytes of all images.
    public var totalSize: Int { images.reduce(0) { $0 + $1.size } }

    /// Size in bytes of each image, in ``images`` order.
    public var sizes: [Int] { images.map(\.size) }

    /// Whether the package holds Direct-XIP builds (files with a `slot`).
    public var isDirectXIP: Bool { images.contains { $0.slot != nil } }

    /// Whether the package is a SUIT update (envelope, with optional caches).
    public var isSUIT: Bool { images.contains { $0.contentType == .suitEnvelope } }

    /// Distinct image numbers of MCUboot images, ascending.
    public var imageNumbers: [Int] {
        Array(Set(images.filter { $0.contentType == .mcubootImage }.map(\.image))).sorted()
    }

    /// The build of `image` to upload when the device runs from `activeSlot`: for Direct-XIP packages the
    /// build linked for the other (inactive) slot; otherwise the only build of that image.
    public func image(forActiveSlot activeSlot: Int, image: Int = 0) -> Image? {
        let builds = images.filter { $0.contentType == .mcubootImage && $0.image == image }
        if builds.contains(where: { $0.slot != nil }) {
            return builds.first { $0.slot != nil && $0.slot != activeSlot }
        }
        return builds.first
    }

    /// The MCUboot images to upload given each image's active slot (missing entries mean slot 0): one
    /// build per image number, chosen by ``image(forActiveSlot:image:)``.
    public func imagesToUpload(activeSlots: [Int: Int] = [:]) -> [Image] {
        imageNumbers.compactMap { image(forActiveSlot: activeSlots[$0] ?? 0, image: $0) }
    }

    // MARK: Opening

    private enum Kind { case mcubootImage, zip, suitEnvelope }

    @discardableResult
    private static func checkExtension(of fileName: String) throws -> Kind {
        let ext = pathExtension(of: fileName).lowercased()
        switch ext {
        case "bin", "img": return .mcubootImage
        case "zip": return .zip
        case "suit": return .suitEnvelope
        default:
            let shown = ext.isEmpty ? "no extension" : "extension \".\(ext)\""
            var message = "\(fileName) has \(shown), which is not a firmware package; give a signed MCUboot image "
                + "(.bin), an nRF Connect SDK dfu_application.zip (.zip) or a SUIT envelope (.suit)"
            if ext == "hex" { message += " (convert Intel HEX with objcopy -I ihex -O binary, or use the .bin)" }
            throw McuMgrError(.file, message)
        }
    }

    /// The size `FileManager` reports: `UInt` from FoundationEssentials, `NSNumber` from Foundation.
    private static func fileSize(_ attributes: [FileAttributeKey: Any]) -> Int? {
        if let size = attributes[.size] as? UInt { return Int(exactly: size) }
        return attributes[.size] as? Int
    }

    private static func checkSingleFileSize(_ size: Int, name: String, limits: Limits) throws {
        guard size <= limits.maximumEntrySize else {
            throw McuMgrError(
                .file,
                "\(name) is \(size) bytes, more than the \(limits.maximumEntrySize)-byte image limit; "
                    + "check that it is a firmware image"
            )
        }
    }

    private static func envelopeImage(_ data: Data, fileName: String, image: Int = 0) throws -> Image {
        let info = try PackageSUITEnvelopeInfo(parsing: data, name: fileName)
        return Image(
            image: image, contentType: .suitEnvelope, hash: info.digest, version: info.sequenceNumber.map { "\($0)" },
            data: data, fileName: fileName)
    }

    private static func images(
        of manifest: McuMgrManifest, in archive: PackageArchive, package: String
    ) throws -> [Image] {
        guard !manifest.files.isEmpty else {
            throw McuMgrError(.file, "\(package): manifest.json lists no files; rebuild the package")
        }
        if let missing = manifest.files.first(where: { !archive.contains($0.file) }) {
            throw McuMgrError(
                .file,
                "\(package): manifest.json names \"\(missing.file)\", which is not in the zip; the package is "
                    + "incomplete or tampered with, rebuild or download it again"
            )
        }
        var images: [Image] = []
        var seen: Set<String> = []
        for file in manifest.files {
            let data = try archive.read(file.file)
            let name = "\(package): \(file.file)"
            switch file.type {
            case .suitEnvelope:
                images.append(try envelopeImage(data, fileName: file.file))
            case .cache:
                images.append(
                    Image(
                        image: file.image, contentType: .suitCache, hash: Data(SHA256.hash(data: data)),
                        data: data, fileName: file.file))
            default:
                // `application` and any other type: must be an MCUboot image.
                let info: PackageImageInfo
                do {
                    info = try PackageImageInfo(parsing: data, name: name)
                } catch let error as McuMgrError where file.type != .application {
                    throw McuMgrError(
                        .file, "\(error.message) (manifest type \"\(file.type)\" is not one this client knows)")
                }
                if let slot = file.slot, !(0...1).contains(slot) {
                    throw McuMgrError(
                        .file, "\(name): slot \(slot) in manifest.json is neither 0 nor 1; rebuild the package")
                }
                let key = "\(file.image)/\(file.slot.map(String.init) ?? "-")"
                guard seen.insert(key).inserted else {
                    let which = file.slot.map { " for slot \($0)" } ?? ""
                    throw McuMgrError(
                        .file,
                        "\(package): manifest.json lists image \(file.image)\(which) twice; rebuild the package"
                    )
                }
                images.append(
                    Image(
                        image: file.image, slot: file.slot, contentType: .mcubootImage, hash: info.hash,
                        version: info.version, data: data, fileName: file.file))
            }
        }
        // A Direct-XIP image must not also have a slot-less build.
        for number in Set(images.filter { $0.contentType == .mcubootImage }.map(\.image)) {
            let builds = images.filter { $0.contentType == .mcubootImage && $0.image == number }
            if builds.contains(where: { $0.slot == nil }) && builds.count > 1 {
                throw McuMgrError(
                    .file,
                    "\(package): manifest.json lists image \(number) both with and without a Direct-XIP slot; "
                        + "rebuild the package"
                )
            }
        }
        // SUIT: the envelope goes first, then the caches.
        return images.filter { $0.contentType == .suitEnvelope } + images.filter { $0.contentType != .suitEnvelope }
    }
}
