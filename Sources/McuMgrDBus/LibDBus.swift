// libdbus-1, loaded when first used: `smp` links it no more, so that the commands that never touch
// D-Bus (all but the Bluetooth LE ones) do not load it and the eight libraries it pulls in (libsystemd,
// libgcrypt, liblzma, libzstd, liblz4, libcap, libgpg-error) at every start (0.5 ms of the process's
// ~5 ms measured). The functions below shadow CDBus's of the same names, so the code calls them as before;
// CDBus still gives the types and constants. Generated from `swift-synthesize-interface -module-name CDBus`
// for the functions this module calls.
#if canImport(Glibc)
import Glibc
#endif
import CDBus
import McuManager

/// libdbus-1's functions, looked up in `libdbus-1.so.3` on first use.
struct LibDBus: Sendable {
    /// The library's file name (its soname).
    static let soname = "libdbus-1.so.3"

    /// The functions, or why the library could not be loaded.
    static let loaded: Result<LibDBus, McuMgrError> = Result { try LibDBus() }.mapError {
        $0 as? McuMgrError ?? McuMgrError(.transport, "\($0)")
    }

    /// The functions; only after `load()` succeeded (every connection checks it before it opens).
    static var functions: LibDBus {
        switch loaded {
        case .success(let functions): return functions
        case .failure(let error): fatalError(error.message)
        }
    }

    /// Loads the library.
    /// - Throws: `McuMgrError` of kind `.transport` naming the missing library and its package.
    static func load() throws { _ = try loaded.get() }

