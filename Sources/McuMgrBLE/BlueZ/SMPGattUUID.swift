/// The SMP GATT service and characteristic (PROTOCOL.md §5.5; zephyr smp_bt.h), as BlueZ writes
/// UUIDs: 128-bit, lower case.
public enum SMPGattUUID {
    /// The SMP service.
    public static let service = "8d53dc1d-1db7-4cd3-868b-8a527460aa84"
    /// The SMP characteristic: requests are written to it (write without response), responses
    /// arrive as its notifications.
    public static let characteristic = "da2e7828-fbce-4e01-ae9e-261174997c48"

    /// Whether two UUID strings name the same UUID (BlueZ reports lower case; others may not).
    public static func matches(_ a: String, _ b: String) -> Bool {
        a.lowercased() == b.lowercased()
    }
}
