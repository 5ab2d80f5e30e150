// libFuzzer targets for the client library's parsers (McuManager), built by Scripts/fuzz.sh against
// instrumented McuMgrCore and McuManager modules; SMP_FUZZ_TARGET picks the target:
//   response  an SMP packet from a device: header, CBOR payload, status, typed response
//   image     an MCUboot image file: header, TLV areas, hash
//   package   a dfu_application.zip (input starting with "PK") or its manifest.json (any other input)
//   suit      a SUIT envelope (.suit)
// Not part of the SwiftPM package. A property that does not hold stops the run with a message.

import Foundation
@testable import McuManager
import McuMgrCore

private let selectedTarget: String = {
    guard let raw = getenv("SMP_FUZZ_TARGET") else { return "" }
    return String(cString: raw)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    switch selectedTarget {
    case "response": fuzzResponse(bytes)
    case "image": fuzzImage(bytes)
    case "package": fuzzPackage(bytes)
    case "suit": fuzzSUIT(bytes)
    default:
        printError("set SMP_FUZZ_TARGET to response, image, package or suit\n")
        exit(2)
    }
    return 0
}

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        printError("fuzz property failed: \(message())\n")
        abort()
    }
}

// MARK: Responses

/// Decoders for every typed response of the built-in groups; the packet's group and command pick one.
private let responseDecoders: [@Sendable (SMPPacket) throws -> Any] = [
    { try McuMgrClient.decode(EchoResponse.self, from: $0, operation: "echo") },
    { try McuMgrClient.decode(TaskStatisticsResponse.self, from: $0, operation: "tasks") },
    { try McuMgrClient.decode(MemoryPoolStatisticsResponse.self, from: $0, operation: "mpstat") },
    { try McuMgrClient.decode(DateTimeResponse.self, from: $0, operation: "datetime") },
    { try McuMgrClient.decode(McuMgrParametersResponse.self, from: $0, operation: "params") },
    { try McuMgrClient.decode(ApplicationInfoResponse.self, from: $0, operation: "info") },
    { try McuMgrClient.decode(BootloaderInfoResponse.self, from: $0, operation: "bootloader") },
    { try McuMgrClient.decode(McuMgrImageStateResponse.self, from: $0, operation: "image list") },
    { try McuMgrClient.decode(ImageUploadResponse.self, from: $0, operation: "image upload") },
    { try McuMgrClient.decode(ImageSlotInfoResponse.self, from: $0, operation: "slot info") },
    { try McuMgrClient.decode(CoreLoadResponse.self, from: $0, operation: "core load") },
    { try McuMgrClient.decode(StatisticsResponse.self, from: $0, operation: "stat read") },
    { try McuMgrClient.decode(StatisticsListResponse.self, from: $0, operation: "stat list") },
    { try McuMgrClient.decode(SettingsReadResponse.self, from: $0, operation: "settings read") },
    { try McuMgrClient.decode(LogShowResponse.self, from: $0, operation: "log show") },
    { try McuMgrClient.decode(LogModuleListResponse.self, from: $0, operation: "log modules") },
    { try McuMgrClient.decode(LogLevelListResponse.self, from: $0, operation: "log levels") },
    { try McuMgrClient.decode(LogListResponse.self, from: $0, operation: "log list") },
    { try McuMgrClient.decode(RunTestListResponse.self, from: $0, operation: "run list") },
    { try McuMgrClient.decode(FileDownloadResponse.self, from: $0, operation: "fs download") },
    { try McuMgrClient.decode(FileUploadResponse.self, from: $0, operation: "fs upload") },
    { try McuMgrClient.decode(FileStatusResponse.self, from: $0, operation: "fs stat") },
    { try McuMgrClient.decode(FileHashResponse.self, from: $0, operation: "fs hash") },
    { try McuMgrClient.decode(FileSupportedHashTypesResponse.self, from: $0, operation: "fs hash types") },
    { try McuMgrClient.decode(ShellExecuteResponse.self, from: $0, operation: "shell exec") },
    { try McuMgrClient.decode(EnumerationCountResponse.self, from: $0, operation: "enum count") },
    { try McuMgrClient.decode(EnumerationListResponse.self, from: $0, operation: "enum list") },
    { try McuMgrClient.decode(EnumerationSingleResponse.self, from: $0, operation: "enum single") },
    { try McuMgrClient.decode(EnumerationDetailsResponse.self, from: $0, operation: "enum details") },
    { try McuMgrClient.decode(SuitManifestListResponse.self, from: $0, operation: "suit list") },
    { try McuMgrClient.decode(SuitManifestStateResponse.self, from: $0, operation: "suit state") },
    { try McuMgrClient.decode(SuitMissingImageStateResponse.self, from: $0, operation: "suit missing image") },
    { try McuMgrClient.decode(SuitUploadResponse.self, from: $0, operation: "suit upload") },
]

