#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A coding key for array positions and dynamic map keys.
struct _CBORKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    init(index: Int) {
        self.init(intValue: index)
    }

    static let `super` = _CBORKey(stringValue: "super")
}

extension CodingKey {
    /// True when the key stands for an integer (a dictionary `Int` key or an array index) rather than a name.
    var _cborIsNumeric: Bool {
        guard let i = intValue else { return false }
        return stringValue == String(i)
    }
}

/// A coding path as text: `images[0].hash`.
func _cborPathString(_ path: [any CodingKey]) -> String {
    var s = ""
    for key in path {
        if key._cborIsNumeric {
            s += "[\(key.intValue!)]"
        } else {
            if !s.isEmpty { s += "." }
            s += key.stringValue
        }
    }
    return s
}

extension CBOR {
    /// A short name of the item's kind, for error messages.
    var _kindName: String {
        switch self {
        case .unsigned: return "unsigned integer"
        case .negative: return "negative integer"
        case .bytes: return "byte string"
        case .text: return "text string"
        case .array: return "array"
        case .map: return "map"
        case .tagged(let tag, _): return "tag \(tag)"
        case .bool: return "boolean"
        case .null: return "null"
        case .undefined: return "undefined"
        case .simple(let v): return "simple value \(v)"
        case .half: return "half-precision float"
        case .float: return "single-precision float"
        case .double: return "double-precision float"
        }
    }

    /// The item with any tags removed.
    var _untagged: CBOR {
        var item = self
        while case .tagged(_, let inner) = item { item = inner }
        return item
    }
}
