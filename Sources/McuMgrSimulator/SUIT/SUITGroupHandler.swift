import McuMgrCore

/// SUIT group (66) and the image group's SUIT view (PROTOCOL.md 3.11; sdk-nrf suitfu, ios-dm SuitManager).
/// Every answer carries `rc`; errors are plain `rc` values.
extension DeviceState {
    mutating func handleSUIT(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        let fields = try request.fields()
        switch (request.command.rawValue, request.isRead) {
        case (0, true):
            let roles = suit!.configuration.roles.map { CBOR.map(.entries(["role": .unsigned(UInt64($0))])) }
            return .ok(["manifests": .array(roles)])
        case (1, true):
            return try manifestState(fields)
        case (2, false):
            return try suitEnvelopeChunk(fields)
        case (3, true):
            guard case .awaitingResource(let index, let session) = suit!.phase, let candidate = suit!.candidate else {
                return .empty
            }
            return .ok([
                "stream_session_id": .unsigned(session),
                "resource_id": .bytes(Array(candidate.fetches[index].uri.utf8)),
            ])
        case (4, false):
            var target: SUITState.UploadTarget?
            if try fields.count("off") == 0 {
                guard let session = try fields.unsigned("stream_session_id") else { throw .invalidValue }
                guard case .awaitingResource(_, let expected) = suit!.phase, expected == session else {
                    throw .returnCode(.badState)
                }
                target = .resource(session: session)
            }
            return try suitChunk(fields, firstTarget: target)
        case (5, false):
            var target: SUITState.UploadTarget?
            if try fields.count("off") == 0 {
                guard let id = try fields.unsigned("target_id"), id < UInt64(suit!.configuration.cachePartitions)
                else { throw .invalidValue }
                target = .cache(id)
            }
            return try suitChunk(fields, firstTarget: target)
        case (6, false):
            suit!.drop()
            suit!.caches = [:]
            return .empty
        default:
            throw .notSupported
        }
    }

    private func manifestState(_ fields: RequestFields) throws(SimulatorFault) -> SimulatedOutcome {
        guard let role = try fields.unsigned("role") else { throw .invalidValue }
        let state = suit!
        guard let role8 = UInt8(exactly: role), state.configuration.roles.contains(role8) else {
            throw SimulatorFault(.returnCode(McuMgrReturnCode.noEntry.rawValue))
        }
        let root = role8 == SUITState.applicationRoot
        let sequence = root ? state.sequenceNumber : 1
        let digest = root ? state.digest : Array(SHA256.hash(data: [role8]))
        return .ok([
            "class_id": .bytes(root ? state.configuration.classID : Array(SHA256.hash(data: [role8, 0x43]).prefix(16))),
            "vendor_id": .bytes(state.configuration.vendorID),
            "downgrade_prevention_policy": 1,
            "independent_updateability_policy": root ? 1 : 2,
            "signature_verification_policy": 2,
            "digest": .bytes(digest),
            "digest_algorithm": .int(SimulatedSUITEnvelope.sha256),
            "signature_check": 2,
            "sequence_number": .unsigned(sequence),
            "semantic_version": .array([0, 0, .unsigned(sequence)]),
        ])
    }

    /// Candidate envelope upload (cmd 2). `off 0` with `len 0` and no data processes an envelope delivered
    /// earlier with `defer_install`.
    private mutating func suitEnvelopeChunk(_ fields: RequestFields) throws(SimulatorFault) -> SimulatedOutcome {
        if try fields.count("off") == 0, try fields.count("len") == 0, (try fields.bytes("data") ?? []).isEmpty {
            try processCandidate()
            return .ok(["off": 0])
        }
        var target: SUITState.UploadTarget?
        if try fields.count("off") == 0 {
            suit!.drop()  // a new envelope erases the DFU partition
            target = .envelope(deferInstall: try fields.bool("defer_install") ?? false)
        }
        return try suitChunk(fields, firstTarget: target)
    }

    /// Processes the candidate; a reboot to install follows when nothing is missing.
    mutating func processCandidate() throws(SimulatorFault) {
        if let rc = suit!.process() { throw SimulatorFault(.returnCode(rc)) }
        if suit!.wantsReboot { requestedReset = (.update, nil) }
    }

