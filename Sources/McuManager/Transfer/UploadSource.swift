import Foundation

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
    private let handle: FileHandle

    /// Opens `url` for reading.
    /// - Throws: `McuMgrError` of kind `.file` when the file cannot be opened.
    public init(url: URL) throws {
        self.url = url
        do {
            handle = try FileHandle(forReadingFrom: url)
            let end = try handle.seekToEnd()
            size = Int(end)
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path): \(error.localizedDescription); check the path and permissions")
        }
    }

    deinit { try? handle.close() }

    public func read(offset: Int, length: Int) throws -> Data {
        do {
            try handle.seek(toOffset: UInt64(offset))
            let data = try handle.read(upToCount: length) ?? Data()
            guard data.count == length else {
                throw McuMgrError(.file, "\(url.path) changed size while uploading (short read at \(offset)); do not modify the file during the upload")
            }
            return data
        } catch let error as McuMgrError {
            throw error
        } catch {
            throw McuMgrError(.file, "cannot read \(url.path) at offset \(offset): \(error.localizedDescription)")
        }
    }
}
