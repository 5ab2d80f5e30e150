/// One key/value pair of a CBOR map.
public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBOR
    public var value: CBOR
    public init(key: CBOR, value: CBOR) {
        self.key = key
        self.value = value
    }
}
