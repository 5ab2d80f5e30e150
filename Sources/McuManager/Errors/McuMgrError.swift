import McuMgrCore

/// The one public error type: what kind of failure, the device's code when it sent one, and a message
/// that says what happened and what the user can do. Errors of the layers below (the CBOR codec, the
/// session, D-Bus, a system call, the firmware-upgrade machine) reach callers as its `cause`.
public struct McuMgrError: Error, Sendable, CustomStringConvertible {
    /// Broad classes of failure; the CLI maps them to exit codes.
    public enum Kind: String, Sendable, Hashable {
        /// The link could not be opened, or failed (port vanished, socket error).
        case transport
        /// The device did not answer in time.
        case timeout
        /// The device answered with something that breaks the protocol.
        case protocolViolation
        /// The device answered with an error code.
        case device
        /// The request or its arguments were wrong.
        case usage
        /// A local file, package or image is unusable.
        case file
        /// The operation was cancelled.
        case cancelled
    }

    public var kind: Kind
    /// What happened and what to do, for a person.
    public var message: String
    /// The device's SMP-level `rc`, when it sent one.
    public var returnCode: McuMgrReturnCode?
    /// The device's group error, when it sent one.
    public var groupError: McuMgrGroupError?
    /// The device's `rsn` explanation, when it sent one.
    public var reason: String?
    /// The lower layer's error this one reports, when there is one (a `CBORError`, an `SMPSessionError`,
    /// a `DBusError`, a `FirmwareUpgradeFailure`, ...): for code that branches on its details; `message`
    /// already says what it means.
    public var cause: (any Error)?

    public init(
        _ kind: Kind, _ message: String, returnCode: McuMgrReturnCode? = nil,
        groupError: McuMgrGroupError? = nil, reason: String? = nil, cause: (any Error)? = nil
    ) {
        self.kind = kind
        self.message = message
        self.returnCode = returnCode
        self.groupError = groupError
        self.reason = reason
        self.cause = cause
    }

    public var description: String { message }

    /// The error a device status stands for, for the named operation; `linkHint` says what a return
    /// code most likely means on the link it came over (it wins over the code's generic hint).
    public static func device(
        _ status: SMPResponseStatus, operation: String, linkHint: (@Sendable (McuMgrReturnCode) -> String?)? = nil
    ) -> McuMgrError? {
        switch status {
        case .success:
            return nil
        case .returnCode(let rc, let reason):
            var message = "\(operation) failed: the device answered \(rc.name) (rc \(rc.rawValue)): \(rc.meaning)"
            if let reason, !reason.isEmpty { message += " (\(reason))" }
            if let hint = linkHint?(rc) ?? rc.hint { message += "; \(hint)" }
            return McuMgrError(.device, message, returnCode: rc, reason: reason)
        case .groupError(let error):
            let group = error.group.name ?? "group \(error.group.rawValue)"
            var message = "\(operation) failed: the device answered \(group) error \(error.name) (\(error.rc))"
            if let hint = groupErrorHints[error.group.rawValue]?[error.rc] { message += "; \(hint)" }
            return McuMgrError(.device, message, groupError: error)
        }
    }
}

/// What to try for the group errors users meet most.
private let groupErrorHints: [UInt16: [Int: String]] = [
    0: [
        2: "use only the format letters s n r v b m p i o a",
        3: "the bootloader does not know this query; ask without one for its name",
        4: "set the device's clock first (`smp os datetime --set`)",
    ],
    1: [
        8: "no slot holds an image with this hash; see `smp image list`",
        9: "the slot is in use (active, pending or confirmed); confirm or reset first, or erase another slot",
        14: "check the slot number (absolute: image × 2 + slot)",
        21: "the first chunk must carry the image length",
        23: "the file is not an MCUboot image (bad header magic); sign it with imgtool or use the build's signed .bin",
        24: "the image hash is wrong or the file is corrupt; rebuild or re-download the image",
        27: "the device runs a newer version; upload a newer image or drop --upgrade",
        28: "another image is already pending; reset the device or confirm first",
        30: "the image is larger than the slot; check the partition layout",
        32: "confirm the image after it boots, not before",
        33: "the running image cannot be tested; give the hash of the other slot",
    ],
    2: [2: "no such statistics group; see `smp stat list`"],
    3: [3: "no such setting; check the name (e.g. bt/name)", 2: "use a shorter name"],
    8: [
        2: "use an absolute path on a mounted file system, e.g. /lfs/name",
        3: "no such file on the device; check the path",
        4: "the path is a directory; name a file",
        11: "the device lost track of the transfer; run it again",
        14: "no file system is mounted there; check the mount point (e.g. /lfs)",
        15: "the file system is read-only",
        16: "the file is empty",
    ],
    9: [2: "shorten the command", 3: "give a command, e.g. kernel version"],
    10: [4: "the index is past the last group; see `smp enum count`"],
]
