import McuMgrCore

/// MCUboot serial recovery (PROTOCOL.md 3.12; MCUboot boot_serial.c): what a device answers after a reset
/// with `boot_mode` 1, until the next reset. Echo, console echo, reset, MCUmgr parameters (`buf_count` 1),
/// image list (its answer has no `rc`) and upload; everything else `rc 8`. Uploads go to the primary slot of the `image` asked for,
/// ignore `sha` and `upgrade`, and restart at every `off 0` (no resume). Answers always carry `rc`, never
/// `err`; the version bits are echoed. Malformed requests get no answer at all. A chunk that reaches sectors
/// not erased yet erases them first (`busyTime`).
extension DeviceState {
    mutating func processRecovery(_ packet: [UInt8]) -> [[UInt8]] {
        busyTime = .zero
        var responses: [[UInt8]] = []
        var start = 0
        while packet.count - start >= SMPHeader.size {
            let b0 = packet[start]
            let opBits = b0 & 0b111
            let versionBits = (b0 >> 3) & 0b11
            let length = Int(packet[start + 2]) << 8 | Int(packet[start + 3])
            let group = UInt16(packet[start + 4]) << 8 | UInt16(packet[start + 5])
            let sequence = packet[start + 6]
            let command = packet[start + 7]
            // Malformed (bad OP, more payload announced than present): silence.
            guard opBits == 0 || opBits == 2, length <= packet.count - start - SMPHeader.size else { break }
            let payload = packet[(start + SMPHeader.size)..<(start + SMPHeader.size + length)]
            received.append(
                SimulatedRequestRecord(
                    operation: opBits == 0 ? .read : .write, group: McuMgrGroup(rawValue: group),
                    command: McuMgrCommand(rawValue: command)))
            let entries = recoveryAnswer(group: group, command: command, read: opBits == 0, payload: payload)
            let body = ResponseEncoder.encode(.map(entries), indefiniteLengths: configuration.indefiniteLengthMaps)
            var header: [UInt8] = [
                (versionBits << 3) | (opBits + 1), 0, UInt8(body.count >> 8), UInt8(body.count & 0xFF),
                UInt8(group >> 8), UInt8(group & 0xFF), sequence, command,
            ]
            header.append(contentsOf: body)
            responses.append(header)
            stats.count(requestBytes: SMPHeader.size + length, responseBytes: header.count)
            start += SMPHeader.size + length
        }
        return responses
    }

    private func rc(_ value: Int) -> [CBORMapEntry] { [CBORMapEntry(key: "rc", value: .int(value))] }

    private mutating func recoveryAnswer(group: UInt16, command: UInt8, read: Bool, payload: ArraySlice<UInt8>)
        -> [CBORMapEntry]
    {
        let request = SimulatedRequest(
            operation: read ? .read : .write, version: .v1, group: McuMgrGroup(rawValue: group),
            command: McuMgrCommand(rawValue: command), payload: payload)
        guard let fields = try? request.fields() else { return rc(3) }
        switch (group, command, read) {
        case (0, 0, _):
            guard configuration.bootloader.serialRecoveryEcho else { return rc(8) }
            guard case .text(let text)? = fields.value("d") else { return rc(3) }
            return [CBORMapEntry(key: "r", value: .text(text))] + rc(0)
        case (0, 1, false):
            return rc(0)
        case (0, 5, false):
            requestedReset = (.resetCommand, nil)
            return rc(0)
        case (0, 6, true):
            guard configuration.bootloader.serialRecoveryParameters else { return rc(8) }
            return .entries([
                "buf_size": .unsigned(UInt64(configuration.bootloader.serialRecoveryBufferSize)), "buf_count": 1,
            ]) + rc(0)
        case (1, 0, true):
            return recoveryImageList()  // MCUboot's bs_list: the images array only, no rc
        case (1, 1, false):
            return recoveryUpload(fields)
        default:
            return rc(8)
        }
    }

    private func recoveryImageList() -> [CBORMapEntry] {
        var list: [CBOR] = []
        for image in 0..<images.imageCount {
            for slot in 0..<2 {
                guard let content = images.slot(image, slot) else { continue }
                var entries: [CBORMapEntry] = []
                if images.imageCount > 1 { entries.append("image", .unsigned(UInt64(image))) }
                entries.append("slot", .unsigned(UInt64(slot)))
                entries.append("version", .text(content.info.version.imageListText))
                entries.append("hash", .bytes(content.info.hash))
                list.append(.map(entries))
            }
        }
        return [CBORMapEntry(key: "images", value: .array(list))]
    }

    /// MCUboot `bs_upload`: `image`, `data`, `len`, `off` only; the primary slot; `off 0` always restarts.
    private mutating func recoveryUpload(_ fields: RequestFields) -> [CBORMapEntry] {
        guard case .unsigned(let offset64)? = fields.value("off"), let offset = Int(exactly: offset64),
            case .bytes(let data)? = fields.value("data")
        else { return rc(3) }
        var image = 0
        if case .unsigned(let n)? = fields.value("image") { image = Int(clamping: n) }
        guard image < images.imageCount else { return rc(3) }
        if offset == 0 {
            guard case .unsigned(let length64)? = fields.value("len"), let length = Int(exactly: length64),
                length <= images.slotSize, data.count <= length
            else { return rc(3) }
            images.pairs[image].slots[0] = ImageBank.Slot()
            images.upload = ImageBank.UploadSession(image: image, slot: 0, length: length, sha: [], data: data)
            recoveryUpload = RecoveryUpload(length: length)
        } else {
            // bs_upload keeps curr_off after the last chunk too: a chunk at any other offset (a duplicate, a
            // late copy) is answered rc 0 with the offset it expects, and changes nothing.
            guard let session = images.upload, session.offset == offset else {
                return rc(0) + .entries(["off": .unsigned(UInt64(images.upload?.offset ?? recoveryUpload?.offset ?? 0))])
            }
            guard offset + data.count <= session.length else { return rc(3) }
            images.upload!.data.append(contentsOf: data)
        }
        let session = images.upload!
        recoveryUpload?.offset = session.offset
        if var progress = recoveryUpload, session.offset > 0 {
            // Progressive erase: every sector up to the chunk's last byte not erased yet.
            let sector = max(1, configuration.bootloader.serialRecoveryEraseSectorSize)
            let needed = (session.offset - 1) / sector * sector + sector
            if needed > progress.erasedUpTo {
                let sectors = (needed - progress.erasedUpTo) / sector
                busyTime += configuration.bootloader.serialRecoveryEraseTime * sectors
                progress.erasedUpTo = needed
                recoveryUpload = progress
            }
        }
        if session.offset == session.length {
            images.upload = nil
            // MCUboot checks the image only when it boots; an invalid one leaves the slot unusable.
            if let info = try? SimulatedMCUbootImage.parse(session.data, verifyHash: true) {
                images.pairs[image].slots[0] = ImageBank.Slot(
                    image: ImageBank.SlotImage(bytes: session.data, info: info), trailer: .confirmed)
            }
        }
        // MCUboot's bs_upload encodes rc first, then off.
        return rc(0) + .entries(["off": .unsigned(UInt64(session.offset))])
    }
}

/// What MCUboot's `bs_upload` keeps between chunks: its offset (`curr_off`, kept after the last chunk) and
/// where its progressive erase stopped (`not_yet_erased`).
struct RecoveryUpload: Sendable {
    var length: Int
    var offset = 0
    var erasedUpTo = 0
}
