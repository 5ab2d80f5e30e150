import McuMgrCore
import Testing

extension FramingCodecVerifier {
    /// What is wrong with `writes` (the ATT payloads a sender put on a Bluetooth LE link, in order: a
    /// client's writes or a peripheral's notifications) as the framing of `packets` (PROTOCOL.md §5.5):
    /// every payload holds 1 to `maximumWriteLength` bytes; each packet starts a fresh payload and its
    /// payloads concatenate to it; every payload of a packet but its last is full (`BLEFramingCodec`
    /// fills them, and a device without reassembly takes the first write as the whole request); and a
    /// `BLEFramingCodec` receiver, as Zephyr's reassembly, gets exactly `packets` back. Empty when all hold.
    public static func bleWriteProblems(
        _ writes: [[UInt8]], carrying packets: [[UInt8]], maximumWriteLength: Int
    ) -> [String] {
        var problems: [String] = []
        for (index, write) in writes.enumerated() where write.isEmpty || write.count > maximumWriteLength {
            problems.append("write \(index) holds \(write.count) bytes (1 to \(maximumWriteLength) allowed)")
        }
        var next = 0
        for (number, packet) in packets.enumerated() {
            var carried: [UInt8] = []
            let first = next
            while carried.count < packet.count, next < writes.count {
                if carried.count > 0, writes[next - 1].count != maximumWriteLength {
                    problems.append(
                        "packet \(number): write \(next - 1) holds \(writes[next - 1].count) bytes but is not the packet's last")
                }
                carried += writes[next]
                next += 1
            }
            if packet.isEmpty, next < writes.count {
                carried = writes[next]
                next += 1
            }
            if carried.count > packet.count {
                problems.append(
                    "packet \(number) (\(packet.count) bytes) shares write \(next - 1) with what follows it (writes \(first)..<\(next) hold \(carried.count) bytes)")
            } else if carried.count < packet.count {
                problems.append("packet \(number) (\(packet.count) bytes): the writes end after \(carried.count) of its bytes")
            } else if carried != packet {
                let at = zip(carried, packet).prefix { $0 == $1 }.count
                problems.append("packet \(number): writes \(first)..<\(next) differ from the packet at byte \(at)")
            }
        }
        if next < writes.count {
            problems.append("\(writes.count - next) write(s) after the last packet")
        }
        var receiver = BLEFramingCodec(maximumWriteLength: maximumWriteLength)
        let events = writes.flatMap { receiver.decode($0) }
        if events != packets.map({ .packet($0) }) {
            problems.append("a BLEFramingCodec receiver gets \(difference(events, packets.map { .packet($0) }))")
        }
        return problems
    }

    /// Records an issue for each of `bleWriteProblems(writes, carrying: packets, maximumWriteLength:)`.
    /// Returns whether there were none.
    @discardableResult
    public static func verifyBLEWrites(
        _ writes: [[UInt8]], carrying packets: [[UInt8]], maximumWriteLength: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Bool {
        let problems = bleWriteProblems(writes, carrying: packets, maximumWriteLength: maximumWriteLength)
        for problem in problems.prefix(10) {
            Issue.record("BLE framing (maximum write \(maximumWriteLength) bytes): \(problem)", sourceLocation: sourceLocation)
        }
        return problems.isEmpty
    }
}
