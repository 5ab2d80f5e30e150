/// The file-upload machine (file-system group): whether to look for the start of the file on the device,
/// where the upload starts, how the device's copy is checked afterwards, and when to send again or give up.
///
/// Pure, like `SMPDownloadMachine`: events in (the device's file length, its hash answer, the local
/// digest the runner computed, the upload's end), actions out (close the device's file, ask its length
/// or hash, digest local bytes, upload from an offset, finish, fail). The chunks themselves are
/// `SMPUploadMachine`'s; the runner (`FileSystemManager.upload`) runs one action list at a time, in
/// order: every list ends with the one action whose outcome is the next event (`status`, `hash`,
/// `localDigest`, `upload`), or with `finish` or `fail`.
///
/// Why the steps are these (measured on Zephyr 4.4.0's fs_mgmt, see `FileSystemManager`): the device
/// keeps the file open until a chunk reaches the length sent at offset 0, so its length and hash show
/// only what was committed at the last close; a chunk at offset 0 truncates a closed file but is
/// appended to an open one; an upload of 0 bytes leaves an existing file as it was. So:
/// - with `resume`, a device that may hold the start of this file, and a file long enough for it to pay,
///   the upload first closes the device's file and asks for its length and its hash of that many bytes:
///   when they are the start of the local file, only the rest is sent (and a device that holds all of
///   it with a matching SHA-256 or CRC-32 needs nothing more);
/// - an upload from offset 0 to the end (the device then closes the file itself) is checked by one hash
///   of the whole file; when that hash covers another length, or is missing, the long way follows;
/// - the long way closes the file and asks for its length: equal, the hash settles it; short, the upload
///   continues from the device's length when those bytes match (at most 3 times); longer, it starts again
///   from offset 0 (once);
/// - a digest that differs is a copy of a chunk that arrived late or twice (appended to the open file):
///   the file is closed and sent again from offset 0, once; an upload that ends in a protocol violation
///   (the device's offset left the file: a repeated first chunk was appended) is sent again up to 4 times.
public struct SMPFileUploadMachine: Sendable {
    /// What the upload is and what was asked for.
    public struct Plan: Sendable, Hashable {
        /// The local file's size.
        public var total: Int
        /// Check the device's copy by hash afterwards.
        public var verify: Bool
        /// Look for the start of the file on the device before sending.
        public var resume: Bool
        /// The device may hold an unfinished copy (false: the device is known, and no upload from here left
        /// this path unfinished).
        public var deviceMayHoldStart: Bool
        /// The file takes enough chunks that the resume check (close, length, hash: up to three round
        /// trips) costs less than resending what it may save.
        public var worthCheckingForResume: Bool

        public init(total: Int, verify: Bool, resume: Bool, deviceMayHoldStart: Bool, worthCheckingForResume: Bool) {
            self.total = max(0, total)
            self.verify = verify
            self.resume = resume
            self.deviceMayHoldStart = deviceMayHoldStart
            self.worthCheckingForResume = worthCheckingForResume
        }
    }

    /// How the device's copy was checked.
    public enum Verification: Sendable, Hashable {
        /// Length and SHA-256 matched.
        case sha256
        /// Length and CRC-32 matched.
        case crc32
        /// Only the lengths were compared: the device offers no hash.
        case length
        /// Both sides are empty (a device has no hash of an empty file).
        case empty
        /// Not checked: not asked for.
        case notRequested
        /// Not checked: the device offers neither a hash nor a file status.
        case noHashNorStatus
        /// Not checked: the device hashed with a type this side cannot compute (and has no file status).
        case unknownHashType(String)
    }

    /// The device's answer to a file status request.
    public enum StatusAnswer: Sendable, Hashable {
        /// The file's length.
        case length(Int)
        /// No such file (FS error 3, or rc 5 on v1 devices).
        case notFound
        /// The device has no status command (rc 8).
        case notSupported
        /// Another device error.
        case refused
    }

    /// The device's answer to a hash request, after the runner found a type it offers.
    public enum HashAnswer: Sendable, Hashable {
        /// A hash of `type` over `length` bytes (when the answer says), `output` its bytes (nil: unusable).
        case digest(type: String, length: Int?, output: [UInt8]?)
        /// The device offers no hash type.
        case none
        /// FS error 16 (FILE_EMPTY): the device has no digest of an empty file.
        case fileEmpty
        /// rc 8 or FS error 13 (hash type not found).
        case unsupported
        /// Another device error.
        case refused
        /// The request ended in a protocol violation (its answer could not be read).
        case invalid
    }

