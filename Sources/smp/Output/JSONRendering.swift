import McuMgrCore

/// Renders CBOR items as JSON for `--json`: the protocol's own keys, byte strings as lowercase hex.
enum JSONRendering {
    static func render(_ item: CBOR, pretty: Bool = false) -> String {
        var out = ""
        write(item, into: &out, indent: pretty ? 0 : nil)
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                let h = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func keyString(_ key: CBOR) -> String {
        switch key {
        case .text(let s): return s
        case .bytes(let b): return hex(b)
        default: return render(key)
        }
    }

    private static func write(_ item: CBOR, into out: inout String, indent: Int?) {
        let newline = indent.map { "\n" + String(repeating: "  ", count: $0 + 1) } ?? ""
        let closing = indent.map { "\n" + String(repeating: "  ", count: $0) } ?? ""
        let inner = indent.map { $0 + 1 }
        switch item {
        case .unsigned(let v): out += String(v)
        case .negative(let n): out += n < UInt64(Int64.max) ? String(-1 - Int64(n)) : "-" + String(n) + "-1"
        case .bytes(let b): out += "\"" + hex(b) + "\""
        case .text(let s): out += quote(s)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (i, element) in items.enumerated() {
                if i > 0 { out += "," }
                out += newline
                write(element, into: &out, indent: inner)
            }
            out += closing + "]"
        case .map(let entries):
            if entries.isEmpty { out += "{}"; return }
            out += "{"
            for (i, entry) in entries.enumerated() {
                if i > 0 { out += "," }
                out += newline + quote(keyString(entry.key)) + (indent == nil ? ":" : ": ")
                write(entry.value, into: &out, indent: inner)
            }
            out += closing + "}"
        case .tagged(_, let inner2): write(inner2, into: &out, indent: indent)
        case .bool(let b): out += b ? "true" : "false"
        case .null, .undefined: out += "null"
        case .simple(let v): out += String(v)
        case .half(let f), .float(let f): out += f.isFinite ? "\(f)" : "null"
        case .double(let d): out += d.isFinite ? "\(d)" : "null"
        }
    }
}
