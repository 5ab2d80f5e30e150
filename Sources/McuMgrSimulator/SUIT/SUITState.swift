import McuMgrCore

/// The SUIT side of a simulated SUIT device (PROTOCOL.md 3.11): the installed application root manifest,
/// the DFU partition (candidate envelope), the cache partitions, the resource a candidate waits for, and
/// the upload in progress.
struct SUITState: Sendable {
    /// `CONFIG_MGMT_GROUP_ID_SUIT`.
    static let group: UInt16 = 66
    /// The application root manifest role.
    static let applicationRoot: UInt8 = 0x20

    enum Phase: Sendable {
        /// Nothing to do.
        case idle
        /// A candidate is in the DFU partition, installation deferred until asked for.
        case deferred
        /// Waiting for the client to upload the resource `fetches[index]` under `session`.
        case awaitingResource(index: Int, session: UInt64)
        /// Everything is there: installation happens at the next boot (the device reboots by itself).
        case readyToInstall
    }

    /// What an upload in progress writes.
    enum UploadTarget: Sendable, Equatable {
        case envelope(deferInstall: Bool)
        case resource(session: UInt64)
        case cache(UInt64)
    }

    struct Upload: Sendable {
        var target: UploadTarget
        var length: Int
        var data: [UInt8]
    }

    let configuration: SimulatedSUITConfiguration
    var sequenceNumber: UInt64
    var digest: [UInt8]
    /// Installed component images by URI.
    var installed: [String: [UInt8]]
    /// The DFU partition: the candidate envelope's bytes and what they say.
    var candidateBytes: [UInt8]?
    var candidate: ParsedSUITEnvelope?
    /// Resources gathered for the candidate (integrated, cached or uploaded), by URI.
    var gathered: [String: [UInt8]] = [:]
    var caches: [UInt64: [String: [UInt8]]] = [:]
    var phase: Phase = .idle
    var upload: Upload?
    var nextSession: UInt64 = 1
    /// Installations done so far.
    var installCount = 0

    init(configuration: SimulatedSUITConfiguration) {
        self.configuration = configuration
        sequenceNumber = configuration.sequenceNumber
        digest = Array(SHA256.hash(data: Array("installed root manifest \(configuration.sequenceNumber)".utf8)))
        installed = configuration.installedResources
    }

    /// Starts processing the candidate: gathers what it can and either waits for a resource or gets ready
    /// to install. Returns an SMP return code on failure (the candidate is dropped), nil on success.
    mutating func process() -> Int? {
        guard let candidate else { return 5 }  // ENOENT: no envelope delivered
        guard candidate.sequenceNumber > sequenceNumber else {
            drop()
            return 11  // EACCESSDENIED: downgrade prevention
        }
        gathered = [:]
        for fetch in candidate.fetches where fetch.uri.hasPrefix("#") {
            guard let data = candidate.integrated[fetch.uri] else {
                drop()
                return 3  // EINVAL: the manifest names a payload the envelope lacks
            }
            if let digest = fetch.digest, Array(SHA256.hash(data: data)) != digest {
                drop()
                return 9  // ECORRUPT
            }
            gathered[fetch.uri] = data
        }
        return advance()
    }

    /// Moves to the next missing resource or to installation.
    private mutating func advance() -> Int? {
        guard let candidate else { return 5 }
        for (index, fetch) in candidate.fetches.enumerated() where gathered[fetch.uri] == nil {
            // Conditional fetch: what is installed with the right digest is not needed again.
            if let present = installed[fetch.uri], let digest = fetch.digest, Array(SHA256.hash(data: present)) == digest {
                gathered[fetch.uri] = present
                continue
            }
            if let cached = caches.values.lazy.compactMap({ $0[fetch.uri] }).first {
                if let digest = fetch.digest, Array(SHA256.hash(data: cached)) != digest {
                    drop()
                    return 9  // ECORRUPT
                }
                gathered[fetch.uri] = cached
                continue
            }
            phase = .awaitingResource(index: index, session: nextSession)
            nextSession += 1
            return nil
        }
        phase = .readyToInstall
        return nil
    }

    /// A requested resource arrived whole. Returns an SMP return code on failure.
    mutating func resourceArrived(_ data: [UInt8], session: UInt64) -> Int? {
        guard case .awaitingResource(let index, let expected) = phase, expected == session, let candidate else {
            return 6  // EBADSTATE
        }
        let fetch = candidate.fetches[index]
        if let digest = fetch.digest, Array(SHA256.hash(data: data)) != digest {
            drop()
            return 9  // ECORRUPT
        }
        gathered[fetch.uri] = data
        return advance()
    }

    /// The candidate is abandoned (cleanup, failure).
    mutating func drop() {
        candidate = nil
        candidateBytes = nil
        gathered = [:]
        phase = .idle
        upload = nil
    }

    /// Whether the device should reboot now to install.
    var wantsReboot: Bool {
        if case .readyToInstall = phase { return true }
        return false
    }

    /// What happens at boot: a ready candidate is installed. Returns whether it was (installation time).
    mutating func boot() -> Bool {
        upload = nil
        guard case .readyToInstall = phase, let candidate else {
            if case .awaitingResource = phase { phase = candidateBytes == nil ? .idle : .deferred }
            return false
        }
        sequenceNumber = candidate.sequenceNumber
        digest = candidate.digest
        for (uri, data) in gathered { installed[uri] = data }
        installCount += 1
        drop()
        caches = [:]
        return true
    }
}
