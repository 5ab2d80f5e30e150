#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a package needs of an MCUboot image: its version and image hash, after checking that the file is
/// a whole, intact image (`McuMgrImage` does the parsing and the hash check).
struct PackageImageInfo: Sendable {
    /// `major.minor.revision+build` as imgtool prints it.
    var version: String
    /// The image hash TLV (what `image list` reports and test/confirm take).
    var hash: Data

    init(parsing data: Data, name: String) throws {
        do {
            let image = try McuMgrImage(data: data)
            try image.verify()
            version = image.version.description
            hash = image.hash
        } catch let error as McuMgrError {
            throw McuMgrError(.file, error.message.hasPrefix(name) ? error.message : "\(name): \(error.message)")
        }
    }
}
