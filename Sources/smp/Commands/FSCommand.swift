import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrCore

struct FSCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fs", abstract: "File-system group (8): upload, download, stat, hash files.",
        subcommands: [Upload.self, Download.self, Stat.self, Hash.self, Hashes.self, Close.self])

    static func summary(_ verb: String, _ result: FileSystemManager.TransferResult) -> String {
        let seconds = result.duration.seconds
        let rate = seconds > 0 ? Double(result.bytes) / seconds : 0
        let resumed = result.resumedFrom > 0 ? ", resumed at byte \(result.resumedFrom) (the device had the start)" : ""
        return "\(verb) \(Terminal.bytes(Double(result.bytes))) in " + String(cFormat: "%.2f s", seconds)
            + " (\(Terminal.bytes(rate))/s)\(resumed), \(result.verification)"
    }

    static func item(_ result: FileSystemManager.TransferResult, local: String, remote: String) -> CBOR {
        return .textMap([
            "name": .text(remote), "local": .text(local), "len": .int(result.bytes),
            "verified": .text(result.verification.method), "resumed_from": .int(result.resumedFrom),
            "seconds": .double(result.duration.seconds),
            "transfer_seconds": .double(result.transferDuration.seconds),
        ])
    }

    struct Upload: FleetCommand {
        static let configuration = CommandConfiguration(
            commandName: "upload",
            abstract: "Upload a local file to the device and verify it with the device's hash.",
            discussion: """
                A file of more than 8 chunks first closes the file the device may still hold open, and when \
                the device already holds the start of this file (an upload that was interrupted: same bytes, \
                checked with the device's hash) sends only the rest; a shorter one is sent whole. A device \
                that smp knows (it keeps each device's buffers and unfinished uploads for a day under \
                $XDG_CACHE_HOME/smp; SMP_NO_CACHE=1 turns that off) is asked only for a path whose upload \
                from here did not finish, and not for its buffers (os params): its upload is the chunks and \
                one hash. Afterwards \
                the device's length and SHA-256 (else CRC-32, else the length alone) must match the local \
                file; a short file is completed from the device's offset. Ctrl-C stops the upload (exit 130); \
                run the command again to resume.

                Takes many devices (--device repeated, --devices FILE, usb:...?all): each gets the file at \
                once, in its own session; see `smp dfu --help`.
                """)
        static let reportName = "smp fs upload"
        @OptionGroup var global: GlobalOptions
        @OptionGroup var fleet: FleetOptions
        @Argument(help: "The local file.") var local: String
        @Argument(help: "The absolute path on the device, e.g. /lfs1/data.bin.") var remote: String
        @Option(help: "Chunks in flight at once, at most what the device's buffers take (default: buf_count - 1, over UDP buf_count / 2).") var pipeline: Int?
        @Option(help: "Largest data bytes per chunk (default: as much as fits).") var chunkSize: Int?
        @Flag(help: "Skip the hash check after the transfer (the length is still checked).") var noVerify = false
        @Flag(help: "Upload from offset 0 even when the device already holds the start of this file.") var restart = false

        func validate() throws {
            guard remote.hasPrefix("/") else { throw ValidationError("the device path must be absolute, e.g. /lfs1/\(remote)") }
            if let pipeline, !(1...32).contains(pipeline) { throw ValidationError("--pipeline must be 1...32") }
        }

        func run() async throws { try await runOnDevices() }

        func prepareFleet() throws { _ = try LocalFiles.readable(local) }

        func run(session: McuMgrFleet.Session, target: FleetTarget) async throws -> FleetOutcome {
            let url = try LocalFiles.readable(local)
            let result = try await FileSystemManager(client: session.client).upload(
                url, to: remote, verify: !noVerify, resume: !restart,
                configuration: global.uploadConfiguration(pipelineDepth: pipeline, maximumChunkSize: chunkSize)
            ) { session.reportProgress(bytes: $0.bytesTransferred, total: $0.totalBytes) }
            return FleetOutcome(
                summary: FSCommand.summary("uploaded", result),
                fields: FSCommand.item(result, local: local, remote: remote).mapEntries ?? [])
        }

        func run(context: CommandContext) async throws {
            let url = try LocalFiles.readable(local)
            let bar = context.progressBar("upload")
            let result = try await FileSystemManager(client: context.client).upload(
                url, to: remote, verify: !noVerify, resume: !restart,
                configuration: global.uploadConfiguration(pipelineDepth: pipeline, maximumChunkSize: chunkSize)
            ) { bar.update(done: $0.bytesTransferred, total: $0.totalBytes) }
            bar.finish()
            context.emit(item: FSCommand.item(result, local: local, remote: remote)) {
                FSCommand.summary("uploaded", result)
            }
        }
    }

    struct Download: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "download",
            abstract: "Download a file from the device; it appears under LOCAL only when complete and verified.",
            discussion: """
                Data goes to a temporary file .NAME.UUID.download beside LOCAL, renamed into place when \
                complete and verified; on an error or Ctrl-C (exit 130) it is removed.
                """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The absolute path on the device.") var remote: String
        @Argument(help: "The local file to write (or an existing directory).") var local: String
        @Flag(help: "Skip the hash check after the transfer.") var noVerify = false
        @Option(help: ArgumentHelp("Refuse a file the device announces as larger than this (default 64 MiB).", valueName: "bytes"))
        var maxSize: Int = 64 * 1024 * 1024
        @Option(help: ArgumentHelp("Give up when no data arrived for this long (default: 3 x --timeout).", valueName: "seconds"))
        var stallTimeout: Double?
        @Option(help: ArgumentHelp("Give up when the whole download takes longer than this.", valueName: "seconds"))
        var deadline: Double?

        func validate() throws {
            guard remote.hasPrefix("/") else { throw ValidationError("the device path must be absolute, e.g. /lfs1/\(remote)") }
            guard maxSize >= 0 else { throw ValidationError("--max-size must be 0 or more bytes") }
            if let stallTimeout, !(stallTimeout > 0 && stallTimeout <= 86400) {
                throw ValidationError("--stall-timeout must be between 0 and 86400 seconds")
            }
            if let deadline, !(deadline > 0 && deadline <= 604800) {
                throw ValidationError("--deadline must be between 0 and 604800 seconds")
            }
        }

        func run(context: CommandContext) async throws {
            var destination = URL(fileURLWithPath: local)
            if LocalFiles.isDirectory(local) == true {
                destination.appendPathComponent(lastPathComponent(of: remote))
            }
            let bar = context.progressBar("download")
            let result = try await FileSystemManager(client: context.client).download(
                remote, to: destination, verify: !noVerify,
                configuration: FileDownloadConfiguration(
                    maximumLength: maxSize,
                    stallTimeout: stallTimeout.map { .milliseconds(Int64($0 * 1000)) } ?? global.timeouts.downloadStall,
                    deadline: deadline.map { .milliseconds(Int64($0 * 1000)) })
            ) { bar.update(done: $0.bytesTransferred, total: $0.totalBytes) }
            bar.finish()
            context.emit(item: FSCommand.item(result, local: destination.path, remote: remote)) {
                FSCommand.summary("downloaded", result)
            }
        }
    }

    struct Stat: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "stat", abstract: "Show a file's size.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The absolute path on the device.") var remote: String
        func run(context: CommandContext) async throws {
            try await context.run(FileStatusRequest(name: remote)) { "\(remote): \($0.length) bytes" }
        }
    }

    struct Hash: DeviceCommand {
        static let configuration = CommandConfiguration(commandName: "hash", abstract: "Ask the device for a file's SHA-256 or CRC-32.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The absolute path on the device.") var remote: String
        @Option(help: "sha256 or crc32 (default: the device's choice).") var type: String?
        @Option(help: "Start offset.") var offset: Int?
        @Option(help: "Bytes to hash.") var length: Int?
        func run(context: CommandContext) async throws {
            try await context.run(
                FileHashRequest(name: remote, type: type, offset: offset, length: length),
                timeout: global.timeouts.atLeast(McuMgrTimeouts.fileHashFloor)
            ) { r in
                let value: String
                if let bytes = r.outputBytes {
                    value = JSONRendering.hex(Array(bytes))
                } else if let number = r.outputNumber {
                    let hex = String(number, radix: 16)
                    value = String(repeating: "0", count: max(0, 8 - hex.count)) + hex
                } else {
                    value = "?"
                }
                return "\(r.type ?? "hash") \(value)  \(remote)" + (r.length.map { " (\($0) bytes)" } ?? "")
            }
        }
    }

    struct Hashes: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "hash-types", abstract: "List the hash and checksum types the device offers.")
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(FileSupportedHashTypesRequest()) { r in
                r.types.sorted { $0.key < $1.key }.map { name, t in
                    "\(name): \(t.format == 0 ? "number" : "bytes"), \(t.size.map(String.init) ?? "?") bytes"
                }.joined(separator: "\n")
            }
        }
    }

    struct Close: DeviceCommand {
        static let configuration = CommandConfiguration(
            commandName: "close", abstract: "Close the file the device holds open.",
            discussion: """
                Zephyr keeps the file of an unfinished upload or download open until another file is \
                transferred or a timeout (CONFIG_MCUMGR_GRP_FS_FILE_AUTOMATIC_IDLE_CLOSE_TIME); closing it \
                lets other code on the device use it. Uploads and downloads close it themselves.
                """)
        @OptionGroup var global: GlobalOptions
        func run(context: CommandContext) async throws {
            try await context.run(FileCloseRequest()) { _ in "" }
        }
    }
}
