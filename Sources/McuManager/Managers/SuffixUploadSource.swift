#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The bytes of `base` from `start` on.
struct SuffixUploadSource<Base: UploadSource>: UploadSource {
    let base: Base
    let start: Int
    init(_ base: Base, from start: Int) {
        self.base = base
        self.start = start
    }
    var size: Int { base.size - start }
    func read(offset: Int, length: Int) throws -> Data { try base.read(offset: start + offset, length: length) }
}
