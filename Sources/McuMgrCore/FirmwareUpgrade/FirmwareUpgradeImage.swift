/// One image of a firmware package, as the state machine needs it (the runtime keeps the bytes).
public struct FirmwareUpgradeImage: Sendable, Hashable, CustomStringConvertible {
    /// What the bytes are.
    public enum ContentType: String, Sendable, Hashable {
        /// An MCUboot image (header, body, TLVs).
        case mcubootImage
        /// A SUIT envelope (NCS, group 66).
        case suitEnvelope
        /// A raw SUIT cache partition image.
        case suitCache
    }

    /// Image number (0 app core, 1 net core, ...).
    public var image: Int
    /// The slot the build is linked for (Direct-XIP pairs); nil when the package does not say.
    public var slot: Int?
    /// The MCUboot image hash (SHA-256 TLV), as image lists and test/confirm use it.
    public var hash: [UInt8]
    /// Size in bytes.
    public var size: Int
    /// What the bytes are.
    public var contentType: ContentType

    public init(image: Int, slot: Int? = nil, hash: [UInt8], size: Int, contentType: ContentType = .mcubootImage) {
        self.image = image
        self.slot = slot
        self.hash = hash
        self.size = size
        self.contentType = contentType
    }

    public var description: String { "image \(image) (\(slot.map { "slot \($0) build, " } ?? "")\(size) bytes)" }
}
