/// What a Bluetooth LE client learns about a device's SMP server once and then remembers per device:
/// its SMP buffer (`os params`) and whether it reassembles a request written in several pieces
/// (Zephyr's `CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY`, off unless a project turns it on).
///
/// Without reassembly Zephyr takes every write as a whole request: a request split over two writes is
/// answered with rc 9 (ECORRUPT) for its first piece, and a piece of fewer than 8 bytes is dropped.
/// With reassembly, a request larger than the buffer is dropped without an answer. Either way the
/// client has to know the two facts before it sends a request longer than one write.
public struct BLEDeviceProfile: Sendable, Hashable, CustomStringConvertible {
    /// The device's SMP buffer size, header included (`buf_size`); nil when it does not say.
    public var bufferSize: Int?
    /// The device's SMP buffer count (`buf_count`); nil when it does not say.
    public var bufferCount: Int?
    /// Whether the device reassembles requests split over several writes; nil when not known (then
    /// the configured assumption holds).
    public var reassembles: Bool?
    /// The pieces of one request do not reach the device whole on this link, whatever its firmware
    /// does: the link runs EATT, or the reassembly probe went unanswered (a device without reassembly
    /// answers a request cut short with rc 9, so silence means the pieces were lost or reordered on the
    /// way). BlueZ sends the writes of one request over all of its EATT bearers at once, where a short
    /// piece overtakes a long one. Requests then go in single writes (`reassembles` is false).
    public var piecesArriveOutOfOrder: Bool

    public init(bufferSize: Int? = nil, bufferCount: Int? = nil, reassembles: Bool? = nil, piecesArriveOutOfOrder: Bool = false) {
        self.bufferSize = bufferSize
        self.bufferCount = bufferCount
        self.reassembles = reassembles
        self.piecesArriveOutOfOrder = piecesArriveOutOfOrder
    }

    public var description: String {
        let buffers = bufferSize.map { "buffers \(bufferCount.map { "\($0) x " } ?? "")\($0) B" } ?? "buffers unknown"
        let reassembly =
            piecesArriveOutOfOrder
            ? "single writes (pieces arrive out of order on this link)" : reassembles.map { $0 ? "reassembles" : "no reassembly" } ?? "reassembly unknown"
        return "\(buffers), \(reassembly)"
    }

    /// Whether the reassembly probe can tell anything: only a device whose buffer holds more than one
    /// write can take a request longer than one write. Unknown buffers are not probed (a probe larger
    /// than the buffer would go unanswered).
    public func needsReassemblyProbe(maximumWriteLength: Int) -> Bool {
        guard reassembles == nil, let bufferSize else { return false }
        return bufferSize > maximumWriteLength
    }

    /// Why a `packetSize`-byte request cannot go to this device, or nil when it can.
    public func refusal(packetSize: Int, maximumWriteLength: Int, assumeReassembly: Bool) -> String? {
        if let bufferSize, packetSize > bufferSize {
            return "a \(packetSize)-byte request does not fit the device's \(bufferSize)-byte SMP buffer (os params buf_size); send less per request"
        }
        if !(reassembles ?? assumeReassembly), packetSize > maximumWriteLength {
            if piecesArriveOutOfOrder {
                return "a \(packetSize)-byte request does not fit one \(maximumWriteLength)-byte Bluetooth write, and requests written in pieces do not reach this device whole on this link: BlueZ sends the pieces over its EATT bearers out of order. Send less per request, or keep BlueZ to one ATT bearer: `Channels = 1` under [GATT] in /etc/bluetooth/main.conf, then `systemctl restart bluetooth`"
            }
            let known = reassembles == false ? "requests written in pieces do not reach this device whole" : "reassembly=off"
            return "a \(packetSize)-byte request does not fit one \(maximumWriteLength)-byte Bluetooth write and \(known) (CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY); send less per request"
        }
        return nil
    }
}