    /// What happened.
    public enum Event: Sendable, Hashable {
        /// The answer to `status`.
        case status(StatusAnswer)
        /// The answer to `hash(length:)`.
        case hashed(HashAnswer)
        /// The answer to `localDigest(type:length:)`: nil when this side cannot compute that type.
        case localDigest([UInt8]?)
        /// The upload from the offset asked for reached the end of the file.
        case uploaded
        /// The upload ended in a protocol violation: the device's offset left the file (a repeated first
        /// chunk was appended to the open file) or otherwise contradicted it.
        case uploadViolation
    }

    /// What the runner must do.
    public enum Action: Sendable, Hashable {
        /// Close the file the device holds open (a device without the command has nothing to close).
        case close
        /// Ask the device for the file's length; report `status`.
        case status
        /// Ask the device for its hash of the file's first `length` bytes (nil: the whole file); report
        /// `hashed`.
        case hash(length: Int?)
        /// Compute the local file's `type` digest of its first `length` bytes; report `localDigest`.
        case localDigest(type: String, length: Int)
        /// Record that an upload of this file to this device has begun and is not finished yet.
        case beginUpload
        /// Send the file from `offset` to its end (0: a new file, the first chunk carrying the length);
        /// report `uploaded` or `uploadViolation`.
        case upload(from: Int)
        /// Report progress: every byte is on the device.
        case reportComplete
        /// The data is on the device: the transfer's duration ends now (a later one replaces it; without
        /// one, the whole upload's duration counts).
        case transferEnded
        /// The device's copy differed, for this reason, and the file is sent again from offset 0: say so
        /// (a warning, not an error: the upload goes on).
        case logRestart(Failure)
        /// Done: record the upload as finished; `resumedFrom` bytes were on the device already.
        case finish(Verification, resumedFrom: Int)
        /// The upload cannot go on.
        case fail(Failure)
    }

    /// Why the device's copy is not this file.
    public enum Failure: Sendable, Hashable {
        /// The error of the request just reported (status, hash or upload) stands as it came.
        case requestError
        /// The device's `type` digest differs from the local file's.
        case digestMismatch(type: String, device: [UInt8], local: [UInt8])
        /// The device's file is empty (FILE_EMPTY), the local one has `localLength` bytes.
        case deviceFileEmpty(localLength: Int)
        /// The device's hash answer has no usable output.
        case noOutput
        /// The device hashed `device` bytes, the local file has `local`.
        case hashedLengthDiffers(device: Int, local: Int)
        /// An upload of 0 bytes left the device's `deviceLength` bytes in place (Zephyr does not truncate
        /// on an empty upload).
        case notTruncated(deviceLength: Int)
        /// The device's file has `device` bytes after the upload, the local one `local`.
        case lengthDiffers(device: Int, local: Int)
    }

    /// Most times a short file is completed from the device's length.
    public static let maximumCompletions = 3
    /// Most restarts after an upload that ended in a protocol violation.
    public static let maximumViolationRestarts = 4

    public let plan: Plan
    /// Where the current upload starts.
    public private(set) var startOffset = 0
    /// The bytes found on the device (and not sent) when the upload began.
    public private(set) var resumedFrom = 0
    /// Times a short file was completed from the device's length.
    public private(set) var completions = 0
    /// Times an upload that ended in a protocol violation was started again.
    public private(set) var violationRestarts = 0
    /// The file was sent again from offset 0 after a mismatch, a longer device file or a violation.
    public private(set) var restarted = false

    private enum Phase: Sendable, Hashable {
        case idle
        /// Where the device's copy may continue: its length, its hash of that part, the local digest.
        case prefixStatus
        case prefixHash(length: Int)
        case prefixDigest(type: String, device: [UInt8], length: Int)
        case uploading
        /// The check of an upload from offset 0 to its end by one hash.
        case wholeHash
        case wholeDigest(type: String, device: [UInt8])
        /// The long way: the device's length after a close, then its hash.
        case lengthStatus
        case verifyHash(lengthChecked: Bool)
        case verifyDigest(type: String, device: [UInt8], lengthChecked: Bool)
        case done
    }

    private var phase = Phase.idle
    /// The prefix being checked is the resume check before the upload (not a completion after it).
    private var checkingResume = false

    public init(plan: Plan) {
        self.plan = plan
    }

    private var total: Int { plan.total }

    /// Starts: the resume check when asked for and worth it, else the upload from offset 0.
    public mutating func start() -> [Action] {
        guard phase == .idle else { return [] }
        if plan.resume, plan.deviceMayHoldStart, plan.worthCheckingForResume {
            checkingResume = true
            // The device commits the file on close; until then its length and hash may show less.
            guard total > 0 else { return [.close] + prefixFound(0, nil) }
            phase = .prefixStatus
            return [.close, .status]
        }
        return [.beginUpload] + next()
    }

