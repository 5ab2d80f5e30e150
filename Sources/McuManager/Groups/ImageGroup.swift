#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Image group (1): PROTOCOL.md 3.2 and 4.

extension McuMgrCommand {
    /// Image group commands.
    public enum Image {
        /// Image state: list (read), test/confirm (write).
        public static let state = McuMgrCommand(0)
        /// Upload.
        public static let upload = McuMgrCommand(1)
        /// Core list (mynewt).
        public static let coreList = McuMgrCommand(3)
        /// Core load (mynewt).
        public static let coreLoad = McuMgrCommand(4)
        /// Erase a slot.
        public static let erase = McuMgrCommand(5)
        /// Slot information.
        public static let slotInfo = McuMgrCommand(6)
    }
}

/// Reads the image state (the image list).
public struct ImageStateReadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.state }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "image list" }
    public typealias Response = McuMgrImageStateResponse
    /// Creates the request.
    public init() {}
}

/// Marks an image for test (`confirm` false) or confirms one (`confirm` true; no hash = the running image).
public struct ImageStateWriteRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.state }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "image state write" }
    public typealias Response = McuMgrImageStateResponse

    /// The image's SHA-256 TLV hash (`hash`, 32 bytes); not the SHA-256 of the file.
    public var hash: Data?
    /// Confirm permanently (true) or test once (false) (`confirm`).
    public var confirm: Bool

    /// Creates the request.
    public init(hash: Data?, confirm: Bool) {
        self.hash = hash
        self.confirm = confirm
    }
}

/// One upload chunk (PROTOCOL.md 4.1). First-chunk keys are nil on continuation chunks.
public struct ImageUploadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.upload }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "image upload" }
    public typealias Response = ImageUploadResponse

    /// Image number (`image`); sent only on the first chunk and only when > 0.
    public var image: Int?
    /// Chunk bytes (`data`).
    public var data: Data
    /// Total file size (`len`); first chunk only.
    public var length: Int?
    /// Byte offset of `data` (`off`).
    public var offset: Int
    /// SHA-256 of the whole file (`sha`); first chunk only; tags the session for resume.
    public var sha: Data?
    /// Refuse unless newer than the running version (`upgrade`); first chunk only.
    public var upgrade: Bool?

    /// Creates a chunk request.
    public init(
        offset: Int, data: Data, length: Int? = nil, image: Int? = nil, sha: Data? = nil, upgrade: Bool? = nil
    ) {
        self.image = image
        self.data = data
        self.length = length
        self.offset = offset
        self.sha = sha
        self.upgrade = upgrade
    }

    enum CodingKeys: String, CodingKey {
        case image, data, length = "len", offset = "off", sha, upgrade
    }
}

/// The device's answer to an upload chunk.
public struct ImageUploadResponse: Decodable, Sendable, Hashable {
    /// The next byte the device expects (`off`).
    public var offset: Int?
    /// Whether the uploaded image matched `sha` (`match`); only with image check enabled, on the last chunk.
    public var match: Bool?

    enum CodingKeys: String, CodingKey { case offset = "off", match }
}

/// Erases a slot (absolute number `image * 2 + slot`; nil = the slot opposite the active one).
public struct ImageEraseRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.erase }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "image erase" }
    public typealias Response = McuMgrEmptyResponse

    /// Absolute slot (`slot`).
    public var slot: Int?

    /// Creates the request.
    public init(slot: Int? = nil) { self.slot = slot }

    /// The device erases the slot for every copy: `McuMgrTimeouts.imageEraseResendFloor`.
    public var resendFloor: Duration? { McuMgrTimeouts.imageEraseResendFloor }
}

/// Slot information (sizes, upload ids).
public struct ImageSlotInfoRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.slotInfo }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "image slot info" }
    public typealias Response = ImageSlotInfoResponse
    /// Creates the request.
    public init() {}
}

/// Slot sizes per image.
public struct ImageSlotInfoResponse: Decodable, Sendable, Hashable {
    /// One image's slots.
    public struct Image: Decodable, Sendable, Hashable {
        /// One slot.
        public struct Slot: Decodable, Sendable, Hashable {
            /// Slot within the image (0/1).
            public var slot: Int
            /// Slot size in bytes.
            public var size: Int
            /// Id to pass as upload `image` for direct upload (`upload_image_id`).
            public var uploadImageID: Int?

            enum CodingKeys: String, CodingKey { case slot, size, uploadImageID = "upload_image_id" }
        }

        /// Image number (`image`).
        public var image: Int
        /// Its slots (`slots`).
        public var slots: [Slot]
        /// Largest image that fits (`max_image_size`).
        public var maximumImageSize: Int?

        enum CodingKeys: String, CodingKey { case image, slots, maximumImageSize = "max_image_size" }
    }

    /// Images (`images`).
    public var images: [Image]
}

/// Lists core dumps (mynewt).
public struct CoreListRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.coreList }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "core list" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}

/// Reads part of the core dump (mynewt).
public struct CoreLoadRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.coreLoad }
    public static var operation: SMPOperation { .read }
    public static var operationName: String { "core load" }
    public typealias Response = CoreLoadResponse

    /// Offset to read from (`off`).
    public var offset: Int

    /// Creates the request.
    public init(offset: Int) { self.offset = offset }

    enum CodingKeys: String, CodingKey { case offset = "off" }
}

/// A piece of the core dump.
public struct CoreLoadResponse: Decodable, Sendable, Hashable {
    /// Offset of `data` (`off`).
    public var offset: Int?
    /// Total dump size (`len`), on the first piece.
    public var length: Int?
    /// Bytes (`data`).
    public var data: Data?

    enum CodingKeys: String, CodingKey { case offset = "off", length = "len", data }
}

/// Erases the core dump (mynewt).
public struct CoreEraseRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .image }
    public static var command: McuMgrCommand { McuMgrCommand.Image.coreLoad }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "core erase" }
    public typealias Response = McuMgrEmptyResponse
    /// Creates the request.
    public init() {}
}