    let dbus_bus_get_unique_name: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_bus_register: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t
    let dbus_connection_can_send_type: @convention(c) (OpaquePointer?, Int32) -> dbus_bool_t
    let dbus_connection_close: @convention(c) (OpaquePointer?) -> Void
    let dbus_connection_flush: @convention(c) (OpaquePointer?) -> Void
    let dbus_connection_get_is_connected: @convention(c) (OpaquePointer?) -> dbus_bool_t
    let dbus_connection_get_unix_fd: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> dbus_bool_t
    let dbus_connection_has_messages_to_send: @convention(c) (OpaquePointer?) -> dbus_bool_t
    let dbus_connection_open_private: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> OpaquePointer?
    let dbus_connection_pop_message: @convention(c) (OpaquePointer?) -> OpaquePointer?
    let dbus_connection_read_write: @convention(c) (OpaquePointer?, Int32) -> dbus_bool_t
    let dbus_connection_send: @convention(c) (OpaquePointer?, OpaquePointer?, UnsafeMutablePointer<dbus_uint32_t>?) -> dbus_bool_t
    let dbus_connection_set_exit_on_disconnect: @convention(c) (OpaquePointer?, dbus_bool_t) -> Void
    let dbus_connection_unref: @convention(c) (OpaquePointer?) -> Void
    let dbus_error_free: @convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> Void
    let dbus_error_init: @convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> Void
    let dbus_error_is_set: @convention(c) (UnsafePointer<CDBus.DBusError>?) -> dbus_bool_t
    let dbus_free: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let dbus_message_get_destination: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_error_name: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_interface: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_member: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_no_reply: @convention(c) (OpaquePointer?) -> dbus_bool_t
    let dbus_message_get_path: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_reply_serial: @convention(c) (OpaquePointer?) -> dbus_uint32_t
    let dbus_message_get_sender: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?
    let dbus_message_get_serial: @convention(c) (OpaquePointer?) -> dbus_uint32_t
    /// For the fuzz target (Tests/Fuzz/DBus), which parses wire bytes as libdbus does.
    let dbus_message_demarshal: @convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<CDBus.DBusError>?) -> OpaquePointer?
    let dbus_message_get_type: @convention(c) (OpaquePointer?) -> Int32
    let dbus_message_iter_abandon_container: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void
    let dbus_message_iter_append_basic: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafeRawPointer?) -> dbus_bool_t
    let dbus_message_iter_append_fixed_array: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafeRawPointer?, Int32) -> dbus_bool_t
    let dbus_message_iter_close_container: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t
    let dbus_message_iter_get_arg_type: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Int32
    let dbus_message_iter_get_basic: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutableRawPointer?) -> Void
    let dbus_message_iter_get_fixed_array: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> Void
    let dbus_message_iter_get_signature: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> UnsafeMutablePointer<CChar>?
    let dbus_message_iter_init: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t
    let dbus_message_iter_init_append: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void
    let dbus_message_iter_next: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t
    let dbus_message_iter_open_container: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t
    let dbus_message_iter_recurse: @convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void
    let dbus_message_new_error: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?
    let dbus_message_new_method_call: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?
    let dbus_message_new_method_return: @convention(c) (OpaquePointer?) -> OpaquePointer?
    let dbus_message_new_signal: @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?
    let dbus_message_set_destination: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> dbus_bool_t
    let dbus_message_set_no_reply: @convention(c) (OpaquePointer?, dbus_bool_t) -> Void
    let dbus_message_unref: @convention(c) (OpaquePointer?) -> Void
    let dbus_message_ref: @convention(c) (OpaquePointer?) -> OpaquePointer?
    let dbus_threads_init_default: @convention(c) () -> dbus_bool_t
    let dbus_try_get_local_machine_id: @convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> UnsafeMutablePointer<CChar>?

    private init() throws {
        guard let handle = dlopen(Self.soname, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            throw McuMgrError(
                .transport,
                "cannot load \(Self.soname) (\(reason)); Bluetooth LE goes through D-Bus: install libdbus-1-3 (Debian, Ubuntu) or dbus-libs (Fedora)")
        }
        func symbol(_ name: String) throws -> UnsafeMutableRawPointer {
            guard let pointer = dlsym(handle, name) else {
                throw McuMgrError(.transport, "\(Self.soname) has no \(name): it is too old")
            }
            return pointer
        }
        dbus_bus_get_unique_name = unsafeBitCast(try symbol("dbus_bus_get_unique_name"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_bus_register = unsafeBitCast(try symbol("dbus_bus_register"), to: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusError>?) -> dbus_bool_t).self)
        dbus_connection_can_send_type = unsafeBitCast(try symbol("dbus_connection_can_send_type"), to: (@convention(c) (OpaquePointer?, Int32) -> dbus_bool_t).self)
        dbus_connection_close = unsafeBitCast(try symbol("dbus_connection_close"), to: (@convention(c) (OpaquePointer?) -> Void).self)
        dbus_connection_flush = unsafeBitCast(try symbol("dbus_connection_flush"), to: (@convention(c) (OpaquePointer?) -> Void).self)
        dbus_connection_get_is_connected = unsafeBitCast(try symbol("dbus_connection_get_is_connected"), to: (@convention(c) (OpaquePointer?) -> dbus_bool_t).self)
        dbus_connection_get_unix_fd = unsafeBitCast(try symbol("dbus_connection_get_unix_fd"), to: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> dbus_bool_t).self)
        dbus_connection_has_messages_to_send = unsafeBitCast(try symbol("dbus_connection_has_messages_to_send"), to: (@convention(c) (OpaquePointer?) -> dbus_bool_t).self)
        dbus_connection_open_private = unsafeBitCast(try symbol("dbus_connection_open_private"), to: (@convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusError>?) -> OpaquePointer?).self)
        dbus_connection_pop_message = unsafeBitCast(try symbol("dbus_connection_pop_message"), to: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self)
        dbus_connection_read_write = unsafeBitCast(try symbol("dbus_connection_read_write"), to: (@convention(c) (OpaquePointer?, Int32) -> dbus_bool_t).self)
        dbus_connection_send = unsafeBitCast(try symbol("dbus_connection_send"), to: (@convention(c) (OpaquePointer?, OpaquePointer?, UnsafeMutablePointer<dbus_uint32_t>?) -> dbus_bool_t).self)
        dbus_connection_set_exit_on_disconnect = unsafeBitCast(try symbol("dbus_connection_set_exit_on_disconnect"), to: (@convention(c) (OpaquePointer?, dbus_bool_t) -> Void).self)
        dbus_connection_unref = unsafeBitCast(try symbol("dbus_connection_unref"), to: (@convention(c) (OpaquePointer?) -> Void).self)
        dbus_error_free = unsafeBitCast(try symbol("dbus_error_free"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> Void).self)
        dbus_error_init = unsafeBitCast(try symbol("dbus_error_init"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> Void).self)
        dbus_error_is_set = unsafeBitCast(try symbol("dbus_error_is_set"), to: (@convention(c) (UnsafePointer<CDBus.DBusError>?) -> dbus_bool_t).self)
        dbus_free = unsafeBitCast(try symbol("dbus_free"), to: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self)
        dbus_message_get_destination = unsafeBitCast(try symbol("dbus_message_get_destination"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_error_name = unsafeBitCast(try symbol("dbus_message_get_error_name"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_interface = unsafeBitCast(try symbol("dbus_message_get_interface"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_member = unsafeBitCast(try symbol("dbus_message_get_member"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_no_reply = unsafeBitCast(try symbol("dbus_message_get_no_reply"), to: (@convention(c) (OpaquePointer?) -> dbus_bool_t).self)
        dbus_message_get_path = unsafeBitCast(try symbol("dbus_message_get_path"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_reply_serial = unsafeBitCast(try symbol("dbus_message_get_reply_serial"), to: (@convention(c) (OpaquePointer?) -> dbus_uint32_t).self)
        dbus_message_get_sender = unsafeBitCast(try symbol("dbus_message_get_sender"), to: (@convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?).self)
        dbus_message_get_serial = unsafeBitCast(try symbol("dbus_message_get_serial"), to: (@convention(c) (OpaquePointer?) -> dbus_uint32_t).self)
        dbus_message_demarshal = unsafeBitCast(try symbol("dbus_message_demarshal"), to: (@convention(c) (UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<CDBus.DBusError>?) -> OpaquePointer?).self)
        dbus_message_get_type = unsafeBitCast(try symbol("dbus_message_get_type"), to: (@convention(c) (OpaquePointer?) -> Int32).self)
        dbus_message_iter_abandon_container = unsafeBitCast(try symbol("dbus_message_iter_abandon_container"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void).self)
        dbus_message_iter_append_basic = unsafeBitCast(try symbol("dbus_message_iter_append_basic"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafeRawPointer?) -> dbus_bool_t).self)
        dbus_message_iter_append_fixed_array = unsafeBitCast(try symbol("dbus_message_iter_append_fixed_array"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafeRawPointer?, Int32) -> dbus_bool_t).self)
        dbus_message_iter_close_container = unsafeBitCast(try symbol("dbus_message_iter_close_container"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t).self)
        dbus_message_iter_get_arg_type = unsafeBitCast(try symbol("dbus_message_iter_get_arg_type"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Int32).self)
        dbus_message_iter_get_basic = unsafeBitCast(try symbol("dbus_message_iter_get_basic"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutableRawPointer?) -> Void).self)
        dbus_message_iter_get_fixed_array = unsafeBitCast(try symbol("dbus_message_iter_get_fixed_array"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> Void).self)
        dbus_message_iter_get_signature = unsafeBitCast(try symbol("dbus_message_iter_get_signature"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> UnsafeMutablePointer<CChar>?).self)
        dbus_message_iter_init = unsafeBitCast(try symbol("dbus_message_iter_init"), to: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t).self)
        dbus_message_iter_init_append = unsafeBitCast(try symbol("dbus_message_iter_init_append"), to: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void).self)
        dbus_message_iter_next = unsafeBitCast(try symbol("dbus_message_iter_next"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t).self)
        dbus_message_iter_open_container = unsafeBitCast(try symbol("dbus_message_iter_open_container"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, Int32, UnsafePointer<CChar>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> dbus_bool_t).self)
        dbus_message_iter_recurse = unsafeBitCast(try symbol("dbus_message_iter_recurse"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusMessageIter>?, UnsafeMutablePointer<CDBus.DBusMessageIter>?) -> Void).self)
        dbus_message_new_error = unsafeBitCast(try symbol("dbus_message_new_error"), to: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?).self)
        dbus_message_new_method_call = unsafeBitCast(try symbol("dbus_message_new_method_call"), to: (@convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?).self)
        dbus_message_new_method_return = unsafeBitCast(try symbol("dbus_message_new_method_return"), to: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self)
        dbus_message_new_signal = unsafeBitCast(try symbol("dbus_message_new_signal"), to: (@convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> OpaquePointer?).self)
        dbus_message_set_destination = unsafeBitCast(try symbol("dbus_message_set_destination"), to: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> dbus_bool_t).self)
        dbus_message_set_no_reply = unsafeBitCast(try symbol("dbus_message_set_no_reply"), to: (@convention(c) (OpaquePointer?, dbus_bool_t) -> Void).self)
        dbus_message_unref = unsafeBitCast(try symbol("dbus_message_unref"), to: (@convention(c) (OpaquePointer?) -> Void).self)
        dbus_message_ref = unsafeBitCast(try symbol("dbus_message_ref"), to: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self)
        dbus_threads_init_default = unsafeBitCast(try symbol("dbus_threads_init_default"), to: (@convention(c) () -> dbus_bool_t).self)
        dbus_try_get_local_machine_id = unsafeBitCast(try symbol("dbus_try_get_local_machine_id"), to: (@convention(c) (UnsafeMutablePointer<CDBus.DBusError>?) -> UnsafeMutablePointer<CChar>?).self)
    }
}