    /// The outcome of the last action that expects one; an event that does not fit it is ignored.
    public mutating func handle(_ event: Event) -> [Action] {
        switch (phase, event) {
        case (.prefixStatus, .status(let answer)):
            guard case .length(let length) = answer else { return prefixFound(0, nil) }  // No file, or no status.
            return checkPrefix(length)
        case (.prefixHash(let length), .hashed(let answer)):
            switch answer {
            case .digest(let type, let hashed, let output):
                guard hashed == length, let output else { return prefixFound(0, nil) }
                phase = .prefixDigest(type: type, device: output, length: length)
                return [.localDigest(type: type, length: length)]
            case .none, .fileEmpty, .unsupported, .refused:
                return prefixFound(0, nil)  // Without a hash the device's bytes cannot be checked: start over.
            case .invalid:
                return fail(.requestError)
            }
        case (.prefixDigest(let type, let device, let length), .localDigest(let local)):
            guard let local, local == device else { return prefixFound(0, nil) }
            return prefixFound(length, Self.verification(type))

        case (.uploading, .uploaded):
            return sent()
        case (.uploading, .uploadViolation):
            guard violationRestarts < Self.maximumViolationRestarts else { return fail(.requestError) }
            // The device's offset left the file (a repeated first chunk was appended to the open file):
            // close it and send again from offset 0, which truncates it. This shows at the first chunk,
            // so a few tries cost little (at 10% loss each way one first chunk in ten is sent again after
            // its answer was lost).
            violationRestarts += 1
            return [.close] + restart()

        case (.wholeHash, .hashed(let answer)):
            switch answer {
            case .digest(let type, let length, let output):
                // Another length: the file is still open, or the device never received the length.
                guard Self.comparable(type), length == total, let output else { return checkLength() }
                phase = .wholeDigest(type: type, device: output)
                return [.localDigest(type: type, length: total)]
            case .none:
                return checkLength()
            case .fileEmpty, .unsupported, .refused:
                return fail(.requestError)
            case .invalid:
                return mismatch(.requestError)
            }
        case (.wholeDigest(let type, let device), .localDigest(let local)):
            guard let local else { return checkLength() }
            guard local == device else { return mismatch(.digestMismatch(type: type, device: device, local: local)) }
            return finish(Self.verification(type) ?? .length)

        case (.lengthStatus, .status(let answer)):
            let deviceLength: Int?
            switch answer {
            case .length(let length): deviceLength = length
            case .notFound: deviceLength = 0
            case .notSupported: deviceLength = nil
            case .refused: return fail(.requestError)
            }
            guard let length = deviceLength, length != total else {
                guard plan.verify else { return [.transferEnded] + finish(.notRequested) }
                phase = .verifyHash(lengthChecked: deviceLength != nil)
                return [.transferEnded, .hash(length: nil)]
            }
            return lengthDiffers(length)

        case (.verifyHash(let lengthChecked), .hashed(let answer)):
            return settle(Self.verdict(on: answer, total: total, lengthChecked: lengthChecked), lengthChecked: lengthChecked)
        case (.verifyDigest(let type, let device, let lengthChecked), .localDigest(let local)):
            return settle(
                Self.verdict(type: type, device: device, local: local, lengthChecked: lengthChecked),
                lengthChecked: lengthChecked)

        default:
            return []
        }
    }

    // MARK: - Verification

    /// What a hash answer (and then the local digest) says about the device's copy of a `total`-byte
    /// file: the check after an upload, and a download's (`FileSystemManager.download`, which has no
    /// restarts: a difference is its error).
    public enum HashVerdict: Sendable, Hashable {
        /// Checked, or as far as the device allows.
        case verified(Verification)
        /// Compare the device's `type` digest with the local file's (`verdict(type:device:local:lengthChecked:)`).
        case compare(type: String, device: [UInt8])
        /// The device's copy differs, or its answer could not be read (`.requestError`).
        case differs(Failure)
        /// Another device error: it stands as it came.
        case refused
    }

    /// The verdict on the device's hash answer for a `total`-byte file; `lengthChecked`: the device's
    /// length was compared already (without a hash, that is the verification).
    public static func verdict(on answer: HashAnswer, total: Int, lengthChecked: Bool) -> HashVerdict {
        let noHash: Verification = lengthChecked ? .length : .noHashNorStatus
        switch answer {
        case .fileEmpty:
            // The device has no digest of an empty file.
            return total == 0 ? .verified(.empty) : .differs(.deviceFileEmpty(localLength: total))
        case .unsupported, .none:
            return .verified(noHash)
        case .refused:
            return .refused
        case .invalid:
            return .differs(.requestError)
        case .digest(let type, let length, let output):
            guard comparable(type) else { return .verified(lengthChecked ? .length : .unknownHashType(type)) }
            guard let output else { return .differs(.noOutput) }
            if let length, length != total { return .differs(.hashedLengthDiffers(device: length, local: total)) }
            if total == 0 { return .verified(.empty) }
            return .compare(type: type, device: output)
        }
    }

