#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// How one kind of chunked upload (image, file, SUIT) builds its chunk requests and reads the answers.
public protocol ChunkedUploadTarget: Sendable {
    /// The chunk request type.
    associatedtype Request: McuMgrRequest
    /// The request carrying `data` at `offset` of a `totalSize`-byte upload (first-chunk keys at offset 0).
    func request(offset: Int, data: Data, totalSize: Int) -> Request
    /// The next offset the device expects, read from its answer to a chunk.
    /// - Throws: `McuMgrError` for device errors (a busy device's `rc 10` is retried by the uploader).
    func deviceOffset(from packet: SMPPacket) throws -> Int
    /// Whether the device may spend seconds on the first chunk (an image slot's erase), so that it is not
    /// resent sooner than the link's `LinkLimits.eraseResendFloor`. Default: true.
    var firstChunkMayErase: Bool { get }
    /// Whether `packet` refuses the chunk for its offset and names the device's own instead (Zephyr's fs
    /// error 11 with `len`): the device took none of the chunk, and every byte before the offset it names
    /// came from an earlier request. Default: false (the answer's offset is all there is to read).
    func refusesChunkOffset(_ packet: SMPPacket) -> Bool
}

extension ChunkedUploadTarget {
    public var firstChunkMayErase: Bool { true }
    public func refusesChunkOffset(_ packet: SMPPacket) -> Bool { false }
}

/// The pipelined upload engine shared by image, file and SUIT uploads: a thin runner of
/// `SMPUploadMachine`, which decides what to send and what each answer means.
///
/// Before the first chunk it settles the link's limits (`LinkLimits`): the device's buffers from
/// `os params` (or, without them, the largest request the device answers), and on a serial console
/// the line limits `LinkProbe` learns when the upload is long enough to gain from it. Chunks are sized
/// from the real encoded request; as many are in flight as the client's refined `LinkLimits` say
/// (`window`: `buf_count - 1`, half of it over UDP, never more than the link holds).
/// The runner reads the data, submits the requests and feeds the answers back. Cancelling the calling
/// task cancels the chunks in flight and throws a `.cancelled` error. Its time (busy pauses, the
/// machine's progress timeout, rates, durations) is the client's ``McuMgrClient/clock``.
public struct ChunkedUploader<Target: ChunkedUploadTarget>: Sendable {
    /// The client that sends the chunks.
    public let client: McuMgrClient
    /// Builds the chunk requests.
    public let target: Target
    /// Chunk size, pipelining and timing settings.
    public let configuration: UploadConfiguration
    /// Pause / resume from other tasks, and word of a resumed upload; nil when not needed.
    public let control: UploadControl?

    /// Creates an uploader.
    public init(
        client: McuMgrClient, target: Target, configuration: UploadConfiguration = .init(),
        control: UploadControl? = nil
    ) {
        self.client = client
        self.target = target
        self.configuration = configuration
        self.control = control
    }

    /// Uploads all of `source`.
    /// - Returns: what the upload did (where it resumed, chunk size, depth).
    /// - Throws: `McuMgrError` (device errors, timeouts, `.cancelled`).
    public func upload(
        _ source: some UploadSource, progress: TransferProgressHandler? = nil
    ) async throws -> UploadResult {
        let target = self.target
        let engine = UploadEngine(
            client: client, configuration: configuration, control: control,
            command: UploadEngine.Command(
                operation: Target.Request.operation, group: Target.Request.group, command: Target.Request.command,
                name: Target.Request.operationName,
                firstChunkMayErase: target.firstChunkMayErase),
            request: { offset, data, total in try UploadEngine.encode(target.request(offset: offset, data: data, totalSize: total)) },
            deviceOffset: { try target.deviceOffset(from: $0) },
            refusesOffset: { target.refusesChunkOffset($0) })
        return try await engine.upload(source, progress: progress)
    }
}
