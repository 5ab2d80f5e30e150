#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The first `length` bytes of `base`.
struct PrefixUploadSource<Base: UploadSource>: UploadSource {
    let base: Base
    let size: Int
    init(_ base: Base, length: Int) {
        self.base = base
        self.size = min(length, base.size)
    }
    func read(offset: Int, length: Int) throws -> Data { try base.read(offset: offset, length: length) }
}