// MARK: - The functions, under CDBus's names

func dbus_bus_get_unique_name(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_bus_get_unique_name(a0) }
func dbus_bus_register(_ a0: OpaquePointer!, _ a1: UnsafeMutablePointer<CDBus.DBusError>!) -> dbus_bool_t { LibDBus.functions.dbus_bus_register(a0, a1) }
func dbus_connection_can_send_type(_ a0: OpaquePointer!, _ a1: Int32) -> dbus_bool_t { LibDBus.functions.dbus_connection_can_send_type(a0, a1) }
func dbus_connection_close(_ a0: OpaquePointer!) { LibDBus.functions.dbus_connection_close(a0) }
func dbus_connection_flush(_ a0: OpaquePointer!) { LibDBus.functions.dbus_connection_flush(a0) }
func dbus_connection_get_is_connected(_ a0: OpaquePointer!) -> dbus_bool_t { LibDBus.functions.dbus_connection_get_is_connected(a0) }
func dbus_connection_get_unix_fd(_ a0: OpaquePointer!, _ a1: UnsafeMutablePointer<Int32>!) -> dbus_bool_t { LibDBus.functions.dbus_connection_get_unix_fd(a0, a1) }
func dbus_connection_has_messages_to_send(_ a0: OpaquePointer!) -> dbus_bool_t { LibDBus.functions.dbus_connection_has_messages_to_send(a0) }
func dbus_connection_open_private(_ a0: UnsafePointer<CChar>!, _ a1: UnsafeMutablePointer<CDBus.DBusError>!) -> OpaquePointer! { LibDBus.functions.dbus_connection_open_private(a0, a1) }
func dbus_connection_pop_message(_ a0: OpaquePointer!) -> OpaquePointer! { LibDBus.functions.dbus_connection_pop_message(a0) }
func dbus_connection_read_write(_ a0: OpaquePointer!, _ a1: Int32) -> dbus_bool_t { LibDBus.functions.dbus_connection_read_write(a0, a1) }
func dbus_connection_send(_ a0: OpaquePointer!, _ a1: OpaquePointer!, _ a2: UnsafeMutablePointer<dbus_uint32_t>!) -> dbus_bool_t { LibDBus.functions.dbus_connection_send(a0, a1, a2) }
func dbus_connection_set_exit_on_disconnect(_ a0: OpaquePointer!, _ a1: dbus_bool_t) { LibDBus.functions.dbus_connection_set_exit_on_disconnect(a0, a1) }
func dbus_connection_unref(_ a0: OpaquePointer!) { LibDBus.functions.dbus_connection_unref(a0) }
func dbus_error_free(_ a0: UnsafeMutablePointer<CDBus.DBusError>!) { LibDBus.functions.dbus_error_free(a0) }
func dbus_error_init(_ a0: UnsafeMutablePointer<CDBus.DBusError>!) { LibDBus.functions.dbus_error_init(a0) }
func dbus_error_is_set(_ a0: UnsafePointer<CDBus.DBusError>!) -> dbus_bool_t { LibDBus.functions.dbus_error_is_set(a0) }
func dbus_free(_ a0: UnsafeMutableRawPointer!) { LibDBus.functions.dbus_free(a0) }
func dbus_message_get_destination(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_destination(a0) }
func dbus_message_get_error_name(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_error_name(a0) }
func dbus_message_get_interface(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_interface(a0) }
func dbus_message_get_member(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_member(a0) }
func dbus_message_get_no_reply(_ a0: OpaquePointer!) -> dbus_bool_t { LibDBus.functions.dbus_message_get_no_reply(a0) }
func dbus_message_get_path(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_path(a0) }
func dbus_message_get_reply_serial(_ a0: OpaquePointer!) -> dbus_uint32_t { LibDBus.functions.dbus_message_get_reply_serial(a0) }
func dbus_message_get_sender(_ a0: OpaquePointer!) -> UnsafePointer<CChar>! { LibDBus.functions.dbus_message_get_sender(a0) }
func dbus_message_get_serial(_ a0: OpaquePointer!) -> dbus_uint32_t { LibDBus.functions.dbus_message_get_serial(a0) }
func dbus_message_demarshal(_ a0: UnsafePointer<CChar>!, _ a1: Int32, _ a2: UnsafeMutablePointer<CDBus.DBusError>!) -> OpaquePointer! { LibDBus.functions.dbus_message_demarshal(a0, a1, a2) }
func dbus_message_get_type(_ a0: OpaquePointer!) -> Int32 { LibDBus.functions.dbus_message_get_type(a0) }
func dbus_message_iter_abandon_container(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: UnsafeMutablePointer<CDBus.DBusMessageIter>!) { LibDBus.functions.dbus_message_iter_abandon_container(a0, a1) }
func dbus_message_iter_append_basic(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: Int32, _ a2: UnsafeRawPointer!) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_append_basic(a0, a1, a2) }
func dbus_message_iter_append_fixed_array(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: Int32, _ a2: UnsafeRawPointer!, _ a3: Int32) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_append_fixed_array(a0, a1, a2, a3) }
func dbus_message_iter_close_container(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_close_container(a0, a1) }
func dbus_message_iter_get_arg_type(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> Int32 { LibDBus.functions.dbus_message_iter_get_arg_type(a0) }
func dbus_message_iter_get_basic(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: UnsafeMutableRawPointer!) { LibDBus.functions.dbus_message_iter_get_basic(a0, a1) }
func dbus_message_iter_get_fixed_array(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: UnsafeMutableRawPointer!, _ a2: UnsafeMutablePointer<Int32>!) { LibDBus.functions.dbus_message_iter_get_fixed_array(a0, a1, a2) }
func dbus_message_iter_get_signature(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> UnsafeMutablePointer<CChar>! { LibDBus.functions.dbus_message_iter_get_signature(a0) }
func dbus_message_iter_init(_ a0: OpaquePointer!, _ a1: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_init(a0, a1) }
func dbus_message_iter_init_append(_ a0: OpaquePointer!, _ a1: UnsafeMutablePointer<CDBus.DBusMessageIter>!) { LibDBus.functions.dbus_message_iter_init_append(a0, a1) }
func dbus_message_iter_next(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_next(a0) }
func dbus_message_iter_open_container(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: Int32, _ a2: UnsafePointer<CChar>!, _ a3: UnsafeMutablePointer<CDBus.DBusMessageIter>!) -> dbus_bool_t { LibDBus.functions.dbus_message_iter_open_container(a0, a1, a2, a3) }
func dbus_message_iter_recurse(_ a0: UnsafeMutablePointer<CDBus.DBusMessageIter>!, _ a1: UnsafeMutablePointer<CDBus.DBusMessageIter>!) { LibDBus.functions.dbus_message_iter_recurse(a0, a1) }
func dbus_message_new_error(_ a0: OpaquePointer!, _ a1: UnsafePointer<CChar>!, _ a2: UnsafePointer<CChar>!) -> OpaquePointer! { LibDBus.functions.dbus_message_new_error(a0, a1, a2) }
func dbus_message_new_method_call(_ a0: UnsafePointer<CChar>!, _ a1: UnsafePointer<CChar>!, _ a2: UnsafePointer<CChar>!, _ a3: UnsafePointer<CChar>!) -> OpaquePointer! { LibDBus.functions.dbus_message_new_method_call(a0, a1, a2, a3) }
func dbus_message_new_method_return(_ a0: OpaquePointer!) -> OpaquePointer! { LibDBus.functions.dbus_message_new_method_return(a0) }
func dbus_message_new_signal(_ a0: UnsafePointer<CChar>!, _ a1: UnsafePointer<CChar>!, _ a2: UnsafePointer<CChar>!) -> OpaquePointer! { LibDBus.functions.dbus_message_new_signal(a0, a1, a2) }
func dbus_message_set_destination(_ a0: OpaquePointer!, _ a1: UnsafePointer<CChar>!) -> dbus_bool_t { LibDBus.functions.dbus_message_set_destination(a0, a1) }
func dbus_message_set_no_reply(_ a0: OpaquePointer!, _ a1: dbus_bool_t) { LibDBus.functions.dbus_message_set_no_reply(a0, a1) }
func dbus_message_unref(_ a0: OpaquePointer!) { LibDBus.functions.dbus_message_unref(a0) }
@discardableResult func dbus_message_ref(_ a0: OpaquePointer!) -> OpaquePointer! { LibDBus.functions.dbus_message_ref(a0) }
func dbus_threads_init_default() -> dbus_bool_t { LibDBus.functions.dbus_threads_init_default() }
func dbus_try_get_local_machine_id(_ a0: UnsafeMutablePointer<CDBus.DBusError>!) -> UnsafeMutablePointer<CChar>! { LibDBus.functions.dbus_try_get_local_machine_id(a0) }
