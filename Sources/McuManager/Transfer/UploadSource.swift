#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Random-access bytes to upload. Read only from the uploading task.
public protocol UploadSource {
    /// Total bytes.
    var size: Int { get }
    /// Reads `length` bytes at `offset`.
    func read(offset: Int, length: Int) throws -> Data
}

/// Upload bytes held in memory.
public struct DataUploadSource: UploadSource, Sendable {
    /// The bytes.
    public let data: Data
    /// Wraps `data`.
    public init(_ data: Data) { self.data = data }
    public var size: Int { data.count }
    public func read(offset: Int, length: Int) throws -> Data {
        let start = data.startIndex + offset
        return Data(data[start..<(start + length)])
    }
}

/// Upload bytes streamed from a local file, a chunk at a time.
public final class FileUploadSource: UploadSource {
    /// The file.
    public let url: URL
    public let size: Int
    private let file: LocalFile

    /// Opens `url` for reading.
    /// - Throws: `McuMgrError` of kind `.file` when the file cannot be opened.
    public init(url: URL) throws {
        self.url = url
        do {
            file = try LocalFile(readingFrom: url.path)
            size = try file.size()
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path): \(describeFileError(error)); check the path and permissions")
        }
    }

    public func read(offset: Int, length: Int) throws -> Data {
        do {
            let data = try file.read(offset: offset, length: length)
            guard data.count == length else {
                throw McuMgrError(.file, "\(url.path) changed size while uploading (short read at \(offset)); do not modify the file during the upload")
            }
            return data
        } catch let error as McuMgrError {
            throw error
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path) at offset \(offset): \(describeFileError(error))")
        }
    }
}
