import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image", abstract: "Image group (1): list, upload, test, confirm, erase firmware images.",
        subcommands: [List.self, Upload.self, Test.self, Confirm.self, Erase.self, Slots.self])

    static func describe(_ response: McuMgrImageStateResponse) -> String {
        if response.images.isEmpty { return "no images" }
        return response.images.map { slot in
            var flags: [String] = []
            if slot.active { flags.append("active") }
            if slot.confirmed { flags.append("confirmed") }
            if slot.pending { flags.append("pending") }
            if slot.permanent { flags.append("permanent") }
            if slot.bootable { flags.append("bootable") }
            if slot.compressed { flags.append("compressed") }
            var text = "image \(slot.image) slot \(slot.slot): version \(slot.version)"
            if !flags.isEmpty { text += "  " + flags.joined(separator: " ") }
            if let hash = slot.hash { text += "\n  hash \(JSONRendering.hex(Array(hash)))" }
            return text
        }.joined(separator: "\n")
    }

    static func parseHash(_ text: String) throws -> Data {
        let bytes: Data
        do {
            bytes = try parseHex(text)
        } catch {
            throw ValidationError("hash \"\(text)\" is not hexadecimal; see `smp image list` for the hashes")
        }
        guard [32, 48, 64].contains(bytes.count) else {
            throw ValidationError(
                "hash \"\(text)\" is \(bytes.count) bytes; an image hash is 32 bytes (64 hex digits), or 48/64 for SHA-384/512; see `smp image list`"
            )
        }
        return Data(bytes)
    }

    /// Hex bytes of any length (for settings values).
    static func parseHex(_ text: String) throws -> Data {
        let hex = text.lowercased().hasPrefix("0x") ? String(text.dropFirst(2)) : text
        guard hex.count % 2 == 0 else { throw ValidationError("\"\(text)\" is not an even number of hex digits") }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else {
                throw ValidationError("\"\(text)\" is not hexadecimal")
            }
            bytes.append(byte)
            index = next
        }
        return Data(bytes)
    }

    struct List: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the images in the device's slots.")
        @OptionGroup var global: GlobalOptions

        func run(context: CommandContext) async throws {
            try await context.run(ImageStateReadRequest()) { ImageCommand.describe($0) }
        }
    }

    struct Upload: FleetCommand {
        static let configuration = CommandConfiguration(
            commandName: "upload",
            abstract: "Upload an MCUboot image (.bin) to the secondary slot; resumes an interrupted upload.",
            discussion: """
                An application puts the upload in the secondary slot of the image (slot 1 of image 0; for \
                Direct-XIP the inactive slot). MCUboot's serial recovery puts it in the primary slot (slot \
                0) and has no test or confirm: reset the device to boot it (`smp dfu` does all of this).

                Takes many devices (--device repeated, --devices FILE, usb:...?all): each gets the image at \
                once, in its own session; see `smp dfu --help`.
                """)
        static let reportName = "smp image upload"
        @OptionGroup var global: GlobalOptions
        @OptionGroup var fleet: FleetOptions
        @Argument(help: "The image file.") var file: String
        @Option(help: "Image number (0 = application core, 1 = network core, ...).") var image: Int = 0
        @Option(help: "Chunks in flight at once, at most what the device's buffers take (default: buf_count - 1, over UDP buf_count / 2).") var pipeline: Int?
        @Option(help: "Round chunk sizes down to a multiple of this (1, 2, 4, 8, 16).") var alignment: Int = 1
        @Option(help: "Largest data bytes per chunk (default: as much as fits).") var chunkSize: Int?
        @Flag(help: "Ask the device to refuse an image that is not newer than the running one.") var upgrade = false
        @Flag(help: "Send the file even if it does not look like an MCUboot image.") var noCheck = false

        func validate() throws {
            guard image >= 0 else { throw ValidationError("--image must be 0 or more") }
            guard [1, 2, 4, 8, 16].contains(alignment) else { throw ValidationError("--alignment must be 1, 2, 4, 8 or 16") }
            if let pipeline, !(1...32).contains(pipeline) { throw ValidationError("--pipeline must be 1...32") }
            if let chunkSize, chunkSize < 32 { throw ValidationError("--chunk-size must be at least 32") }
        }

        func run() async throws { try await runOnDevices() }

        func prepareFleet() throws {
            let url = try LocalFiles.readable(file)
            if !noCheck { try McuMgrImage(contentsOf: url).verify() }
        }

        func run(session: McuMgrFleet.Session, target: FleetTarget) async throws -> FleetOutcome {
            let url = try LocalFiles.readable(file)
            let configuration = global.uploadConfiguration(
                pipelineDepth: pipeline, byteAlignment: alignment, maximumChunkSize: chunkSize)
            let result = try await ImageManager(client: session.client).upload(
                file: url, image: image, upgrade: upgrade ? true : nil, configuration: configuration
            ) { progress in
                session.reportProgress(bytes: progress.bytesTransferred, total: progress.totalBytes)
            }
            return FleetOutcome(summary: summary(result), fields: fields(result))
        }

        private func fields(_ result: UploadResult) -> [CBORMapEntry] {
            CBOR.textMap([
                "file": .text(file), "image": .int(image), "len": .int(result.totalBytes),
                "resumed_from": .int(result.resumedFrom), "chunk_size": .int(result.chunkSize),
                "pipeline": .int(result.pipelineDepth), "seconds": .double(result.duration.seconds),
            ]).mapEntries ?? []
        }

        private func summary(_ result: UploadResult) -> String {
            let seconds = result.duration.seconds
            let rate = seconds > 0 ? Double(result.totalBytes) / seconds : 0
            var text = "uploaded \(Terminal.bytes(Double(result.totalBytes))) to image \(image) in "
                + String(cFormat: "%.2f s", seconds) + " (\(Terminal.bytes(rate))/s)"
            if result.resumedFrom > 0 { text += ", resumed at offset \(result.resumedFrom)" }
            return text
        }

        func run(context: CommandContext) async throws {
            let url = try LocalFiles.readable(file)
            if !noCheck {
                // Refuse a file that is not a whole, intact MCUboot image before anything is sent.
                let parsed = try McuMgrImage(contentsOf: url)
                try parsed.verify()
                if global.verbose {
                    Terminal.error("image \(file): version \(parsed.version), hash \(JSONRendering.hex(Array(parsed.hash)))")
                }
            }
            let bar = context.progressBar("upload")
            let configuration = global.uploadConfiguration(
                pipelineDepth: pipeline, byteAlignment: alignment, maximumChunkSize: chunkSize)
            let result = try await ImageManager(client: context.client).upload(
                file: url, image: image, upgrade: upgrade ? true : nil, configuration: configuration
            ) { progress in
                bar.update(done: progress.bytesTransferred, total: progress.totalBytes)
            }
            bar.finish()
            let seconds = result.duration.seconds
            context.emit(
                item: .textMap([
                    "file": .text(file), "image": .int(image), "len": .int(result.totalBytes),
                    "resumed_from": .int(result.resumedFrom), "chunk_size": .int(result.chunkSize),
                    "pipeline": .int(result.pipelineDepth), "seconds": .double(seconds),
                ])
            ) {
                let rate = seconds > 0 ? Double(result.totalBytes) / seconds : 0
                var text = "uploaded \(Terminal.bytes(Double(result.totalBytes))) to image \(image) in "
                text += String(cFormat: "%.2f s", seconds) + " (\(Terminal.bytes(rate))/s)"
                if result.resumedFrom > 0 { text += ", resumed at offset \(result.resumedFrom)" }
                return text
            }
        }
    }

    struct Test: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "test",
            abstract: "Mark an image to boot once on the next reset (test); it reverts unless confirmed.",
            discussion: """
                Writes MCUboot's "pending" state for the image in the secondary slot; nothing changes until \
                the next reset (`smp os reset`), when MCUboot swaps it in and boots it once. If the new image \
                is not confirmed while it runs (`smp image confirm`), the reset after that swaps the old one \
                back. Direct-XIP and RAM-load builds boot the marked slot instead of swapping.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The image hash (hex, from `smp image list`).") var hash: String

        func validate() throws { _ = try ImageCommand.parseHash(hash) }

        func run(context: CommandContext) async throws {
            let hash = try ImageCommand.parseHash(hash)
            try await context.run(ImageStateWriteRequest(hash: hash, confirm: false)) { ImageCommand.describe($0) }
        }
    }

    struct Confirm: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "confirm",
            abstract: "Confirm an image permanently: the running one, or the one with the given hash.",
            discussion: """
                Without a hash: the running image stays for good (run it after a test boot, or MCUboot reverts \
                it on the next reset). With the hash of the image in the other slot: it is installed for good \
                on the next reset, without a test boot; an image that then fails to start cannot be reverted.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The image hash (hex); omit to confirm the running image.") var hash: String?

        func validate() throws { _ = try hash.map(ImageCommand.parseHash) }

        func run(context: CommandContext) async throws {
            let hash = try hash.map(ImageCommand.parseHash)
            try await context.run(ImageStateWriteRequest(hash: hash, confirm: true)) { ImageCommand.describe($0) }
        }
    }

    struct Erase: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "erase",
            abstract: "Erase a slot (default: the one opposite the running image).",
            discussion: """
                Erases the flash of the image slot, which takes seconds on large slots (smp waits at least \
                75 s). The device refuses to erase the running image or one marked for the next reset.
                """)
        @OptionGroup var global: GlobalOptions
        @Option(help: "Absolute slot number (image × 2 + slot).") var slot: Int?

        func run(context: CommandContext) async throws {
            try await context.run(ImageEraseRequest(slot: slot), timeout: global.timeouts.atLeast(McuMgrTimeouts.imageEraseFloor)) { _ in
                "erased slot \(slot.map(String.init) ?? "(the inactive one)")"
            }
        }
    }

    struct Slots: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "slot-info", abstract: "Show the sizes of the image slots.")
        @OptionGroup var global: GlobalOptions

        func run(context: CommandContext) async throws {
            try await context.run(ImageSlotInfoRequest()) { response in
                response.images.map { image in
                    var lines = image.slots.map { "image \(image.image) slot \($0.slot): \($0.size) bytes" }
                    if let max = image.maximumImageSize { lines.append("image \(image.image) max image size: \(max) bytes") }
                    return lines.joined(separator: "\n")
                }.joined(separator: "\n")
            }
        }
    }
}

/// Checks on local files named on the command line.
enum LocalFiles {
    static func readable(_ path: String) throws -> URL {
        guard let isDirectory = isDirectory(path) else {
            throw McuMgrError(.file, "no such file: \(path)")
        }
        guard !isDirectory else { throw McuMgrError(.file, "\(path) is a directory; give a file") }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw McuMgrError(.file, "cannot read \(path): permission denied")
        }
        return URL(fileURLWithPath: path)
    }

    /// Whether `path` (symbolic links followed) is a directory; nil when nothing is there.
    static func isDirectory(_ path: String) -> Bool? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT == S_IFDIR
    }
}
