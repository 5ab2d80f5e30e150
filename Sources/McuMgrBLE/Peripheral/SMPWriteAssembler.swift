import McuMgrCore

/// What Zephyr's SMP Bluetooth transport (`subsys/mgmt/mcumgr/transport/src/smp_bt.c`) makes of the
/// writes to its characteristic, for a peripheral that answers as it does. Pure: writes in, outcomes out.
///
/// - With `CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY` every write is one buffer of requests: a write longer
///   than the SMP buffer finds no room and is refused at the ATT layer (a write without response hears
///   nothing of it); a piece shorter than a header is dropped; a request its write holds only part of is
///   answered with rc 9 (ECORRUPT); a write may hold several whole requests.
/// - With reassembly, writes are joined until the header's length is reached; a first piece without a
///   whole header, a request larger than the SMP buffer, or a piece that runs past its request drops
///   the request in progress without an answer.
public struct SMPWriteAssembler: Sendable {
    /// Whether writes are joined into requests (`CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY`).
    public let reassembly: Bool
    /// The SMP buffer, header included (`CONFIG_MCUMGR_TRANSPORT_NETBUF_SIZE`).
    public let bufferSize: Int

    public enum Outcome: Sendable, Hashable {
        /// A whole request to handle.
        case request([UInt8])
        /// An answer the transport sends itself (rc 9 to a request cut short).
        case answer([UInt8])
        /// Bytes dropped without an answer, and why.
        case dropped(String)
    }

    private var pending: [UInt8] = []
    private var expected: Int?

    public init(reassembly: Bool, bufferSize: Int) {
        self.reassembly = reassembly
        self.bufferSize = max(SMPHeader.size, bufferSize)
    }

    /// One write's value.
    public mutating func take(_ write: [UInt8]) -> [Outcome] {
        reassembly ? join(write) : split(write)
    }

    /// Forgets a request in progress (the central unsubscribed or disconnected).
    public mutating func reset() {
        pending = []
        expected = nil
    }

    private func split(_ write: [UInt8]) -> [Outcome] {
        guard write.count <= bufferSize else {
            return [.dropped("a \(write.count)-byte write does not fit the \(bufferSize)-byte SMP buffer")]
        }
        var outcomes: [Outcome] = []
        var rest = write[...]
        while !rest.isEmpty {
            guard rest.count >= SMPHeader.size, let header = try? SMPHeader(decoding: rest) else {
                outcomes.append(.dropped("\(rest.count) bytes without an SMP header"))
                break
            }
            let size = SMPHeader.size + Int(header.length)
            guard rest.count >= size else {
                outcomes.append(.answer(Self.corruptAnswer(to: header)))
                break
            }
            outcomes.append(.request(Array(rest.prefix(size))))
            rest = rest.dropFirst(size)
        }
        return outcomes
    }

    private mutating func join(_ write: [UInt8]) -> [Outcome] {
        guard !write.isEmpty else { return [] }
        if expected == nil {
            guard write.count >= SMPHeader.size, let header = try? SMPHeader(decoding: write) else {
                return [.dropped("a first piece of \(write.count) bytes without a whole SMP header")]
            }
            let size = SMPHeader.size + Int(header.length)
            guard size <= bufferSize, write.count <= bufferSize else {
                return [.dropped("a \(size)-byte request does not fit the \(bufferSize)-byte SMP buffer")]
            }
            guard write.count <= size else {
                return [.dropped("a first piece of \(write.count) bytes runs past its \(size)-byte request")]
            }
            expected = size
        } else if let size = expected, pending.count + write.count > size {
            let had = pending.count
            reset()
            return [.dropped("a piece runs past its \(size)-byte request (\(had) + \(write.count) bytes)")]
        }
        pending += write
        guard let size = expected, pending.count == size else { return [] }
        let request = pending
        reset()
        return [.request(request)]
    }

    /// `{"rc": 9}` in a response header that copies the request's group, sequence and command.
    static func corruptAnswer(to header: SMPHeader) -> [UInt8] {
        let payload = CBOR.textMap(["rc": .int(9)]).encoded
        return SMPPacket(
            header: SMPHeader(
                version: header.version, operation: header.operation.response, length: 0, group: header.group,
                sequence: header.sequence, command: header.command),
            payload: payload
        ).bytes
    }
}
