import CDBus

/// Conversions between `DBusMessage` and libdbus messages. libdbus aborts the process on arguments it
/// considers invalid (its "check failed" warnings are fatal by default), so everything is validated
/// here first and reported as a `DBusError` instead.
enum DBusMarshal {
    // MARK: Names

    /// Interface and error names: two or more dot-separated elements of `[A-Za-z_][A-Za-z0-9_]*`.
    static func isValidInterfaceName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255 else { return false }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard elements.count >= 2 else { return false }
        return elements.allSatisfy { isValidElement($0, allowDash: false, allowLeadingDigit: false) }
    }

    static func isValidMemberName(_ name: String) -> Bool {
        name.utf8.count <= 255 && isValidElement(Substring(name), allowDash: false, allowLeadingDigit: false)
    }

    /// Unique (`:1.42`) or well-known (`org.bluez`) bus names.
    static func isValidBusName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255 else { return false }
        if name.hasPrefix(":") {
            let elements = name.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
            return elements.count >= 2 && elements.allSatisfy { isValidElement($0, allowDash: true, allowLeadingDigit: true) }
        }
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        return elements.count >= 2 && elements.allSatisfy { isValidElement($0, allowDash: true, allowLeadingDigit: false) }
    }

    private static func isValidElement(_ element: Substring, allowDash: Bool, allowLeadingDigit: Bool) -> Bool {
        guard let first = element.unicodeScalars.first else { return false }
        if !allowLeadingDigit, ("0"..."9").contains(first) { return false }
        return element.unicodeScalars.allSatisfy { s in
            switch s {
            case "A"..."Z", "a"..."z", "0"..."9", "_": return true
            case "-": return allowDash
            default: return false
            }
        }
    }

    // MARK: Signatures

    static let basicTypeCodes: Set<Character> = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h"]

    /// Whether `signature` is exactly one complete type.
    static func isSingleCompleteType(_ signature: String) -> Bool {
        let chars = Array(signature)
        guard let end = completeTypeEnd(chars, 0, depth: 0) else { return false }
        return end == chars.count
    }

    /// The index after the complete type starting at `i`, nil if there is none.
    private static func completeTypeEnd(_ s: [Character], _ i: Int, depth: Int) -> Int? {
        guard i < s.count, depth < 32 else { return nil }
        let c = s[i]
        if basicTypeCodes.contains(c) || c == "v" { return i + 1 }
        switch c {
        case "a":
            if i + 1 < s.count, s[i + 1] == "{" {
                guard i + 2 < s.count, basicTypeCodes.contains(s[i + 2]),
                    let valueEnd = completeTypeEnd(s, i + 3, depth: depth + 1),
                    valueEnd < s.count, s[valueEnd] == "}"
                else { return nil }
                return valueEnd + 1
            }
            return completeTypeEnd(s, i + 1, depth: depth + 1)
        case "(":
            var j = i + 1
            guard j < s.count, s[j] != ")" else { return nil }
            while j < s.count, s[j] != ")" {
                guard let next = completeTypeEnd(s, j, depth: depth + 1) else { return nil }
                j = next
            }
            return j < s.count ? j + 1 : nil
        default:
            return nil
        }
    }

    /// Checks a value before it goes to libdbus.
    static func validate(_ value: DBusValue) throws {
        func fail(_ why: String) -> DBusError { DBusError(name: DBusError.invalidArgs, message: why) }
        switch value {
        case .string(let s):
            guard !s.utf8.contains(0) else { throw fail("strings cannot contain NUL") }
        case .signature(let s):
            guard s.isEmpty || Self.isSignatureList(s) else { throw fail("invalid signature \"\(s)\"") }
        case .unixFD(let fd):
            guard fd.rawValue >= 0 else { throw fail("file descriptor already taken or closed") }
        case .array(let element, let items):
            guard isSingleCompleteType(element) else {
                throw fail("invalid array element signature \"\(element)\"")
            }
            guard !element.hasPrefix("{") else { throw fail("dictionary entries need .dictionary") }
            for item in items {
                guard item.signature == element else {
                    throw fail("array of \(element) holds a \(item.signature)")
                }
                try validate(item)
            }
        case .dictionary(let key, let valueSignature, let entries):
            guard key.count == 1, basicTypeCodes.contains(key.first!), isSingleCompleteType(valueSignature) else {
                throw fail("invalid dictionary signature a{\(key)\(valueSignature)}")
            }
            for entry in entries {
                guard entry.key.signature == key, entry.value.signature == valueSignature else {
                    throw fail("dictionary a{\(key)\(valueSignature)} holds \(entry.key.signature) -> \(entry.value.signature)")
                }
                try validate(entry.key)
                try validate(entry.value)
            }
        case .structure(let members):
            guard !members.isEmpty else { throw fail("empty structures are not allowed") }
            for member in members { try validate(member) }
        case .variant(let inner):
            try validate(inner)
        default:
            break
        }
    }

    private static func isSignatureList(_ s: String) -> Bool {
        let chars = Array(s)
        var i = 0
        while i < chars.count {
            guard let next = completeTypeEnd(chars, i, depth: 0) else { return false }
            i = next
        }
        return chars.count <= 255
    }

    // MARK: Building libdbus messages

    /// A new libdbus message (+1 reference) for `message`.
    /// - Throws: `DBusError` (invalid arguments) before libdbus sees anything wrong.
    static func makeRaw(_ message: DBusMessage, replyTo call: OpaquePointer? = nil) throws -> OpaquePointer {
        func fail(_ why: String) -> DBusError { DBusError(name: DBusError.invalidArgs, message: why) }
        if let destination = message.destination, !isValidBusName(destination) {
            throw fail("invalid bus name \"\(destination)\"")
        }
        if let interface = message.interface, !isValidInterfaceName(interface) {
            throw fail("invalid interface name \"\(interface)\"")
        }
        if let member = message.member, !isValidMemberName(member) {
            throw fail("invalid member name \"\(member)\"")
        }
        for value in message.body { try validate(value) }

        let raw: OpaquePointer?
        switch message.kind {
        case .methodCall:
            guard let path = message.path, let member = message.member else { throw fail("a method call needs a path and a member") }
            raw = dbus_message_new_method_call(message.destination, path.rawValue, message.interface, member)
        case .signal:
            guard let path = message.path, let interface = message.interface, let member = message.member else {
                throw fail("a signal needs a path, an interface and a member")
            }
            raw = dbus_message_new_signal(path.rawValue, interface, member)
        case .methodReturn:
            guard let call else { throw fail("a method return needs the call") }
            raw = dbus_message_new_method_return(call)
        case .error:
            guard let call else { throw fail("an error needs the call") }
            let name = message.errorName ?? DBusError.failed
            guard isValidInterfaceName(name) else { throw fail("invalid error name \"\(name)\"") }
            let text = message.body.first?.string ?? ""
            raw = dbus_message_new_error(call, name, text.isEmpty ? nil : text)
        }
        guard let raw else { throw DBusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "libdbus could not allocate a message") }
        if message.kind == .signal, let destination = message.destination {
            _ = dbus_message_set_destination(raw, destination)
        }
        if message.noReplyExpected { dbus_message_set_no_reply(raw, 1) }
        if message.kind != .error {
            var iter = DBusMessageIter()
            dbus_message_iter_init_append(raw, &iter)
            for value in message.body {
                guard append(value, to: &iter) else {
                    dbus_message_unref(raw)
                    throw DBusError(name: "org.freedesktop.DBus.Error.NoMemory", message: "libdbus could not append an argument")
                }
            }
        }
        return raw
    }

    private static func appendBasic<T>(_ iter: inout DBusMessageIter, _ type: Int32, _ value: T) -> Bool {
        var v = value
        return withUnsafePointer(to: &v) { dbus_message_iter_append_basic(&iter, type, $0) != 0 }
    }

    private static func appendString(_ iter: inout DBusMessageIter, _ type: Int32, _ text: String) -> Bool {
        text.withCString { cString in
            var pointer: UnsafePointer<CChar>? = cString
            return dbus_message_iter_append_basic(&iter, type, &pointer) != 0
        }
    }

    private static func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(&iter, CDBUS_TYPE_BYTE, v)
        case .boolean(let v): return appendBasic(&iter, CDBUS_TYPE_BOOLEAN, dbus_bool_t(v ? 1 : 0))
        case .int16(let v): return appendBasic(&iter, CDBUS_TYPE_INT16, v)
        case .uint16(let v): return appendBasic(&iter, CDBUS_TYPE_UINT16, v)
        case .int32(let v): return appendBasic(&iter, CDBUS_TYPE_INT32, v)
        case .uint32(let v): return appendBasic(&iter, CDBUS_TYPE_UINT32, v)
        case .int64(let v): return appendBasic(&iter, CDBUS_TYPE_INT64, v)
        case .uint64(let v): return appendBasic(&iter, CDBUS_TYPE_UINT64, v)
        case .double(let v): return appendBasic(&iter, CDBUS_TYPE_DOUBLE, v)
        case .string(let v): return appendString(&iter, CDBUS_TYPE_STRING, v)
        case .objectPath(let v): return appendString(&iter, CDBUS_TYPE_OBJECT_PATH, v.rawValue)
        case .signature(let v): return appendString(&iter, CDBUS_TYPE_SIGNATURE, v)
        case .unixFD(let fd): return appendBasic(&iter, CDBUS_TYPE_UNIX_FD, Int32(fd.rawValue))
        case .bytes(let bytes):
            return container(&iter, CDBUS_TYPE_ARRAY, "y") { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    var base: UnsafePointer<UInt8>? = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                    return dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, &base, Int32(buffer.count)) != 0
                }
            }
        case .array(let element, let items):
            return container(&iter, CDBUS_TYPE_ARRAY, element) { sub in
                items.allSatisfy { append($0, to: &sub) }
            }
        case .dictionary(let key, let valueSignature, let entries):
            return container(&iter, CDBUS_TYPE_ARRAY, "{\(key)\(valueSignature)}") { sub in
                entries.allSatisfy { entry in
                    container(&sub, CDBUS_TYPE_DICT_ENTRY, nil) { pair in
                        append(entry.key, to: &pair) && append(entry.value, to: &pair)
                    }
                }
            }
        case .structure(let members):
            return container(&iter, CDBUS_TYPE_STRUCT, nil) { sub in
                members.allSatisfy { append($0, to: &sub) }
            }
        case .variant(let inner):
            return container(&iter, CDBUS_TYPE_VARIANT, inner.signature) { sub in append(inner, to: &sub) }
        }
    }

    private static func container(
        _ iter: inout DBusMessageIter, _ type: Int32, _ signature: String?, _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) != 0 }
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    // MARK: Reading libdbus messages

    /// The Swift form of a received libdbus message.
    static func decode(_ raw: OpaquePointer) -> DBusMessage {
        let kind: DBusMessage.Kind
        switch dbus_message_get_type(raw) {
        case CDBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case CDBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case CDBUS_MESSAGE_TYPE_ERROR: kind = .error
        default: kind = .signal
        }
        var message = DBusMessage(kind: kind)
        message.serial = dbus_message_get_serial(raw)
        message.replySerial = dbus_message_get_reply_serial(raw)
        message.sender = dbus_message_get_sender(raw).map { String(cString: $0) }
        message.destination = dbus_message_get_destination(raw).map { String(cString: $0) }
        message.path = dbus_message_get_path(raw).flatMap { DBusObjectPath(validating: String(cString: $0)) }
        message.interface = dbus_message_get_interface(raw).map { String(cString: $0) }
        message.member = dbus_message_get_member(raw).map { String(cString: $0) }
        message.errorName = dbus_message_get_error_name(raw).map { String(cString: $0) }
        message.noReplyExpected = dbus_message_get_no_reply(raw) != 0
        var iter = DBusMessageIter()
        if dbus_message_iter_init(raw, &iter) != 0 {
            message.body = readAll(&iter)
        }
        return message
    }

    private static func readAll(_ iter: inout DBusMessageIter) -> [DBusValue] {
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != CDBUS_TYPE_INVALID {
            if let value = read(&iter) { values.append(value) }
            _ = dbus_message_iter_next(&iter)
        }
        return values
    }

    private static func basic<T>(_ iter: inout DBusMessageIter, _ initial: T) -> T {
        var v = initial
        withUnsafeMutablePointer(to: &v) { dbus_message_iter_get_basic(&iter, $0) }
        return v
    }

    private static func stringValue(_ iter: inout DBusMessageIter) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        return pointer.map { String(cString: $0) } ?? ""
    }

    private static func currentSignature(_ iter: inout DBusMessageIter) -> String {
        guard let raw = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(raw) }
        return String(cString: raw)
    }

    private static func read(_ iter: inout DBusMessageIter) -> DBusValue? {
        switch dbus_message_iter_get_arg_type(&iter) {
        case CDBUS_TYPE_BYTE: return .byte(basic(&iter, UInt8(0)))
        case CDBUS_TYPE_BOOLEAN: return .boolean(basic(&iter, dbus_bool_t(0)) != 0)
        case CDBUS_TYPE_INT16: return .int16(basic(&iter, Int16(0)))
        case CDBUS_TYPE_UINT16: return .uint16(basic(&iter, UInt16(0)))
        case CDBUS_TYPE_INT32: return .int32(basic(&iter, Int32(0)))
        case CDBUS_TYPE_UINT32: return .uint32(basic(&iter, UInt32(0)))
        case CDBUS_TYPE_INT64: return .int64(basic(&iter, Int64(0)))
        case CDBUS_TYPE_UINT64: return .uint64(basic(&iter, UInt64(0)))
        case CDBUS_TYPE_DOUBLE: return .double(basic(&iter, Double(0)))
        case CDBUS_TYPE_STRING: return .string(stringValue(&iter))
        case CDBUS_TYPE_OBJECT_PATH: return .objectPath(DBusObjectPath(validating: stringValue(&iter)) ?? .root)
        case CDBUS_TYPE_SIGNATURE: return .signature(stringValue(&iter))
        case CDBUS_TYPE_UNIX_FD:
            // libdbus hands out a duplicate that the reader owns.
            return .unixFD(DBusUnixFD(owning: basic(&iter, Int32(-1))))
        case CDBUS_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return read(&sub).map(DBusValue.variant)
        case CDBUS_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .structure(readAll(&sub))
        case CDBUS_TYPE_ARRAY:
            let signature = currentSignature(&iter)
            let element = String(signature.dropFirst())
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            if element == "y" {
                var pointer: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                if dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_BYTE {
                    dbus_message_iter_get_fixed_array(&sub, &pointer, &count)
                }
                guard let pointer, count > 0 else { return .bytes([]) }
                return .bytes(Array(UnsafeBufferPointer(start: pointer, count: Int(count))))
            }
            if element.hasPrefix("{") {
                let inner = Array(element.dropFirst().dropLast())
                let key = String(inner.first ?? "s")
                let value = String(inner.dropFirst())
                var entries: [DBusDictionaryEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_DICT_ENTRY {
                    var pair = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &pair)
                    let items = readAll(&pair)
                    if items.count == 2 { entries.append(DBusDictionaryEntry(items[0], items[1])) }
                    _ = dbus_message_iter_next(&sub)
                }
                return .dictionary(key: key, value: value, entries)
            }
            return .array(element: element, readAll(&sub))
        default:
            return nil
        }
    }
}
