// libFuzzer targets for the pure protocol core (McuMgrCore), built by Scripts/fuzz.sh against an
// instrumented McuMgrCore module (and McuMgrSerial's RFC2217Codec.swift, which imports nothing, compiled
// in); SMP_FUZZ_TARGET picks the target: cbor, console, raw, telnet.
// Not part of the SwiftPM package. A property that does not hold stops the run with a message and the
// input that broke it (libFuzzer saves it as crash-*).

@testable import McuMgrCore

#if canImport(Glibc)
import Glibc
#endif

/// The target chosen by SMP_FUZZ_TARGET, read once.
private let selectedTarget: String = {
    guard let raw = getenv("SMP_FUZZ_TARGET") else { return "" }
    return String(cString: raw)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    switch selectedTarget {
    case "cbor": fuzzCBOR(bytes)
    case "console": fuzzConsole(bytes)
    case "raw": fuzzRaw(bytes)
    case "telnet": fuzzTelnet(bytes)
    default:
        printError("set SMP_FUZZ_TARGET to cbor, console, raw or telnet\n")
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

// MARK: CBOR

/// A response shape with every kind of field the managers decode, to drive the Codable decoder.
private struct AnyShape: Decodable {
    var rc: Int?
    var rsn: String?
    var off: UInt64?
    var len: Int32?
    var data: [UInt8]?
    var name: String?
    var flag: Bool?
    var ratio: Double?
    var list: [Inner]?
    var table: [String: Int]?
    var nested: [[String?]]?
    var item: CBOR?

    struct Inner: Decodable {
        var slot: UInt8
        var hash: [UInt8]?
        var version: String?
    }
}

/// Decodes one item; what decodes re-encodes, and the encoding decodes to an item that encodes the same.
/// Input that is not one item is read as a stream, item after item, until it ends or an item is damaged.
func fuzzCBOR(_ bytes: [UInt8]) {
    if let item = try? CBOR(decoding: bytes) {
        let encoded = item.encoded
        do {
            let again = try CBOR(decoding: encoded)
            require(again.encoded == encoded, "re-encoding a decoded item is not stable")
        } catch {
            require(false, "the encoding of a decoded item does not decode: \(error)")
        }
        _ = try? CBORDecoder().decode(AnyShape.self, from: item)
        _ = SMPResponseStatus(response: item)
        return
    }
    var reader = CBORReader(bytes)
    while reader.remaining > 0 {
        let before = reader.position
        guard (try? reader.readItem()) != nil else { break }
        require(reader.position > before && reader.position <= bytes.count, "the reader did not advance within the input")
    }
}

// MARK: Framing

/// Cuts `bytes` into pieces whose lengths come from the first byte (the split seed), so that the fuzzer
/// also explores how a stream is split.
private func split(_ bytes: ArraySlice<UInt8>, seed: UInt8) -> [[UInt8]] {
    var pieces: [[UInt8]] = []
    var state = UInt32(seed) | 1
    var start = bytes.startIndex
    while start < bytes.endIndex {
        state = state &* 1_103_515_245 &+ 12345
        let length = 1 + Int((state >> 16) % 64)
        let end = min(start + length, bytes.endIndex)
        pieces.append(Array(bytes[start..<end]))
        start = end
    }
    return pieces
}

private func decodeAll<Codec: SMPFramingCodec>(_ codec: inout Codec, _ pieces: [[UInt8]]) -> [SMPFramingEvent] {
    pieces.flatMap { codec.decode($0) }
}

/// The console decoder gives the same packets and drops whatever the split, holds no more than one
/// packet, and every packet it encodes decodes back.
func fuzzConsole(_ bytes: [UInt8]) {
    guard let seed = bytes.first else { return }
    let stream = bytes.dropFirst()
    // The seed's low bit picks a small packet limit or the default, so that limit checks are reached with
    // small inputs.
    for limit in [seed & 1 == 0 ? ConsoleSerialCodec.defaultMaximumPacketSize : 64] {
        var whole = ConsoleSerialCodec(maximumPacketSize: limit, maximumReceivedLineLength: 256)
        let expected = whole.decode(Array(stream))
        require(whole.bufferedByteCount <= limit + 4, "console decoder holds \(whole.bufferedByteCount) bytes")
        var pieces = ConsoleSerialCodec(maximumPacketSize: limit, maximumReceivedLineLength: 256)
        let got = decodeAll(&pieces, split(stream, seed: seed))
        require(got == expected, "console decoding depends on the split: \(got) vs \(expected)")
        for case .packet(let packet) in expected {
            require(packet.count <= limit, "console packet of \(packet.count) bytes above the \(limit)-byte limit")
        }
    }
    let packet = Array(stream.prefix(ConsoleSerialCodec.largestEncodablePacketSize))
    let lineLength = 7 + Int(seed) % 200
    var codec = ConsoleSerialCodec(maximumLineLength: lineLength)
    let lines = codec.encode(packet)
    require(lines.allSatisfy { $0.count <= lineLength }, "an encoded line is longer than \(lineLength)")
    require(lines.reduce(0) { $0 + $1.count } == codec.encodedSize(ofPacket: packet.count), "encodedSize is wrong")
    let decoded = decodeAll(&codec, lines)
    require(decoded == [.packet(packet)], "a \(packet.count)-byte packet does not survive console framing: \(decoded)")
}

/// The raw decoder gives the same events whatever the split and never holds a whole packet's worth.
func fuzzRaw(_ bytes: [UInt8]) {
    guard let seed = bytes.first else { return }
    let stream = bytes.dropFirst()
    for limit in [seed & 1 == 0 ? RawSerialCodec.defaultMaximumPacketSize : 64] {
        var whole = RawSerialCodec(maximumPacketSize: limit)
        let expected = whole.decode(Array(stream))
        require(whole.bufferedByteCount < limit, "raw decoder holds \(whole.bufferedByteCount) bytes")
        var pieces = RawSerialCodec(maximumPacketSize: limit)
        let got = decodeAll(&pieces, split(stream, seed: seed))
        require(got == expected, "raw decoding depends on the split: \(got) vs \(expected)")
        for case .packet(let packet) in expected {
            require(packet.count <= limit, "raw packet of \(packet.count) bytes above the \(limit)-byte limit")
            do {
                _ = try SMPPacket(decoding: packet)
            } catch {
                require(false, "a packet the raw decoder returned does not parse: \(error)")
            }
        }
    }
}

// MARK: Telnet / RFC 2217

/// The RFC 2217 client codec gives the same data, replies and events whole and in random splits; it
/// never yields more data than it got bytes, answers within a bound, and data escaped by a binary-mode
/// server comes back unchanged after any noise once the stream is resynchronized.
func fuzzTelnet(_ bytes: [UInt8]) {
    guard let seed = bytes.first else { return }
    let stream = Array(bytes.dropFirst())
    func run(_ pieces: [[UInt8]]) -> RFC2217Codec.Decoded {
        var codec = RFC2217Codec(settings: .init(baudRate: 1 + Int(seed) * 977, hardwareFlowControl: seed & 1 == 1))
        _ = codec.start()
        var all = RFC2217Codec.Decoded()
        for piece in pieces {
            let decoded = codec.decode(piece)
            all.data += decoded.data
            all.reply += decoded.reply
            all.events += decoded.events
        }
        return all
    }
    let whole = run([stream])
    require(whole.data.count <= stream.count, "\(whole.data.count) data bytes from \(stream.count) input bytes")
    // Each option request is answered with at most 3 bytes; the settings (once) with at most 60.
    require(whole.reply.count <= stream.count + 60, "a \(whole.reply.count)-byte reply to \(stream.count) bytes")
    let pieces = run(split(stream[...], seed: seed))
    require(pieces == whole, "telnet decoding depends on the split")

    var codec = RFC2217Codec(settings: .init())
    _ = codec.start()
    _ = codec.decode([255, 251, 0] + stream)
    // IAC SE, then a byte that is data or option in any state, then IAC SE again: back to data.
    _ = codec.decode([255, 240, 0x30, 0x30, 255, 240])
    let payload = Array(stream.prefix(64))
    let escaped = payload.flatMap { $0 == 255 ? [255, 255] : [$0] }
    let binary = codec.receivesBinary
    let back = codec.decode(escaped).data
    if binary {
        require(back == payload, "escaped data does not come back: \(back) vs \(payload)")
    } else {
        // NVT: a NUL after a CR is dropped, every other byte comes back.
        let expected = payload.enumerated().compactMap { index, byte in
            byte == 0 && index > 0 && payload[index - 1] == 13 ? nil : byte
        }
        require(back == expected, "NVT data does not come back: \(back) vs \(expected)")
    }
    require(codec.encode(payload).filter { $0 == 255 }.count == 2 * payload.filter { $0 == 255 }.count, "0xFF not doubled")
}

/// Writes a line to standard error (the `stderr` global is not concurrency-safe in Swift 6).
private func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    _ = line.withCString { write(2, $0, strlen($0)) }
}
