#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

extension FirmwareUpgradeManager {
    /// Uploads the files of one `upload` action: MCUboot images through the image group, or a SUIT
    /// envelope with its caches and the resources the device asks for. Reports progress, resumed
    /// uploads and each finished file to the driver.
    struct UploadJob: Sendable {
        let files: [McuMgrPackage.Image]
        let configuration: UploadConfiguration
        /// Pauses and resumes every upload of the job.
        let control: UploadControl
        let options: Options
        let inputs: AsyncStream<Input>.Continuation
        private let current: LockedState<McuMgrPackage.Image?>

        init(
            files: [McuMgrPackage.Image], configuration: UploadConfiguration, options: Options,
            inputs: AsyncStream<Input>.Continuation
        ) {
            self.files = files
            self.configuration = configuration
            self.options = options
            self.inputs = inputs
            let current = LockedState<McuMgrPackage.Image?>(nil)
            self.current = current
            self.control = UploadControl { offset, size in
                let file = current.withLock { $0 }
                let name = file.map { "image \($0.image) (\($0.fileName))" } ?? "the upload"
                inputs.yield(.event(.log(FirmwareUpgradeLogEntry(
                    level: .info,
                    message: "resuming \(name) at offset \(offset) of \(size): the device kept the interrupted upload"))))
            }
        }

        private var totalSize: Int { files.reduce(0) { $0 + $1.size } }

        func uploadImages(client: McuMgrClient) async throws {
            var done = 0
            for file in files {
                log(.info, "uploading image \(file.image) (\(file.fileName), \(file.size) bytes"
                    + (file.version.map { ", version \($0)" } ?? "") + ", hash \(file.hashHex.prefix(16))…)")
                let sha = Data(SHA256.hash(data: file.data))
                let target = ImageUploadTarget(image: file.image, sha: sha)
                let record = try await upload(file, target: target, client: client, before: done)
                done += file.size
                inputs.yield(.uploaded(image: file.image, record))
            }
        }

        func uploadSUIT(client: McuMgrClient, resources: [String: Data], package: [McuMgrPackage.Image]) async throws {
            guard let envelope = files.first(where: { $0.contentType == .suitEnvelope }) else {
                throw McuMgrError(.file, "the SUIT package has cache images but no envelope (.suit); rebuild the package")
            }
            let caches = files.filter { $0.contentType == .suitCache }
            let suit = SuitManager(client: client)
            var records: [(Int, FirmwareUpgradeResult.Image)] = []
            var done = 0
            log(.info, "uploading SUIT envelope \(envelope.fileName) (\(envelope.size) bytes, digest \(envelope.hashHex.prefix(16))…)")
            records.append(
                (envelope.image,
                 try await upload(envelope, target: SuitEnvelopeUploadTarget(deferInstall: !caches.isEmpty), client: client, before: done)))
            done += envelope.size
            for cache in caches {
                log(.info, "uploading SUIT cache \(cache.fileName) to partition \(cache.image) (\(cache.size) bytes)")
                records.append(
                    (cache.image,
                     try await upload(cache, target: SuitCacheUploadTarget(targetID: cache.image), client: client, before: done)))
                done += cache.size
            }
            if !caches.isEmpty {
                log(.info, "asking the device to process the envelope")
                try await suit.processDeferredEnvelope()
            }
            try await serveResources(suit: suit, resources: resources, package: package)
            for (image, record) in records { inputs.yield(.uploaded(image: image, record)) }
        }

