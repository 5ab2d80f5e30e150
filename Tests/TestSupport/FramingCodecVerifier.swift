import McuMgrCore
import Testing

/// Checks that a link decoder's output does not depend on how its input is split, in the manner of
/// SwiftNIO's `ByteToMessageDecoderVerifier`; `verifySplits` does the same for anything that takes a
/// byte stream in reads (a channel handler in an `EmbeddedChannel`). `verifyBLEWrites` and
/// `verifyTelnet` check what a sender put on a Bluetooth LE or Telnet (RFC 2217) link.
public enum FramingCodecVerifier {
    /// Feeds `input` to fresh codecs whole, byte by byte, and in `randomSplits` random splits (seeded,
    /// so a failure reproduces), and to one codec reused after `reset()`. Records an issue unless every
    /// way yields the same events, and `expected` if given. Returns the events of the whole feed.
    @discardableResult
    public static func verifyStream<Codec: SMPFramingCodec>(
        _ makeCodec: () -> Codec,
        input: [UInt8],
        expected: [SMPFramingEvent]? = nil,
        seed: UInt64 = 0x5EED_F4A3,
        randomSplits: Int = 50,
        byteByByte: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [SMPFramingEvent] {
        let whole = feed(makeCodec(), chunks: [input])
        if let expected {
            let matches = whole == expected  // compared outside #expect so a failure prints a summary, not megabytes
            #expect(matches, "whole input: \(difference(whole, expected))", sourceLocation: sourceLocation)
        }
        if byteByByte {
            let single = feed(makeCodec(), chunks: input.map { [$0] })
            let matches = single == whole
            #expect(matches, "byte by byte: \(difference(single, whole))", sourceLocation: sourceLocation)
        }
        var random = SplitMix64(seed: seed)
        var reused = makeCodec()
        for round in 0..<randomSplits {
            let chunks = randomChunks(of: input, using: &random)
            let events: [SMPFramingEvent]
            if round % 2 == 0 {
                events = feed(makeCodec(), chunks: chunks)
            } else {
                // Leave the reused codec in some partial state first, then check reset() forgets it.
                _ = reused.decode(Array(input.prefix(Int(random.next(below: UInt64(input.count + 1))))))
                reused.reset()
                events = feed(&reused, chunks: chunks)
            }
            let matches = events == whole
            #expect(
                matches,
                "random split \(round) (seed \(seed), \(chunks.count) chunks): \(difference(events, whole))",
                sourceLocation: sourceLocation)
        }
        return whole
    }

    /// For datagram codecs: decodes each datagram with a fresh codec, with one codec in sequence, and
    /// with one codec reset between datagrams; records an issue unless all agree (and match
    /// `expected`, if given). Returns the events in order.
    @discardableResult
    public static func verifyDatagrams<Codec: SMPFramingCodec>(
        _ makeCodec: () -> Codec,
        datagrams: [[UInt8]],
        expected: [SMPFramingEvent]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> [SMPFramingEvent] {
        let fresh = datagrams.flatMap { datagram -> [SMPFramingEvent] in
            var codec = makeCodec()
            return codec.decode(datagram)
        }
        if let expected {
            let matches = fresh == expected
            #expect(matches, "\(difference(fresh, expected))", sourceLocation: sourceLocation)
        }
        var sequential = makeCodec()
        let inSequence = datagrams.flatMap { sequential.decode($0) }
        let sequentialMatches = inSequence == fresh
        #expect(sequentialMatches, "in sequence: \(difference(inSequence, fresh))", sourceLocation: sourceLocation)
        var resetting = makeCodec()
        let withReset = datagrams.flatMap { datagram -> [SMPFramingEvent] in
            defer { resetting.reset() }
            return resetting.decode(datagram)
        }
        let resetMatches = withReset == fresh
        #expect(resetMatches, "with reset: \(difference(withReset, fresh))", sourceLocation: sourceLocation)
        return fresh
    }

    public static func feed<Codec: SMPFramingCodec>(_ codec: Codec, chunks: [[UInt8]]) -> [SMPFramingEvent] {
        var codec = codec
        return feed(&codec, chunks: chunks)
    }

    public static func feed<Codec: SMPFramingCodec>(_ codec: inout Codec, chunks: [[UInt8]]) -> [SMPFramingEvent] {
        var events: [SMPFramingEvent] = []
        for chunk in chunks { events += codec.decode(chunk) }
        return events
    }

    /// Cuts `input` at random points, sometimes finely, with an occasional empty chunk.
    public static func randomChunks(of input: [UInt8], using random: inout SplitMix64) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var start = 0
        let fine = random.next(below: 4) == 0
        while start < input.count {
            let remaining = input.count - start
            let limit = fine ? min(remaining, 8) : max(1, min(remaining, Int(random.next(below: UInt64(remaining / 2 + 2)))))
            let size = 1 + Int(random.next(below: UInt64(limit)))
            if random.next(below: 16) == 0 { chunks.append([]) }
            chunks.append(Array(input[start..<min(input.count, start + size)]))
            start += size
        }
        return chunks
    }

    /// A short account of where two event lists first differ (packets can be large).
    public static func difference(_ actual: [SMPFramingEvent], _ expected: [SMPFramingEvent]) -> String {
        if actual == expected { return "same" }
        let index = zip(actual, expected).prefix { $0 == $1 }.count
        func show(_ events: [SMPFramingEvent], _ at: Int) -> String {
            guard at < events.count else { return "<end>" }
            return summary(events[at])
        }
        return "\(actual.count) events vs \(expected.count) expected; first difference at \(index): "
            + "\(show(actual, index)) vs \(show(expected, index))"
    }

    public static func summary(_ event: SMPFramingEvent) -> String {
        switch event {
        case .packet(let bytes):
            let head = bytes.prefix(12).map { String($0, radix: 16) }.joined(separator: " ")
            return "packet(\(bytes.count) bytes: \(head)\(bytes.count > 12 ? " …" : ""))"
        case .dropped(let reason):
            return "dropped(\(reason))"
        }
    }
}
