// libFuzzer target for the D-Bus layer's unmarshaller (SMP_FUZZ_TARGET=dbus), built by Scripts/fuzz.sh in
// one module with the McuMgrDBus sources. The input is one message in the D-Bus wire format, as
// BlueZ's answers and signals arrive: libdbus checks and parses it (`dbus_message_demarshal`, C, not
// instrumented), then the Swift side under test turns it into a `DBusMessage` (`DBusMarshal.decode`:
// header fields, every type of argument, nested containers). Properties: the values read pass the
// layer's own validation, and marshalling them again (`DBusMarshal.makeRaw`) and reading them back
// gives the same values.

import CDBus
import Glibc

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0, size < Int(Int32.max) else { return 0 }
    var error = CDBus.DBusError()
    dbus_error_init(&error)
    defer { dbus_error_free(&error) }
    let raw = data.withMemoryRebound(to: CChar.self, capacity: size) { dbus_message_demarshal($0, Int32(size), &error) }
    guard let raw else { return 0 }
    defer { dbus_message_unref(raw) }
    let message = DBusMarshal.decode(raw)
    fuzzRoundTrip(message)
    return 0
}

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition {
        printError("fuzz property failed: \(message())\n")
        abort()
    }
}

private func holdsDescriptor(_ value: DBusValue) -> Bool {
    switch value {
    case .unixFD: return true
    case .array(_, let items), .structure(let items): return items.contains(where: holdsDescriptor)
    case .dictionary(_, _, let entries): return entries.contains { holdsDescriptor($0.key) || holdsDescriptor($0.value) }
    case .variant(let inner): return holdsDescriptor(inner)
    default: return false
    }
}

private func fuzzRoundTrip(_ message: DBusMessage) {
    // Descriptors cannot travel without a connection; a message that names some is only read.
    guard !message.body.contains(where: holdsDescriptor) else { return }
    for value in message.body {
        do {
            try DBusMarshal.validate(value)
        } catch {
            require(false, "a value libdbus accepted fails validation: \(value): \(error)")
        }
    }
    let copy = DBusMessage(
        kind: .signal, path: DBusObjectPath(validating: "/fuzz"), interface: "org.example.Fuzz", member: "Echo",
        body: message.body)
    let raw: OpaquePointer
    do {
        raw = try DBusMarshal.makeRaw(copy)
    } catch {
        require(false, "values read from a message cannot be marshalled again: \(error)")
        return
    }
    defer { dbus_message_unref(raw) }
    let again = DBusMarshal.decode(raw)
    require(again.body.description == message.body.description,
        "values change on a round trip: \(message.body) became \(again.body)")
}

/// Writes a line to standard error (the `stderr` global is not concurrency-safe in Swift 6).
private func printError(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    _ = line.withCString { write(2, $0, strlen($0)) }
}
