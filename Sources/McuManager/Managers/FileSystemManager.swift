#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The file-system group (8): streamed, pipelined, exact and verified file transfers.
///
/// What Zephyr's fs_mgmt does (measured on Zephyr 4.4.0 native_sim with LittleFS) shapes the upload:
/// - the device keeps one file open per transfer and closes it when a chunk reaches the length sent with
///   the chunk at offset 0; until then `stat` and `hash` see only what the file system has committed
///   (0 bytes, or the size at the last close);
/// - a chunk at another offset than the device's is answered FS error 11 with `len` = the device's
///   offset, and the device closes the file and forgets the length: the rest of the upload then leaves
///   the file open until its idle timer (about 4 s) or a close command;
/// - a chunk at offset 0 truncates a closed file, but while the file is still open a repeated offset-0
///   chunk is appended (the answer's `off` then runs past the file's size);
/// - a chunk with offset > 0 to a closed file appends to it (resuming works), and an upload of 0 bytes
///   leaves an existing file as it was.
/// So an upload closes the device's open file first and last, checks the device's length afterwards,
/// continues from the device's length when it is short, and starts again from offset 0 once when the
/// device holds more than the file.
public struct FileSystemManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// How a transfer was checked against the device's copy.
    public enum Verification: Sendable, Hashable, CustomStringConvertible {
        /// The lengths and the device's SHA-256 matched.
        case sha256
        /// The lengths and the device's CRC-32 matched.
        case crc32
        /// Only the lengths were compared: the device offers no hash or checksum.
        case length
        /// Both sides are empty (0 bytes); a device has no hash of an empty file (FS error 16, FILE_EMPTY).
        case empty
        /// Not checked, and why (device without hash or status support, or not asked for).
        case skipped(String)

        public var description: String {
            switch self {
            case .sha256: return "verified by SHA-256"
            case .crc32: return "verified by CRC-32"
            case .length: return "verified by length only (the device offers no hash or checksum)"
            case .empty: return "verified empty (0 bytes on both sides)"
            case .skipped(let why): return "not verified (\(why))"
            }
        }

        /// A short name for scripts: sha256, crc32, length, empty or none.
        public var method: String {
            switch self {
            case .sha256: return "sha256"
            case .crc32: return "crc32"
            case .length: return "length"
            case .empty: return "empty"
            case .skipped: return "none"
            }
        }

        /// How `SMPFileUploadMachine` found the device's copy checked, with the reasons in words.
        init(_ verification: SMPFileUploadMachine.Verification) {
            switch verification {
            case .sha256: self = .sha256
            case .crc32: self = .crc32
            case .length: self = .length
            case .empty: self = .empty
            case .notRequested: self = .skipped("not requested")
            case .noHashNorStatus: self = .skipped("the device offers neither a hash nor a file status")
            case .unknownHashType(let type): self = .skipped("the device used an unknown hash type \(type)")
            }
        }
    }

    /// What a finished transfer did.
    public struct TransferResult: Sendable, Hashable {
        /// Bytes transferred (the file's size).
        public var bytes: Int
        /// How the result was checked.
        public var verification: Verification
        /// Wall-clock time.
        public var duration: Duration
        /// Time spent moving the data alone (without the hash check afterwards).
        public var transferDuration: Duration
        /// Upload: the bytes the device already held of this file (checked by hash) when the upload began,
        /// so they were not sent again; 0 for a transfer from the start.
        public var resumedFrom: Int = 0
    }

    /// Uploads a local file to `remote` (an absolute path on the device), streaming it from disk.
    ///
    /// With `resume`, and when the file takes more than `resumeCheckMinimumChunks` chunks, first closes the
    /// file the device may hold open and asks for the device's copy: when it is the start of this file (its
    /// length and its hash of that part match), only the rest is sent. A shorter file is sent from offset 0
    /// at once (asking would cost more round trips than resending it saves; a file an earlier upload left
    /// open shows in the first answer's offset, and the upload then closes it and starts again).
    /// Chunks are pipelined as for image uploads. Afterwards, when the upload ran from offset 0 to its end
    /// (the device then closes the file itself) and `verify` is set, the device's hash of the whole file
    /// settles it in one round trip. Otherwise, or when that hash covers fewer bytes, the device's file is
    /// closed, its length must equal the local one (a short file is completed from the device's offset)
    /// and, with `verify`, its SHA-256 (else CRC-32) must match.
    /// Those decisions are `SMPFileUploadMachine`'s; this runs its actions (the requests, the local digests,
    /// the chunked upload, the memory of unfinished uploads, progress and timing).
    /// - Throws: `McuMgrError`; kind `.protocolViolation` when the device's copy differs.
    public func upload(
        _ local: URL, to remote: String, verify: Bool = true, resume: Bool = true,
        configuration: UploadConfiguration = .init(), progress: TransferProgressHandler? = nil
    ) async throws -> TransferResult {
        let clock = ContinuousClock()
        let source = try FileUploadSource(url: local)
        // Timed from the link being up: a connection's set-up (seconds over Bluetooth LE) is not the
        // transfer's.
        try await client.open()
        let started = clock.now
        let total = source.size
        let hashChoice = makeHashChoice()
        let memory = client.configuration.parametersMemory
        let device = client.transport.name
        // A known device holds an unfinished copy only of a path an upload from here left unfinished.
        let mayHoldStart = memory.map { !$0.knows(device) || $0.hasUnfinishedUpload(of: remote, to: device) } ?? true
        var machine = SMPFileUploadMachine(
            plan: .init(
                total: total, verify: verify, resume: resume, deviceMayHoldStart: mayHoldStart,
                worthCheckingForResume: resume && mayHoldStart
                    && worthCheckingForResume(total, remote: remote, configuration: configuration)))
        // The error of the last request the machine heard about, thrown as it came on `.fail(.requestError)`.
        var requestError: McuMgrError?
        var transferred: Duration?
        // The device cache's records of the upload are written while a request is on its way, not between
        // two: that the upload began, during its first chunk; that it ended, during the hash that checks it
        // (every byte is on the device by then; a copy found to differ is sent again whole, and a run
        // after one that failed sends the file whole too, as to any device without a record).
        var beginRecord: DeviceParametersMemory?
        var endRecord: DeviceParametersMemory?
        var endRecorded = false
        do {
            var actions = machine.start()
            while true {
                var event: SMPFileUploadMachine.Event?
                for action in actions {
                    switch action {
                    case .close:
                        try await closeOpenFile()
                    case .status:
                        let (answer, error) = try await statusAnswer(remote)
                        requestError = error
                        event = .status(answer)
                    case .hash(let length):
                        let ending = endRecord
                        endRecord = nil
                        endRecorded = endRecorded || ending != nil
                        async let recorded: Void? = ending?.finishUpload(of: remote, to: device)
                        let (answer, error) = try await hashAnswer(remote, length: length, bytes: length ?? total, hashes: hashChoice)
                        _ = await recorded
                        requestError = error
                        event = .hashed(answer)
                    case .localDigest(let type, let length):
                        let digest = try LocalDigest.digest(type, of: PrefixUploadSource(source, length: length))
                        event = .localDigest(digest.map { [UInt8]($0) })
                    case .beginUpload:
                        beginRecord = memory
                        endRecorded = false
                    case .upload(let offset):
                        let beginning = beginRecord
                        beginRecord = nil
                        async let recorded: Void? = beginning?.beginUpload(of: remote, bytes: total, to: device)
                        do {
                            try await send(source, from: offset, to: remote, configuration: configuration, progress: progress)
                            event = .uploaded
                        } catch let error as McuMgrError where error.kind == .protocolViolation {
                            requestError = error
                            event = .uploadViolation
                        }
                        _ = await recorded
                    case .reportComplete:
                        progress?(TransferProgress(bytesTransferred: total, totalBytes: total, bytesPerSecond: nil))
                    case .transferEnded:
                        transferred = clock.now - started
                        endRecord = memory
                    case .logRestart(let reason):
                        let message = transferError(reason, remote: remote, requestError: requestError).message
                        client.logger.warning("\(remote): \(message); uploading it again from offset 0")
                    case .finish(let verification, let resumedFrom):
                        if !endRecorded { memory?.finishUpload(of: remote, to: device) }
                        let duration = clock.now - started
                        return TransferResult(
                            bytes: total, verification: Verification(verification), duration: duration,
                            transferDuration: transferred ?? duration, resumedFrom: resumedFrom)
                    case .fail(let failure):
                        throw transferError(failure, remote: remote, requestError: requestError)
                    }
                }
                guard let event else {
                    throw McuMgrError(.protocolViolation, "file upload of \(remote): the upload stopped without an outcome; retry")
                }
                actions = machine.handle(event)
            }
        } catch is CancellationError {
            throw McuMgrError(.cancelled, "file upload was cancelled")
        } catch var error as McuMgrError where error.groupError == McuMgrGroupError(group: .fileSystem, rc: 10) {
            error.message += ": the device's file system is probably full, or the file is larger than it takes "
                + "(the LittleFS of Zephyr's smp_svr sample has four 4 KiB blocks); free space on the device or upload a smaller file"
            throw error
        }
    }

    /// Downloads `remote` into `destination`.
    ///
    /// Data goes to a temporary file `.NAME.UUID.download` beside `destination`, which is renamed into
    /// place only after the whole file arrived and (when the device offers a hash) matched; on any
    /// failure or cancellation the temporary file is removed and nothing appears under `destination`.
    /// A device that announces more than `configuration.maximumLength` bytes is refused before anything
    /// is written; requests that time out or meet a busy device are repeated until no data arrived for
    /// `configuration.stallTimeout`; `configuration.deadline` bounds the whole download.
    /// - Throws: `McuMgrError`; kind `.protocolViolation` when verification finds a difference or the
    ///   device's answers are inconsistent, `.timeout` for a stall or the deadline, `.usage` above the
    ///   size limit.
    public func download(
        _ remote: String, to destination: URL, verify: Bool = true,
        configuration: FileDownloadConfiguration = .init(), progress: TransferProgressHandler? = nil
    ) async throws -> TransferResult {
        let clock = ContinuousClock()
        let directory = destination.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            ".\(destination.lastPathComponent).\(UUID().uuidString).download")
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else {
            throw McuMgrError(
                .file, "cannot create \(temporary.path); check that \(directory.path) exists and is writable")
        }
        let handle: LocalFile
        do {
            handle = try LocalFile(writingTo: temporary.path)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw McuMgrError(.file, "cannot write \(temporary.path): \(describeFileError(error))")
        }
        do {
            // Timed from the link being up (see upload).
            try await client.open()
            let started = clock.now
            var sha = SHA256()
            var crc = CRC32()
            var rate = TransferRateEstimator()
            rate.record(bytes: 0, at: .zero)
            let offset = try await receive(remote, configuration: configuration) { piece, written, length in
                do {
                    try handle.write(piece)
                } catch {
                    throw McuMgrError(.file, "cannot write \(temporary.path): \(describeFileError(error))")
                }
                sha.update(data: piece)
                crc.update(piece)
                rate.record(bytes: written, at: clock.now - started)
                progress?(TransferProgress(bytesTransferred: written, totalBytes: length, bytesPerSecond: rate.bytesPerSecond))
            }
            let transferred = clock.now - started
            handle.close()
            let shaDigest = Data(sha.finalize())
            let crcDigest = crc.bigEndianBytes
            var verification = Verification(.notRequested)
            if verify {
                verification = try await self.verify(remote: remote, length: offset, hashes: makeHashChoice()) { type in
                    type == "sha256" ? shaDigest : type == "crc32" ? crcDigest : nil
                }
            }
            guard rename(temporary.path, destination.path) == 0 else {
                let reason = String(cString: strerror(errno))
                throw McuMgrError(.file, "cannot move the download to \(destination.path): \(reason)")
            }
            return TransferResult(
                bytes: offset, verification: verification, duration: clock.now - started,
                transferDuration: transferred)
        } catch {
            handle.close()
            try? FileManager.default.removeItem(at: temporary)
            if error is CancellationError { throw McuMgrError(.cancelled, "file download was cancelled") }
            throw error
        }
    }

    /// What one download request came back with.
    private enum DownloadOutcome: Sendable {
        case answer(offset: Int, DownloadPiece)
        case lost(offset: Int)
        case busy(offset: Int)
        case buffers(framesInFlight: Int?)
    }

    /// Downloads `remote` through `SMPDownloadMachine`, with as many requests in flight as the device's
    /// buffers allow (remembered, or asked for when the file is long enough to gain from it), handing
    /// each piece to `write` in file order with the bytes written so far and the file's length. Returns
    /// the length.
    private func receive(
        _ remote: String, configuration: FileDownloadConfiguration,
        write: (_ piece: Data, _ written: Int, _ length: Int) throws -> Void
    ) async throws -> Int {
        // The client's clock (a test's manual one, or the system's) times requests, pauses and the stall.
        let clock = client.clock
        let epoch = clock.now
        func now() -> SMPInstant { SMPInstant(nanoseconds: epoch.duration(to: clock.now).nanosecondsClamped) }
        let transport = client.transport
        let memory = client.configuration.parametersMemory
        // The device's buffers as the link or this client learned them on this connection, else as
        // remembered; the client's refined limits then give the window (its session's too).
        var link = await client.linkLimits
        if link.deviceBufferCount == nil, let remembered = memory?.recall(transport.name) {
            link = await client.refineLinkLimits(
                deviceBufferSize: remembered.bufferSize, deviceBufferCount: remembered.bufferCount, requestedWindow: nil)
        } else {
            link = await client.refineLinkLimits(requestedWindow: nil)
        }
        if let console = transport as? any McuMgrConsoleLineTransport,
            let lines = LinkProbe.adoptRemembered(client: client, transport: console, deviceBufferSize: link.deviceBufferSize)
        {
            link = await client.refineLinkLimits(requestedWindow: nil)
            client.logger.debug("link: the device's console lines as remembered, \(lines)")
        }
        // Answers that overlap on a link that reorders the pieces of one would mix (seen on real BlueZ
        // over EATT: the pieces of two 2.4 kB answers joined into one that parsed, with the wrong data).
        // On a console link each request holds the device's line buffers its frame needs until answered.
        let requestSize = SMPHeader.size + ((try? CBOREncoder().encode(FileDownloadRequest(name: remote, offset: Int(UInt32.max))))?.count ?? 0)
        let linkFrames = link.piecesArriveOutOfOrder ? 1 : link.framesInFlight(forPacket: requestSize)
        var machine = SMPDownloadMachine(
            limits: .init(
                depth: link.deviceBufferCount == nil ? nil : link.window(forPacket: requestSize),
                linkFramesInFlight: linkFrames, maximumLength: configuration.maximumLength,
                stallTimeout: configuration.stallTimeout, deadline: configuration.deadline,
                requestTimeout: client.configuration.timeout))
        let client = self.client
        @Sendable func request(_ offset: Int, timeout: Duration) async throws -> DownloadOutcome {
            do {
                let item = try await client.sendItem(FileDownloadRequest(name: remote, offset: offset), timeout: timeout)
                return .answer(offset: offset, try Self.downloadPiece(item, remote: remote, requested: offset))
            } catch let error as McuMgrError where error.kind == .timeout {
                return .lost(offset: offset)  // Reads are idempotent: the machine asks again.
            } catch let error as McuMgrError where error.returnCode == .busy {
                return .busy(offset: offset)
            }
        }
        return try await pipeline()

        func pipeline() async throws -> Int {
            try await withThrowingTaskGroup(of: DownloadOutcome.self) { group in
                var pieces: [Int: Data] = [:]
                var actions = machine.start(now: now())
                while true {
                    for action in actions {
                        switch action {
                        case .send(let offset, let timeout):
                            group.addTask { try await request(offset, timeout: timeout) }
                        case .sendAfter(let delay, let offset, let timeout):
                            group.addTask {
                                try await clock.sleep(for: delay)
                                return try await request(offset, timeout: timeout)
                            }
                        case .write(let offset, let skip, let count):
                            guard let data = pieces.removeValue(forKey: offset) else { continue }
                            let piece = skip == 0 ? data : data.subdata(in: data.startIndex + skip..<data.startIndex + count)
                            try write(piece, offset + count, machine.length ?? offset + count)
                        case .discard(let offset):
                            pieces[offset] = nil
                        case .askForBuffers:
                            group.addTask {
                                guard let parameters = try? await client.send(McuMgrParametersRequest()) else {
                                    return .buffers(framesInFlight: nil)
                                }
                                memory?.remember(
                                    .init(bufferSize: parameters.bufferSize, bufferCount: parameters.bufferCount), for: transport.name)
                                let refined = await client.refineLinkLimits(
                                    deviceBufferSize: parameters.bufferSize, deviceBufferCount: parameters.bufferCount,
                                    requestedWindow: nil)
                                return .buffers(framesInFlight: refined.window(forPacket: requestSize))
                            }
                        case .finished(let length):
                            group.cancelAll()
                            return length
                        case .fail(let failure):
                            group.cancelAll()
                            throw await downloadError(failure, remote: remote)
                        }
                    }
                    guard let outcome = try await group.next() else {
                        throw McuMgrError(.protocolViolation, "file download of \(remote): nothing left to ask for at offset \(machine.written); retry")
                    }
                    try Task.checkCancellation()
                    switch outcome {
                    case .answer(let offset, let piece):
                        pieces[offset] = piece.data
                        actions = machine.answered(requested: offset, dataCount: piece.data.count, length: piece.length, now: now())
                    case .lost(let offset):
                        actions = machine.lost(offset: offset, now: now())
                    case .busy(let offset):
                        actions = machine.busy(offset: offset, now: now())
                    case .buffers(let frames):
                        actions = machine.buffers(framesInFlight: frames, now: now())
                    }
                }
            }
        }
    }

    /// The error a failed download ends with.
    private func downloadError(_ failure: SMPDownloadMachine.Failure, remote: String) async -> McuMgrError {
        func of(_ length: Int?) -> String { length.map(String.init) ?? "?" }
        switch failure {
        case .noLength:
            return McuMgrError(.protocolViolation, "file download: the device did not send the length (`len`) of \(remote)")
        case .tooLarge(let length, let limit):
            return McuMgrError(
                .usage,
                "file download: the device announces \(length) bytes for \(remote), more than the limit of \(limit) bytes; raise the limit (smp fs download --max-size) if the file really is that large")
        case .lengthChanged(let from, let to):
            return McuMgrError(
                .protocolViolation, "file download: \(remote) changed size during the download (\(from) -> \(to) bytes); retry")
        case .noData(let offset, let length):
            return McuMgrError(
                .protocolViolation,
                "file download: the device sent no data at offset \(offset) of \(length); the file may have changed, retry")
        case .pastTheEnd(let length):
            return McuMgrError(.protocolViolation, "file download: the device sent more than the \(length) bytes it announced")
        case .stalled(let duration, let written, let length):
            let unusable = await client.unusableData.map { "; \($0)" } ?? "; check the device and the link, then retry"
            return McuMgrError(
                .timeout,
                "file download of \(remote) stalled: no data for \(Self.seconds(duration)) at offset \(written) of \(of(length))\(unusable)")
        case .deadline(let deadline, let written, let length):
            return McuMgrError(
                .timeout,
                "file download of \(remote) did not finish within \(Self.seconds(deadline)) (\(written) of \(of(length)) bytes); raise the deadline or check the link")
        }
    }

    /// A file's size in bytes.
    public func status(name: String) async throws -> Int {
        try await client.send(FileStatusRequest(name: name)).length
    }

    /// The device's hash or checksum of (part of) a file; `type` is "sha256" or "crc32" (nil = device default).
    public func hash(name: String, type: String? = nil, offset: Int? = nil, length: Int? = nil) async throws
        -> FileHashResponse
    {
        try await client.send(FileHashRequest(name: name, type: type, offset: offset, length: length))
    }

    /// The hash types the device offers, by name.
    public func supportedHashTypes() async throws -> [String: FileSupportedHashTypesResponse.HashType] {
        try await client.send(FileSupportedHashTypesRequest()).types
    }

    /// Closes the file the device holds open for a transfer.
    public func close() async throws {
        _ = try await client.send(FileCloseRequest())
    }

    // MARK: - Internals

    /// One answer to a download request, checked.
    struct DownloadPiece: Sendable {
        var data: Data
        var length: Int?
    }

    /// Reads `off`, `data` and `len` of a download answer; negative or missing values are errors.
    static func downloadPiece(_ item: CBOR, remote: String, requested: Int) throws -> DownloadPiece {
        guard let offsetItem = item["off"] else {
            throw McuMgrError(.protocolViolation, "file download: the device's answer has no offset (`off`)")
        }
        guard let offset = offsetItem.int, offset >= 0 else {
            throw McuMgrError(.protocolViolation, "file download: the device sent an invalid offset (\(offsetItem))")
        }
        guard offset == requested else {
            throw McuMgrError(
                .protocolViolation,
                "file download: asked for offset \(requested), the device sent offset \(offset); retry the download")
        }
        guard let bytes = item["data"]?.byteString else {
            throw McuMgrError(.protocolViolation, "file download: the device's answer has no data (`data`)")
        }
        var length: Int?
        if let lengthItem = item["len"] {
            guard let value = lengthItem.int, value >= 0 else {
                throw McuMgrError(
                    .protocolViolation, "file download: the device sent an invalid length (\(lengthItem)) for \(remote)")
            }
            length = value
        }
        return DownloadPiece(data: Data(bytes), length: length)
    }

    /// Sends `source[start...]` as the continuation of `remote` (from offset 0: a new file).
    private func send(
        _ source: FileUploadSource, from start: Int, to remote: String, configuration: UploadConfiguration,
        progress: TransferProgressHandler?
    ) async throws {
        let total = source.size
        let target = FileUploadTarget(name: remote, start: start, fileSize: total)
        let uploader = ChunkedUploader(client: client, target: target, configuration: configuration)
        _ = try await uploader.upload(SuffixUploadSource(source, from: start)) { part in
            progress?(
                TransferProgress(
                    bytesTransferred: start + part.bytesTransferred, totalBytes: total,
                    bytesPerSecond: part.bytesPerSecond))
        }
    }

    /// Uploads of at most this many chunks start from offset 0 without asking for the device's copy
    /// (close, length and hash cost up to three round trips, resending them at most this many).
    public static var resumeCheckMinimumChunks: Int { 8 }

    /// Whether `total` bytes take more than `resumeCheckMinimumChunks` chunks on this link (estimated from
    /// the link's packet size, or what a serial console took before, before the device's buffers are
    /// known, so rather more chunks than fewer).
    private func worthCheckingForResume(_ total: Int, remote: String, configuration: UploadConfiguration) -> Bool {
        let transport = client.transport
        let link = transport.linkLimits
        var packet = link.maximumPacketSize
        if let console = transport as? any McuMgrConsoleLineTransport, console.needsConsoleProbe,
            let remembered = client.configuration.consoleLineMemory?.recall(console.name)
        {
            packet = max(packet, remembered.largestPacketPerFrame)  // what the link probe will find again
        }
        if let buffer = configuration.deviceBufferSize { packet = min(packet, link.refined(deviceBufferSize: buffer).packetSize) }
        // The header, the CBOR keys and values around the data, and the name.
        var perChunk = packet - SMPHeader.size - 32 - remote.utf8.count
        if let limit = configuration.maximumChunkSize { perChunk = min(perChunk, limit) }
        return total > Self.resumeCheckMinimumChunks * max(1, perChunk)
    }

    /// A hash choice for one transfer, starting from the hash type remembered for this device
    /// (`DeviceParametersMemory`): a device that answered CRC-32 before is asked for it at once, not
    /// for SHA-256 first and then for its list of types (three round trips where one does).
    private func makeHashChoice() -> HashChoiceCache {
        let transport = client.transport
        return HashChoiceCache(remembered: client.configuration.parametersMemory?.recallHashType(of: transport.name))
    }

    /// The device's hash of `remote` (its first `length` bytes when given; `bytes` in all) and the type it
    /// used: SHA-256 is asked for first; a device without it (FS error 13 or rc 8) is asked once which
    /// types it offers. nil: the device offers none. Other device errors are thrown.
    private func deviceHash(of remote: String, length: Int?, bytes: Int, hashes: HashChoiceCache) async throws
        -> (type: String, response: FileHashResponse)?
    {
        let found = try await deviceHashOnce(of: remote, length: length, bytes: bytes, hashes: hashes)
        if let (used, _) = found, used == "sha256" || used == "crc32" {
            let transport = client.transport
            if let memory = client.configuration.parametersMemory, memory.recallHashType(of: transport.name) != used {
                memory.rememberHashType(used, for: transport.name)
            }
        }
        return found
    }

    private func deviceHashOnce(of remote: String, length: Int?, bytes: Int, hashes: HashChoiceCache) async throws
        -> (type: String, response: FileHashResponse)?
    {
        // The device hashes `bytes` bytes for this request and again for every copy of it: waits and
        // resends sized to them (a 1 MiB file: resent after 17 s, not after the link's resend timeout).
        let timeout = McuMgrTimeouts(answer: client.configuration.timeout).hash(bytes: bytes)
        let floor = McuMgrTimeouts.hashResendFloor(bytes: bytes)
        func hash(type: String?) async throws -> FileHashResponse {
            try await client.send(FileHashRequest(name: remote, type: type, length: length), timeout: timeout, resendFloor: floor)
        }
        if let remembered = hashes.rememberedType {
            do {
                let response = try await hash(type: remembered)
                return (response.type ?? remembered, response)
            } catch let error as McuMgrError where Self.isUnsupported(error) {
                // Other firmware: find its types again.
                client.configuration.parametersMemory?.rememberHashType(nil, for: client.transport.name)
                hashes.forgetRemembered()
            }
        }
        if hashes.untried {
            do {
                let response = try await hash(type: "sha256")
                hashes.found("sha256")
                return (response.type ?? "sha256", response)
            } catch let error as McuMgrError where error.returnCode == .notSupported {
                hashes.noHashCommand()  // rc 8: no hash command at all
                return nil
            } catch let error as McuMgrError where Self.isUnsupported(error) {
                hashes.sha256Refused()
            }
        }
        guard let type = try await hashes.choice(self) else { return nil }
        let response = try await hash(type: type)
        guard let used = response.type ?? type else { return nil }
        return (used, response)
    }

    /// Sends the close command; a device without it (rc 8) has nothing to close.
    private func closeOpenFile() async throws {
        do {
            try await close()
        } catch let error as McuMgrError where error.kind == .device {
            return
        }
    }

    /// The device's length of `remote` as `SMPFileUploadMachine` takes it, and the device's error when
    /// it sent one. Errors that are not the device's (a timeout, a lost link) are thrown.
    private func statusAnswer(_ remote: String) async throws -> (SMPFileUploadMachine.StatusAnswer, McuMgrError?) {
        do {
            return (.length(try await status(name: remote)), nil)
        } catch let error as McuMgrError where error.kind == .device {
            if error.returnCode == .notSupported { return (.notSupported, error) }
            if error.groupError == McuMgrGroupError(group: .fileSystem, rc: 3) || error.returnCode == .noEntry {
                return (.notFound, error)  // FILE_NOT_FOUND, or rc 5 on v1 devices
            }
            return (.refused, error)
        }
    }

    /// The device's hash of `remote` (its first `length` bytes when given) as `SMPFileUploadMachine` takes
    /// it, and the error when the request ended in one the machine decides about (the device's, or an
    /// answer that could not be read). Other errors are thrown.
    private func hashAnswer(_ remote: String, length: Int?, bytes: Int, hashes: HashChoiceCache) async throws
        -> (SMPFileUploadMachine.HashAnswer, McuMgrError?)
    {
        do {
            guard let (used, response) = try await deviceHash(of: remote, length: length, bytes: bytes, hashes: hashes) else {
                return (.none, nil)
            }
            return (.digest(type: used, length: response.length, output: response.outputBytes.map { [UInt8]($0) }), nil)
        } catch let error as McuMgrError where error.groupError == McuMgrGroupError(group: .fileSystem, rc: 16) {
            return (.fileEmpty, error)
        } catch let error as McuMgrError where Self.isUnsupported(error) {
            return (.unsupported, error)
        } catch let error as McuMgrError where error.kind == .device {
            return (.refused, error)
        } catch let error as McuMgrError where error.kind == .protocolViolation {
            return (.invalid, error)
        }
    }

    /// The error a transfer whose copy differs from the local file ends with (`requestError`: the error of
    /// the request that `.requestError` names).
    private func transferError(
        _ failure: SMPFileUploadMachine.Failure, remote: String, requestError: McuMgrError? = nil
    ) -> McuMgrError {
        switch failure {
        case .requestError:
            return requestError ?? McuMgrError(.protocolViolation, "file upload of \(remote) failed; retry")
        case .digestMismatch(let type, let device, let local):
            // On a link that reorders the pieces of an answer, that is the likely cause, and its fix.
            let reorders = client.transport.linkLimits.piecesArriveOutOfOrder
            let hint = reorders ? ((client.transport as? any McuMgrLinkAdvising)?.unusableDataHint).map { ": \($0)" } : nil
            return McuMgrError(
                .protocolViolation,
                "verification of \(remote) failed: the device's \(type) is \(Data(device).hexString), the local file's is \(Data(local).hexString); the data was corrupted on the way\(hint ?? ", transfer the file again")")
        case .deviceFileEmpty(let length):
            return McuMgrError(
                .protocolViolation,
                "verification of \(remote) failed: the device's file is empty, the local one has \(length) bytes; transfer the file again")
        case .noOutput:
            return McuMgrError(.protocolViolation, "file hash: the device's answer has no usable `output`")
        case .hashedLengthDiffers(let hashed, let length):
            return McuMgrError(
                .protocolViolation,
                "verification of \(remote) failed: the device's file has \(hashed) bytes, the local one \(length); transfer the file again")
        case .notTruncated(let length):
            return McuMgrError(
                .protocolViolation,
                "\(remote) on the device still has \(length) bytes after an upload of 0 bytes: the device does not truncate a file on an empty upload (Zephyr); remove the file on the device first, e.g. with its shell's `fs rm`")
        case .lengthDiffers(let length, let total):
            return McuMgrError(
                .protocolViolation,
                "\(remote) on the device has \(length) bytes after the upload, the local file \(total); transfer the file again")
        }
    }

    /// Compares the device's digest of the downloaded `remote` (`length` bytes, the length the device
    /// announced) with `local(type)`, as `SMPFileUploadMachine` judges the check after an upload; a
    /// difference is the error.
    private func verify(remote: String, length: Int, hashes: HashChoiceCache, local: (String) throws -> Data?)
        async throws -> Verification
    {
        let (answer, error) = try await hashAnswer(remote, length: nil, bytes: length, hashes: hashes)
        var verdict = SMPFileUploadMachine.verdict(on: answer, total: length, lengthChecked: true)
        while true {
            switch verdict {
            case .verified(let verification):
                return Verification(verification)
            case .compare(let type, let device):
                let digest = try local(type).map { [UInt8]($0) }
                verdict = SMPFileUploadMachine.verdict(type: type, device: device, local: digest, lengthChecked: true)
            case .differs(let failure):
                throw transferError(failure, remote: remote, requestError: error)
            case .refused:
                throw transferError(.requestError, remote: remote, requestError: error)
            }
        }
    }

    /// rc 8 (not supported) or FS error 13 (hash type not found).
    static func isUnsupported(_ error: McuMgrError) -> Bool {
        if error.returnCode == .notSupported { return true }
        if let group = error.groupError, group.group == .fileSystem, group.rc == 13 { return true }
        return false
    }

    static func seconds(_ duration: Duration) -> String {
        String(cFormat: "%.1f s", duration.seconds)
    }
}