    /// The verdict on the device's `type` digest against the local one (nil: this side cannot compute it).
    public static func verdict(type: String, device: [UInt8], local: [UInt8]?, lengthChecked: Bool) -> HashVerdict {
        guard let local else { return .verified(lengthChecked ? .length : .noHashNorStatus) }
        guard local == device else { return .differs(.digestMismatch(type: type, device: device, local: local)) }
        return .verified(verification(type) ?? .length)
    }

    /// Finishes, asks for the local digest, restarts or fails, as the verdict on the check says.
    private mutating func settle(_ verdict: HashVerdict, lengthChecked: Bool) -> [Action] {
        switch verdict {
        case .verified(let verification):
            return finish(verification)
        case .compare(let type, let device):
            phase = .verifyDigest(type: type, device: device, lengthChecked: lengthChecked)
            return [.localDigest(type: type, length: total)]
        case .differs(let failure):
            return mismatch(failure)
        case .refused:
            return fail(.requestError)
        }
    }

    // MARK: - Steps

    /// The device holds `length` bytes: check that they are the start of the local file.
    private mutating func checkPrefix(_ length: Int) -> [Action] {
        guard length > 0, length <= total else { return prefixFound(0, nil) }
        phase = .prefixHash(length: length)
        return [.hash(length: length)]
    }

    /// The device's first `offset` bytes are the local file's (checked by `verification`, nil: not by a
    /// hash this side knows).
    private mutating func prefixFound(_ offset: Int, _ verification: Verification?) -> [Action] {
        startOffset = offset
        guard checkingResume else { return next() }
        checkingResume = false
        if plan.verify, total > 0, offset == total, let verification {
            // The device holds the whole file: its hash of all of it, just compared, is the verification
            // (a close, a status and the same hash again would only repeat it).
            phase = .done
            resumedFrom = total
            return [.reportComplete, .finish(verification, resumedFrom: total)]
        }
        resumedFrom = offset
        return [.beginUpload] + next()
    }

    /// Sends from `startOffset`, or goes on to the check when nothing is left to send.
    private mutating func next() -> [Action] {
        // An empty file is sent once (its first chunk carries the length 0), not again after a restart.
        if startOffset < total || (total == 0 && completions == 0 && !restarted) {
            phase = .uploading
            return [.upload(from: startOffset)]
        }
        return (startOffset == total && total > 0 ? [.reportComplete] : []) + sent()
    }

    /// The upload reached the end: an upload from offset 0 is checked by one hash of the whole file.
    private mutating func sent() -> [Action] {
        if plan.verify, startOffset == 0, total > 0, completions == 0, !restarted {
            // Sent from offset 0 (with the length) to the end: the device has closed the file. Its hash of
            // all `total` bytes confirms length and content at once.
            phase = .wholeHash
            return [.transferEnded, .hash(length: nil)]
        }
        return checkLength()
    }

    /// The long way: close the file (the device commits it on close) and ask for its length.
    private mutating func checkLength() -> [Action] {
        phase = .lengthStatus
        return [.close, .status]
    }

    /// The device's file has `length` bytes, not the local `total`.
    private mutating func lengthDiffers(_ length: Int) -> [Action] {
        if total == 0 { return fail(.notTruncated(deviceLength: length)) }
        if length < total, completions < Self.maximumCompletions {
            // A short file: the device lost the upload's length or an answer; continue from its length when
            // its bytes are the start of this file, else from 0.
            completions += 1
            return checkPrefix(length)
        }
        if length > total, !restarted { return restart() }
        return fail(.lengthDiffers(device: length, local: total))
    }

    /// The device's copy differs (`failure`): close it, so that the chunk at offset 0 truncates it, and send
    /// again, once. A copy of a chunk that reached the device late or twice does that: Zephyr appends a
    /// repeated offset-0 chunk to the file it has open and answers the next chunk with FS error 11 and an
    /// offset that covers both copies, which reads like that chunk's acknowledgement.
    private mutating func mismatch(_ failure: Failure) -> [Action] {
        guard !restarted else { return fail(failure) }
        return [.logRestart(failure), .close] + restart()
    }

    /// Sends again from offset 0.
    private mutating func restart() -> [Action] {
        restarted = true
        startOffset = 0
        return next()
    }

    private mutating func finish(_ verification: Verification) -> [Action] {
        phase = .done
        return [.finish(verification, resumedFrom: resumedFrom)]
    }

    private mutating func fail(_ failure: Failure) -> [Action] {
        phase = .done
        return [.fail(failure)]
    }

    /// A hash type this side computes too.
    private static func comparable(_ type: String) -> Bool { type == "sha256" || type == "crc32" }

    private static func verification(_ type: String) -> Verification? {
        type == "sha256" ? .sha256 : type == "crc32" ? .crc32 : nil
    }
}
