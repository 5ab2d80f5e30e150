import Foundation
import McuManager
import McuMgrCore

/// Zephyr 4.4.0's fs_mgmt (group 8) over LittleFS as measured on native_sim_serial_fs.exe, for tests
/// that need the real device's quirks rather than the simulator's:
/// - one open file per transfer; it is closed (committed) when a chunk reaches the `len` of the chunk at
///   offset 0, by the close command (4), by another path, or after an error; `stat` and `hash` see the
///   committed size only (0 for a file created and still open);
/// - a chunk at offset > 0 that differs from the device's offset gets FS error 11 with `len` = that
///   offset, and the file is closed and its `len` forgotten; a later chunk at offset > 0 reopens the
///   file and continues at its committed size;
/// - offset 0 with data truncates the file when its committed size is not 0; while it is still open and
///   empty on flash, a repeated offset-0 chunk is appended at the write position instead;
/// - a 0-byte upload leaves an existing file as it was; hash of an empty file: FS error 16.
final class ZephyrFileSystemModel: @unchecked Sendable {
    private let lock = NSLock()
    private var committed: [String: [UInt8]] = [:]
    private var open: OpenFile?
    /// Decides per fs write request (by its `off`) whether the device's answer is lost.
    var loseAnswer: (@Sendable (_ offset: Int, _ count: Int) -> Bool)?
    /// Decides per fs write request (by its `off`) whether the device takes it twice, as a copy the link
    /// duplicated or a resend whose original was only late: the copy's answer never reaches the client.
    var duplicateWrite: (@Sendable (_ offset: Int, _ count: Int) -> Bool)?
    private var writes = 0
    /// Data bytes the device received in upload chunks.
    private(set) var bytesReceived = 0
    /// FS error 11 answers sent.
    private(set) var offsetErrors = 0

    private struct OpenFile {
        var path: String
        var offset: Int
        var length: Int
        var content: [UInt8]
        var position: Int
        var upload: Bool
    }

    func setFile(_ path: String, _ bytes: [UInt8]) { withLock { committed[path] = bytes } }
    /// The committed content (what a reboot would keep).
    func file(_ path: String) -> [UInt8]? { withLock { committed[path] } }
    /// An upload cut off after `bytes` bytes: the file is open and nothing is committed yet.
    func setInterruptedUpload(_ path: String, _ bytes: [UInt8], total: Int) {
        withLock {
            committed[path] = committed[path] ?? []
            open = OpenFile(path: path, offset: bytes.count, length: total, content: bytes, position: bytes.count, upload: true)
        }
    }
    var isFileOpen: Bool { withLock { open != nil } }

    private func withLock<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// Installs the model on a tap: group 8 goes to the model, the rest to the simulator.
    func install(on tap: ManagerTapTransport) {
        tap.rule.withValue { rule in
            rule = { [self] packet in
                guard packet.header.group == .fileSystem else { return .forward(packet.bytes) }
                let body = smpBody(packet)
                let (answer, lose) = withLock { () -> (CBOR, Bool) in
                    let first = handle(packet, body)
                    if packet.header.command.rawValue == 0, packet.header.operation == .write,
                        let offset = body["off"]?.int, duplicateWrite?(offset, writes) == true
                    {
                        _ = handle(packet, body)
                    }
                    return first
                }
                return lose ? .loseAnswer : .reply(answer)
            }
        }
    }

    private func cleanup() {
        if let file = open { committed[file.path] = file.content }
        open = nil
    }

    private func err(_ rc: Int) -> CBOR { .textMap(["err": .textMap(["group": 8, "rc": .int(rc)])]) }

    private func handle(_ packet: SMPPacket, _ body: CBOR) -> (CBOR, Bool) {
        let name = body["name"]?.string ?? ""
        switch (packet.header.command.rawValue, packet.header.operation) {
        case (0, .write): return upload(name, body)
        case (0, .read):
            if open?.path != name || open?.upload == true { cleanup() }
            guard let content = committed[name] else { return (err(3), false) }
            let offset = body["off"]?.int ?? 0
            let piece = Array(content[min(offset, content.count)..<min(offset + 512, content.count)])
            var entries: [(String, CBOR)] = [("off", .int(offset)), ("data", .bytes(piece))]
            if offset == 0 { entries.append(("len", .int(content.count))) }
            return (zephyrModelMap(entries), false)
        case (1, _):
            guard let content = committed[name] else { return (err(3), false) }
            return (.textMap(["len": .int(content.count)]), false)
        case (2, _):
            guard let content = committed[name] else { return (err(3), false) }
            let offset = body["off"]?.int ?? 0
            guard content.count > offset else { return (err(content.isEmpty ? 16 : 12), false) }
            let end = min(content.count, offset + (body["len"]?.int ?? content.count))
            let part = Array(content[offset..<end])
            let type = body["type"]?.string ?? "crc32"
            var entries: [(String, CBOR)] = [("type", .text(type)), ("len", .int(part.count))]
            if offset != 0 { entries.append(("off", .int(offset))) }
            switch type {
            case "sha256": entries.append(("output", .bytes(Array(SHA256.hash(data: part)))))
            case "crc32": entries.append(("output", .int(Int(zephyrModelCRC32(part)))))
            default: return (err(13), false)
            }
            return (zephyrModelMap(entries), false)
        case (3, _):
            return (
                .textMap([
                    "types": .textMap([
                        "crc32": .textMap(["format": 0, "size": 4]), "sha256": .textMap(["format": 1, "size": 32]),
                    ])
                ]), false
            )
        case (4, _):
            cleanup()
            return (.textMap([:]), false)
        default:
            return (.textMap(["rc": 8]), false)
        }
    }

    private func upload(_ name: String, _ body: CBOR) -> (CBOR, Bool) {
        guard let offset = body["off"]?.int, let data = body["data"]?.byteString else { return (.textMap(["rc": 3]), false) }
        writes += 1
        let lose = loseAnswer?(offset, writes) ?? false
        if open?.path != name || open?.upload != true { cleanup() }
        if open == nil {
            let content = committed[name] ?? []
            committed[name] = content
            open = OpenFile(path: name, offset: 0, length: 0, content: content, position: 0, upload: true)
        }
        var file = open!
        var existing = 0
        if offset == 0 {
            guard let length = body["len"]?.int else { return (.textMap(["rc": 3]), lose) }
            file.length = length
            existing = committed[name]?.count ?? 0
        } else if file.offset == 0 {
            file.offset = committed[name]?.count ?? 0
        }
        if offset > 0, offset != file.offset {
            open = file
            cleanup()
            offsetErrors += 1
            return (.textMap(["err": .textMap(["group": 8, "rc": 11]), "len": .int(file.offset)]), lose)
        }
        if !data.isEmpty {
            if offset == 0, existing != 0 {
                file.content = []
                file.position = 0
            } else if file.position != offset {
                file.position = file.content.count
            }
            let end = file.position + data.count
            if end > file.content.count { file.content += Array(repeating: 0, count: end - file.content.count) }
            file.content.replaceSubrange(file.position..<end, with: data)
            file.position = end
            file.offset += data.count
            bytesReceived += data.count
        }
        open = file
        let answer = CBOR.textMap(["off": .int(file.offset)])
        if file.length > 0, file.offset >= file.length { cleanup() }
        return (answer, lose)
    }
}

func zephyrModelCRC32(_ bytes: [UInt8]) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    }
    return c ^ 0xFFFF_FFFF
}

func zephyrModelMap(_ entries: [(String, CBOR)]) -> CBOR {
    .map(entries.map { CBORMapEntry(key: .text($0.0), value: $0.1) })
}