    /// One chunk of a SUIT upload (`off`, `data`, `len` on the first chunk); `firstTarget` names what a
    /// first chunk (`off 0`) writes. Wrong offsets are answered with the expected one.
    private mutating func suitChunk(_ fields: RequestFields, firstTarget: SUITState.UploadTarget?)
        throws(SimulatorFault) -> SimulatedOutcome
    {
        guard let offset = try fields.count("off") else { throw .invalidValue }
        let data = try fields.bytes("data") ?? []
        if offset == 0, let target = firstTarget {
            guard let length = try fields.count("len"), length > 0, data.count <= length else { throw .invalidValue }
            suit!.upload = SUITState.Upload(target: target, length: length, data: data)
        } else {
            guard let upload = suit!.upload, upload.data.count == offset else {
                return .ok(["off": .unsigned(UInt64(suit!.upload?.data.count ?? 0))])
            }
            guard offset + data.count <= upload.length else {
                suit!.upload = nil
                throw .invalidValue
            }
            suit!.upload!.data.append(contentsOf: data)
        }
        let upload = suit!.upload!
        guard upload.data.count == upload.length else { return .ok(["off": .unsigned(UInt64(upload.data.count))]) }
        suit!.upload = nil
        try finishSUITUpload(upload)
        return .ok(["off": .unsigned(UInt64(upload.length))])
    }

    private mutating func finishSUITUpload(_ upload: SUITState.Upload) throws(SimulatorFault) {
        switch upload.target {
        case .envelope(let deferInstall):
            let parsed: ParsedSUITEnvelope
            do {
                parsed = try ParsedSUITEnvelope(upload.data)
            } catch {
                throw SimulatorFault(.returnCode(error.rc))
            }
            suit!.candidate = parsed
            suit!.candidateBytes = upload.data
            suit!.phase = .deferred
            if !deferInstall { try processCandidate() }
        case .resource(let session):
            if let rc = suit!.resourceArrived(upload.data, session: session) { throw SimulatorFault(.returnCode(rc)) }
            if suit!.wantsReboot { requestedReset = (.update, nil) }
        case .cache(let target):
            var cache: [String: [UInt8]] = [:]
            if let item = try? CBOR(decoding: upload.data), let entries = item.mapEntries {
                for entry in entries {
                    if let uri = entry.key.string, let bytes = entry.value.byteString { cache[uri] = bytes }
                }
            }
            suit!.caches[target] = cache
        }
    }

    // MARK: Image group view

    /// The image group on a SUIT device: image 0 slot 0 is the installed root manifest (version = sequence
    /// number, hash = digest), slot 1 the candidate; upload image 0 = the DFU partition (envelope, deferred),
    /// image n ≥ 1 = cache partition n − 1; `{"confirm": true}` starts the installation.
    mutating func handleSUITImage(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        switch (request.command.rawValue, request.isRead) {
        case (0, true):
            return suitImageList()
        case (0, false):
            guard try request.fields().bool("confirm") == true else { throw .notSupported }
            try processCandidate()
            return suitImageList()
        case (1, false):
            let fields = try request.fields()
            var target: SUITState.UploadTarget?
            if try fields.count("off") == 0 {
                let image = try fields.count("image") ?? 0
                if image == 0 {
                    suit!.drop()
                    target = .envelope(deferInstall: true)
                } else {
                    guard image <= suit!.configuration.cachePartitions else { throw .group(.image, 9) }  // NO_FREE_SLOT
                    target = .cache(UInt64(image - 1))
                }
            }
            return try suitChunk(fields, firstTarget: target)
        default:
            throw .notSupported
        }
    }

    private func suitImageList() -> SimulatedOutcome {
        let state = suit!
        var list: [CBOR] = [
            .map(.entries([
                "slot": 0, "version": .text("\(state.sequenceNumber)"), "hash": .bytes(state.digest),
                "bootable": true, "pending": false, "confirmed": true, "active": true, "permanent": false,
            ]))
        ]
        if let candidate = state.candidate {
            list.append(
                .map(.entries([
                    "slot": 1, "version": .text("\(candidate.sequenceNumber)"), "hash": .bytes(candidate.digest),
                    "bootable": true, "pending": true, "confirmed": false, "active": false, "permanent": true,
                ])))
        }
        return .ok(["images": .array(list), "splitStatus": 0])
    }
}