/// A received packet: parsed as the client parses answers; a parsed header re-encodes to its bytes.
func fuzzResponse(_ bytes: [UInt8]) {
    guard let header = try? SMPHeader(decoding: bytes) else { return }
    // Flags are kept as received; the version and operation bits are all the first byte holds but the
    // reserved top bits, which are ignored.
    require(Array(header.bytes.dropFirst()) == Array(bytes[1..<SMPHeader.size]), "header does not re-encode")
    guard let packet = try? SMPPacket(decoding: bytes) else { return }
    require(packet.payload.count == Int(packet.header.length), "payload length differs from the header")
    let index = (Int(packet.header.group.rawValue) &* 31 &+ Int(packet.header.command.rawValue)) % responseDecoders.count
    do {
        _ = try responseDecoders[index](packet)
    } catch let error as McuMgrError {
        require(!error.message.isEmpty, "an error without a message")
    } catch {
        require(false, "decoding threw \(type(of: error)), not McuMgrError: \(error)")
    }
}

// MARK: Images and packages

/// An image parses or is refused with a file error; what parses has consistent ranges.
func fuzzImage(_ bytes: [UInt8]) {
    let data = Data(bytes)
    do {
        let image = try McuMgrImage(data: data)
        require(image.hashedRange.upperBound <= bytes.count, "hashed range beyond the file")
        require(image.unprotectedTLVRange.upperBound <= bytes.count, "TLV area beyond the file")
        require(image.hash.count == image.hashAlgorithm.digestLength, "hash of the wrong length")
        _ = image.body
        _ = image.computedHash()
        _ = try? image.verify()
    } catch let error as McuMgrError {
        require(error.kind == .file, "an image error of kind \(error.kind)")
    } catch {
        require(false, "McuMgrImage threw \(type(of: error)), not McuMgrError: \(error)")
    }
    _ = try? McuMgrPackage(data: data, fileName: "fuzz.bin")
}

/// Limits far below the defaults, so that inputs the fuzzer makes reach them.
private let smallLimits = McuMgrPackage.Limits(maximumEntrySize: 1 << 16, maximumTotalSize: 1 << 18)

func fuzzPackage(_ bytes: [UInt8]) {
    let data = Data(bytes)
    if bytes.starts(with: [0x50, 0x4B]) {
        do {
            let package = try McuMgrPackage(data: data, fileName: "fuzz.zip", limits: smallLimits)
            for image in package.images {
                require(image.data.count <= smallLimits.maximumEntrySize, "an entry above the entry limit")
                require(!image.fileName.hasPrefix("/") && !image.fileName.split(separator: "/").contains(".."),
                    "an unsafe entry path was accepted: \(image.fileName)")
            }
            require(package.totalSize <= smallLimits.maximumTotalSize, "entries above the total limit")
        } catch let error as McuMgrError {
            require(error.kind == .file, "a package error of kind \(error.kind)")
        } catch {
            require(false, "McuMgrPackage threw \(type(of: error)), not McuMgrError: \(error)")
        }
    } else {
        do {
            _ = try McuMgrManifest(json: data)
        } catch let error as McuMgrError {
            require(error.kind == .file, "a manifest error of kind \(error.kind)")
        } catch {
            require(false, "McuMgrManifest threw \(type(of: error)), not McuMgrError: \(error)")
        }
    }
}

func fuzzSUIT(_ bytes: [UInt8]) {
    let data = Data(bytes)
    do {
        let info = try PackageSUITEnvelopeInfo(parsing: data, name: "fuzz.suit")
        require(info.digest.count == 32, "a SUIT digest of \(info.digest.count) bytes")
    } catch let error as McuMgrError {
        require(error.kind == .file, "a SUIT error of kind \(error.kind)")
    } catch {
        require(false, "the SUIT parser threw \(type(of: error)), not McuMgrError: \(error)")
    }
    _ = try? McuMgrPackage(data: data, fileName: "fuzz.suit")
}

/// Writes a line to standard error (the `stderr` global is not concurrency-safe in Swift 6).
private func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    _ = line.withCString { write(2, $0, strlen($0)) }
}
