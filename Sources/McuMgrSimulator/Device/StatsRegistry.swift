/// Statistics groups with counters that move as the device runs and answers requests.
struct StatsRegistry: Sendable {
    private(set) var requests: UInt64 = 0
    private(set) var responses: UInt64 = 0
    private(set) var rxBytes: UInt64 = 0
    private(set) var txBytes: UInt64 = 0

    /// Group names, in the order the list command reports them.
    static let groupNames = ["smp_svr_stats", "smp", "ble"]

    mutating func count(requestBytes: Int, responseBytes: Int) {
        requests &+= 1
        responses &+= 1
        rxBytes &+= UInt64(requestBytes)
        txBytes &+= UInt64(responseBytes)
    }

    mutating func reset() { self = StatsRegistry() }

    /// The fields of a group at the given uptime (ms), in order; nil for an unknown group.
    func fields(of group: String, uptimeMilliseconds: UInt64) -> [(String, UInt64)]? {
        switch group {
        case "smp_svr_stats":
            // The smp_svr sample's counter, incremented every second.
            return [("ticks", uptimeMilliseconds / 1000)]
        case "smp":
            return [("requests", requests), ("responses", responses)]
        case "ble":
            return [
                ("conn", 1), ("disc", 0), ("rx_bytes", rxBytes), ("tx_bytes", txBytes),
                ("adv_events", uptimeMilliseconds / 100),
            ]
        case "flash_sim_thresholds":
            // Zephyr's flash simulator: thresholds that make it fail on purpose, all off.
            return [("max_write_calls", 0), ("max_erase_calls", 0), ("max_len", 0)]
        case "flash_sim_stats":
            // Zephyr's flash simulator: call counters plus one erase counter per flash page (hundreds of
            // fields: more than a 1024-byte buffer holds, so reading it is EMSGSIZE on the mps2 app).
            return [
                ("bytes_read", 0), ("bytes_written", 0), ("double_writes", 0), ("flash_read_calls", 0),
                ("flash_read_time_us", 0), ("flash_write_calls", 0), ("flash_write_time_us", 0),
                ("flash_erase_calls", 0), ("flash_erase_time_us", 0),
            ] + (0..<256).map { ("erase_cycles_unit\($0)", 0) }
        default:
            return nil
        }
    }
}
