/// A SUIT device (NCS, nRF54H series; PROTOCOL.md 3.11): what it has installed at start.
public struct SimulatedSUITConfiguration: Sendable, Hashable {
    /// Manifest roles the device reports (manifests list), e.g. 0x10 SEC top, 0x11 SDFW, 0x20 application
    /// root, 0x22 application local. The application root (0x20) is the one envelopes update.
    public var roles: [UInt8] = [0x10, 0x11, 0x20, 0x22]
    /// Sequence number of the installed application root manifest; a candidate must be higher
    /// (downgrade prevention).
    public var sequenceNumber: UInt64 = 1
    /// `class_id` of the application root manifest (16 bytes).
    public var classID: [UInt8] = [
        0x08, 0xC1, 0xB5, 0x99, 0x55, 0xE8, 0x5F, 0xBC, 0x9E, 0x76, 0x7B, 0xC2, 0x9C, 0xE1, 0xB0, 0x4D,
    ]
    /// `vendor_id` (16 bytes): the UUID NCS derives from "nordicsemi.com".
    public var vendorID: [UInt8] = [
        0x76, 0x17, 0xDA, 0xA5, 0x71, 0xFD, 0x5A, 0x85, 0x8F, 0x94, 0xE2, 0x8D, 0x73, 0x5C, 0xE9, 0xF4,
    ]
    /// Number of DFU cache partitions (cache raw upload `target_id` 0 ..< count; image group images 1...count).
    public var cachePartitions: Int = 2
    /// Components installed at start, by resource URI (e.g. "file://app.bin"): a resource whose SHA-256
    /// matches the installed one is not requested again.
    public var installedResources: [String: [UInt8]] = [:]

    public init() {}
}