/// The two requests that fill in a `BLEDeviceProfile`, and how to read their answers. SMP v1 headers
/// (every server answers them); sequence numbers of the probe's own.
public enum BLEDeviceProbe {
    /// Sequence of the parameters request.
    public static let parametersSequence: UInt8 = 0xF0
    /// Sequence of the reassembly request.
    public static let reassemblySequence: UInt8 = 0xF1

    /// `os params` (group 0, command 6).
    public static func parametersRequest() -> [UInt8] {
        SMPPacket(
            header: SMPHeader(version: .v1, operation: .read, length: 0, group: .os, sequence: parametersSequence, command: McuMgrCommand(rawValue: 6)),
            payload: CBOR.map([]).encoded
        ).bytes
    }

    /// What an answer says about the buffers: `.some(nil)` when the device answered without them (no
    /// such command), nil when `packet` is not the answer to the parameters request.
    public static func parameters(in packet: [UInt8]) -> (bufferSize: Int, bufferCount: Int)?? {
        guard let answer = try? SMPPacket(decoding: packet), answer.header.sequence == parametersSequence,
            answer.header.group == .os, answer.header.command.rawValue == 6, answer.header.operation == .readResponse
        else { return nil }
        guard let item = try? CBOR(decoding: answer.payload), let entries = item.mapEntries,
            let size = entries.first(where: { $0.key.string == "buf_size" })?.value.int,
            let count = entries.first(where: { $0.key.string == "buf_count" })?.value.int, size >= SMPHeader.size, count >= 1
        else { return .some(nil) }
        return (size, count)
    }

    /// An echo request exactly `maximumWriteLength + 1` bytes long: two writes, the second of one byte.
    /// A device that reassembles echoes it; one that does not answers its first write with rc 9 and
    /// drops the one-byte rest (shorter than a header).
    public static func reassemblyRequest(maximumWriteLength: Int) -> [UInt8] {
        let total = maximumWriteLength + 1
        // {"d": text}: map head 1, key 2, text head 1-3, text n.
        var length = 0
        for head in [1, 2, 3] {
            let candidate = total - SMPHeader.size - 3 - head
            if candidate >= 0, CBORWriter.headSize(argument: UInt64(candidate)) == head {
                length = candidate
                break
            }
        }
        let payload = CBOR.textMap(["d": .text(String(repeating: "r", count: length))]).encoded
        return SMPPacket(
            header: SMPHeader(version: .v1, operation: .write, length: 0, group: .os, sequence: reassemblySequence, command: McuMgrCommand(rawValue: 0)),
            payload: payload
        ).bytes
    }

    /// The write that follows an unanswered reassembly probe: two bytes that end a request a
    /// reassembling device holds half-joined (the probe's head, after its one-byte tail was lost or
    /// went first): they run past the one byte it waits for, and Zephyr's transport drops the request
    /// in progress. A device with nothing in progress drops them as shorter than a header. Without it
    /// the next request would be joined to the probe's head and lost.
    public static let flushWrite: [UInt8] = [0, 0]

    /// What an answer says about reassembly: true for the echo or rc 8 (echo not built), false for rc 9 (ECORRUPT), nil when
    /// `packet` is not the answer to the reassembly request.
    public static func reassembly(in packet: [UInt8]) -> Bool? {
        guard let answer = try? SMPPacket(decoding: packet), answer.header.sequence == reassemblySequence,
            answer.header.group == .os, answer.header.command.rawValue == 0
        else { return nil }
        guard let entries = (try? CBOR(decoding: answer.payload))?.mapEntries else { return nil }
        if entries.contains(where: { $0.key.string == "r" }) { return true }
        switch entries.first(where: { $0.key.string == "rc" })?.value.int {
        case 9: return false
        // NOT_SUPPORTED: a build without echo (nRF Connect SDK's fw_loader BLE MCUmgr sample sets
        // CONFIG_MCUMGR_GRP_OS_ECHO=n). Only a device holding the whole request looks its handler up; a
        // device without reassembly rejects the first piece as corrupt (rc 9) before that.
        case 8: return true
        default: return nil
        }
    }
}