        /// Polls the device for resources it needs (PROTOCOL.md 3.11) and uploads each, until it asks
        /// for nothing for `suitPollDuration`, or goes away (it installs and reboots).
        private func serveResources(suit: SuitManager, resources: [String: Data], package: [McuMgrPackage.Image]) async throws {
            let clock = suit.client.clock
            var quietSince = clock.now
            var served = 0
            while quietSince.duration(to: clock.now) < options.suitPollDuration {
                try Task.checkCancellation()
                await control.waitWhilePaused()
                let answer: SuitMissingImageStateResponse
                do {
                    answer = try await suit.missingImageState(timeout: options.reconnectProbeTimeout)
                } catch let error as McuMgrError where error.kind == .transport || error.kind == .timeout {
                    log(.info, "the device stopped answering: it is installing the update and rebooting")
                    return
                }
                guard let session = answer.streamSessionID, let name = answer.resourceName else {
                    try await clock.sleep(for: options.suitPollInterval)
                    continue
                }
                guard let data = Self.resource(named: name, in: resources, package: package) else {
                    throw McuMgrError(
                        .file,
                        "the device asks for SUIT resource \"\(answer.resource ?? name)\", which the package does not hold; "
                            + "pass it with --resource \(name)=PATH (library: resources: [\"\(name)\": data])")
                }
                log(.info, "the device asks for resource \(answer.resource ?? name) (\(data.count) bytes, stream session \(session))")
                let file = McuMgrPackage.Image(
                    image: 0, contentType: .suitCache, hash: Data(SHA256.hash(data: data)), data: data, fileName: name)
                _ = try await upload(file, target: SuitResourceUploadTarget(streamSessionID: session), client: suit.client, before: 0)
                served += 1
                quietSince = clock.now
            }
            log(.info, served == 0 ? "the device needs no further resources" : "the device asks for no further resources")
        }

        static func resource(named name: String, in resources: [String: Data], package: [McuMgrPackage.Image]) -> Data? {
            let base = lastPathComponent(of: name)
            if let data = resources[name] ?? resources[base] { return data }
            return package.first { $0.fileName == name || lastPathComponent(of: $0.fileName) == base }?.data
        }

        private func upload<T: ChunkedUploadTarget>(
            _ file: McuMgrPackage.Image, target: T, client: McuMgrClient, before: Int
        ) async throws -> FirmwareUpgradeResult.Image {
            let inputs = self.inputs
            let total = max(totalSize, before + file.size)
            let throttle = LockedState(McuMgrClock.Instant?.none)
            let clock = client.clock
            let interval = options.progressInterval
            current.withLock { $0 = file }
            let result = try await ChunkedUploader(client: client, target: target, configuration: configuration, control: control)
                .upload(DataUploadSource(file.data)) { progress in
                    let now = clock.now
                    let due = throttle.withLock { last -> Bool in
                        if progress.bytesTransferred < progress.totalBytes, let l = last, l.duration(to: now) < interval { return false }
                        last = now
                        return true
                    }
                    guard due else { return }
                    inputs.yield(.event(.uploadProgress(FirmwareUpgradeProgress(
                        image: file.image, fileName: file.fileName, bytesSent: progress.bytesTransferred,
                        imageSize: progress.totalBytes, totalBytesSent: before + progress.bytesTransferred, totalSize: total,
                        bytesPerSecond: progress.bytesPerSecond, timestamp: Date()))))
                }
            let rate = result.duration.seconds > 0 ? Double(file.size - result.resumedFrom) / result.duration.seconds : 0
            log(.info, "image \(file.image) uploaded: \(file.size - result.resumedFrom) bytes in \(FirmwareUpgradeManager.seconds(result.duration))"
                + String(cFormat: " (%.1f KiB/s, %d-byte chunks, %d in flight)", rate / 1024, result.chunkSize, result.pipelineDepth))
            return FirmwareUpgradeResult.Image(
                image: file.image, slot: file.slot, fileName: file.fileName, contentType: file.contentType, hash: file.hash,
                size: file.size, version: file.version, uploaded: true, resumedFrom: result.resumedFrom,
                bytesSent: file.size - result.resumedFrom, uploadDuration: result.duration)
        }

        private func log(_ level: Logger.Level, _ message: String) {
            inputs.yield(.event(.log(FirmwareUpgradeLogEntry(level: level, message: message))))
        }
    }
}
