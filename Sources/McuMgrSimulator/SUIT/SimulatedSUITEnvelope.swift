import McuMgrCore

/// Builds and reads the SUIT envelopes the simulated SUIT device accepts: real SUIT structure (a subset of
/// draft-ietf-suit-manifest), readable by `McuMgrPackage` (`.suit`):
///
/// ```
/// 107({ 2: bstr([ bstr([-16, sha256(manifest bstr)]) ]),         authentication wrapper (digest only)
///       3: bstr({ 1: 1, 2: sequence-number,                       manifest
///                 3: bstr({ 2: [[bstr(component name)], ...] }),  common: components
///                 17: bstr([ 12, i, 20, {21: uri, 3: bstr([-16, sha256]), 14: size}, 21, 15, ... ]) }),
///       "#name": bstr(payload) ... })                             integrated payloads
/// ```
///
/// The install sequence (17) sets, per component, the parameters URI (21), image digest (3) and image size
/// (14), then fetches (21). A URI `#name` names a payload integrated in the envelope; any other URI (e.g.
/// `file://app.bin`) is a resource the device takes from a cache partition or asks the client for with the
/// missing-image poll. The digest (key 2) is the SHA-256 of the manifest's whole byte-string encoding.
public struct SimulatedSUITEnvelope: Sendable, Hashable {
    /// One component's image.
    public struct Resource: Sendable, Hashable {
        /// Component name (its SUIT component identifier).
        public var component: String
        /// Where the device gets it: `#name` (integrated) or e.g. `file://app.bin`.
        public var uri: String
        /// The bytes.
        public var data: [UInt8]

        public init(component: String, uri: String, data: [UInt8]) {
            self.component = component
            self.uri = uri
            self.data = data
        }

        /// The file name of a `file://` URI (`app.bin`), else the URI.
        public var fileName: String { uri.hasPrefix("file://") ? String(uri.dropFirst(7)) : uri }
        /// Whether the payload travels inside the envelope.
        public var isIntegrated: Bool { uri.hasPrefix("#") }
    }

    /// `suit-manifest-sequence-number`.
    public var sequenceNumber: UInt64
    /// The components' images, in install order.
    public var resources: [Resource]

    public init(sequenceNumber: UInt64, resources: [Resource]) {
        self.sequenceNumber = sequenceNumber
        self.resources = resources
    }

    static let tag: UInt64 = 107
    static let sha256: Int64 = -16

    /// The manifest's byte-string item (key 3).
    private var manifestItem: CBOR {
        let common = CBOR.map([
            CBORMapEntry(key: 2, value: .array(resources.map { .array([.bytes(Array($0.component.utf8))]) }))
        ])
        var sequence: [CBOR] = []
        for (index, resource) in resources.enumerated() {
            let digest = CBOR.array([.int(Self.sha256), .bytes(Array(SHA256.hash(data: resource.data)))]).encoded
            sequence += [
                12, .unsigned(UInt64(index)),
                20,
                .map([
                    CBORMapEntry(key: 21, value: .text(resource.uri)),
                    CBORMapEntry(key: 3, value: .bytes(digest)),
                    CBORMapEntry(key: 14, value: .unsigned(UInt64(resource.data.count))),
                ]),
                21, 15,
                3, 15,
            ]
        }
        let manifest = CBOR.map([
            CBORMapEntry(key: 1, value: 1),
            CBORMapEntry(key: 2, value: .unsigned(sequenceNumber)),
            CBORMapEntry(key: 3, value: .bytes(common.encoded)),
            CBORMapEntry(key: 17, value: .bytes(CBOR.array(sequence).encoded)),
        ])
        return .bytes(manifest.encoded)
    }

    /// The SHA-256 digest clients and the image list report for this envelope.
    public var digest: [UInt8] { Array(SHA256.hash(data: manifestItem.encoded)) }

    /// The envelope file (`.suit`).
    public var bytes: [UInt8] {
        let manifest = manifestItem
        let digestItem = CBOR.array([.int(Self.sha256), .bytes(Array(SHA256.hash(data: manifest.encoded)))])
        let wrapper = CBOR.array([.bytes(digestItem.encoded)])
        var entries = [CBORMapEntry(key: 2, value: .bytes(wrapper.encoded)), CBORMapEntry(key: 3, value: manifest)]
        for resource in resources where resource.isIntegrated {
            entries.append(CBORMapEntry(key: .text(resource.uri), value: .bytes(resource.data)))
        }
        return CBOR.tagged(Self.tag, .map(entries)).encoded
    }

    /// Resources that travel outside the envelope (cache or on request), by URI.
    public var detachedResources: [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        for resource in resources where !resource.isIntegrated { result[resource.uri] = resource.data }
        return result
    }

