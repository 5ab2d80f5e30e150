import McuMgrCore

/// Encodes response items, either with definite lengths (canonical zcbor) or with indefinite-length
/// maps and arrays (`0xBF…0xFF`, `0x9F…0xFF`) as Zephyr's default non-canonical zcbor does.
enum ResponseEncoder {
    static func encode(_ item: CBOR, indefiniteLengths: Bool) -> [UInt8] {
        guard indefiniteLengths else { return item.encoded }
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(item, into: &out)
        return out
    }

    private static func write(_ item: CBOR, into out: inout [UInt8]) {
        switch item {
        case .map(let entries):
            out.append(0xBF)
            for entry in entries {
                write(entry.key, into: &out)
                write(entry.value, into: &out)
            }
            out.append(0xFF)
        case .array(let items):
            out.append(0x9F)
            for element in items { write(element, into: &out) }
            out.append(0xFF)
        case .tagged(let tag, let inner):
            CBORWriter.writeHead(major: 6, argument: tag, into: &out)
            write(inner, into: &out)
        default:
            CBORWriter.write(item, into: &out)
        }
    }
}
