import Testing

extension FramingCodecVerifier {
    /// The ways `verifySplits` cuts an input: whole, byte by byte (unless `byteByByte` is false), then
    /// `randomSplits` random cuts drawn from `seed` (the same seed gives the same cuts).
    public static func splits(
        of input: [UInt8], seed: UInt64 = 0x5EED_F4A3, randomSplits: Int = 50, byteByByte: Bool = true
    ) -> [(name: String, chunks: [[UInt8]])] {
        var ways: [(name: String, chunks: [[UInt8]])] = [("whole input", [input])]
        if byteByByte { ways.append(("byte by byte", input.map { [$0] })) }
        var random = SplitMix64(seed: seed)
        for round in 0..<randomSplits {
            let chunks = randomChunks(of: input, using: &random)
            ways.append(("random split \(round) (seed \(seed), \(chunks.count) chunks)", chunks))
        }
        return ways
    }

    /// Hands `input` to `deliver` whole, byte by byte and in `randomSplits` random splits (seeded, so a
    /// failure reproduces); `deliver` starts from fresh state each time (a new `EmbeddedChannel`, say),
    /// feeds the chunks as separate reads and returns what came out. Records an issue unless every way
    /// gives the same result, and `expected` if given. Returns the result of the whole input.
    @discardableResult
    public static func verifySplits<Result: Equatable>(
        input: [UInt8],
        expected: Result? = nil,
        seed: UInt64 = 0x5EED_F4A3,
        randomSplits: Int = 50,
        byteByByte: Bool = true,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ deliver: ([[UInt8]]) throws -> Result
    ) rethrows -> Result {
        let ways = splits(of: input, seed: seed, randomSplits: randomSplits, byteByByte: byteByByte)
        let whole = try deliver(ways[0].chunks)
        if let expected {
            let matches = whole == expected  // outside #expect: a failure prints a summary, not megabytes
            #expect(matches, "whole input: \(brief(whole)) instead of \(brief(expected))", sourceLocation: sourceLocation)
        }
        for way in ways.dropFirst() {
            let result = try deliver(way.chunks)
            let matches = result == whole
            #expect(matches, "\(way.name): \(brief(result)) instead of \(brief(whole))", sourceLocation: sourceLocation)
        }
        return whole
    }

    /// At most 400 characters of a value's description.
    static func brief(_ value: some Any) -> String {
        let text = String(describing: value)
        return text.count <= 400 ? text : text.prefix(400) + "… (\(text.count) characters)"
    }
}