    /// A DFU cache partition image holding `resources` (URI → bytes) as the simulated device reads it: a
    /// CBOR map of text URIs to byte strings. Upload it with SUIT cache raw upload (cmd 5).
    public static func cache(_ resources: [String: [UInt8]]) -> [UInt8] {
        CBOR.map(resources.keys.sorted().map { CBORMapEntry(key: .text($0), value: .bytes(resources[$0]!)) }).encoded
    }

    /// A demo update: one application image fetched as `file://app.bin`, one integrated radio image.
    public static func demo(sequenceNumber: UInt64 = 2, applicationSize: Int = 16 * 1024) -> SimulatedSUITEnvelope {
        var x: UInt32 = 0x5A17_0000 &+ UInt32(truncatingIfNeeded: sequenceNumber)
        func bytes(_ count: Int) -> [UInt8] {
            (0..<count).map { _ in
                x = x &* 1_664_525 &+ 1_013_904_223
                return UInt8(x >> 24)
            }
        }
        return SimulatedSUITEnvelope(
            sequenceNumber: sequenceNumber,
            resources: [
                Resource(component: "app", uri: "file://app.bin", data: bytes(applicationSize)),
                Resource(component: "rad", uri: "#rad", data: bytes(1024)),
            ])
    }
}

/// What the device understood from an uploaded envelope.
struct ParsedSUITEnvelope: Sendable {
    struct Fetch: Sendable {
        var uri: String
        var digest: [UInt8]?
        var size: Int?
    }

    var sequenceNumber: UInt64
    var digest: [UInt8]
    var fetches: [Fetch]
    var integrated: [String: [UInt8]]

    /// Why an envelope was refused: an SMP return code.
    struct Failure: Error { var rc: Int }

    init(_ bytes: [UInt8]) throws(Failure) {
        func value(_ key: Int, _ item: CBOR?) -> CBOR? { item?.mapEntries?.first { $0.key.int == key }?.value }
        guard let top = try? CBOR(decoding: bytes[...]), case .tagged(SimulatedSUITEnvelope.tag, let envelope) = top,
            let entries = envelope.mapEntries
        else { throw Failure(rc: 3) }
        guard let manifestBytes = value(3, envelope)?.byteString,
            let wrapperBytes = value(2, envelope)?.byteString,
            let wrapper = try? CBOR(decoding: wrapperBytes[...]), let digestBytes = wrapper.arrayValue?.first?.byteString,
            let digestItem = try? CBOR(decoding: digestBytes[...]), let pair = digestItem.arrayValue, pair.count == 2,
            pair[0].int64 == SimulatedSUITEnvelope.sha256, let digest = pair[1].byteString
        else { throw Failure(rc: 3) }
        // The digest must match the manifest (the signature check stands in for this).
        guard Array(SHA256.hash(data: CBOR.bytes(manifestBytes).encoded)) == digest else { throw Failure(rc: 9) }
        guard let manifest = try? CBOR(decoding: manifestBytes[...]), let sequence = value(2, manifest)?.uint64 else {
            throw Failure(rc: 3)
        }
        self.sequenceNumber = sequence
        self.digest = digest
        var integrated: [String: [UInt8]] = [:]
        for entry in entries {
            if case .text(let key) = entry.key, let data = entry.value.byteString { integrated[key] = data }
        }
        self.integrated = integrated
        var fetches: [Fetch] = []
        for key in [16, 17] {  // suit-payload-fetch, suit-install
            guard let sequenceBytes = value(key, manifest)?.byteString,
                let commands = try? CBOR(decoding: sequenceBytes[...]).arrayValue
            else { continue }
            var parameters: [Int: CBOR] = [:]
            var index = 0
            while index + 1 < commands.count {
                let command = commands[index].int
                let argument = commands[index + 1]
                switch command {
                case 12: parameters = [:]  // set-component-index: fresh parameters for the next component
                case 19, 20:  // set/override-parameters
                    for entry in argument.mapEntries ?? [] { if let k = entry.key.int { parameters[k] = entry.value } }
                case 21:  // fetch
                    guard let uri = parameters[21]?.string else { throw Failure(rc: 3) }
                    var digest: [UInt8]?
                    if let d = parameters[3]?.byteString, let item = try? CBOR(decoding: d[...]),
                        let p = item.arrayValue, p.count == 2
                    {
                        digest = p[1].byteString
                    }
                    fetches.append(Fetch(uri: uri, digest: digest, size: parameters[14]?.int))
                default: break
                }
                index += 2
            }
        }
        self.fetches = fetches
    }
}
