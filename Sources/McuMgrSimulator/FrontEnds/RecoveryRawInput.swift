import McuMgrCore

/// How MCUboot's serial recovery takes raw (unencoded) SMP packets from its UART (boot_serial.c
/// `boot_serial_read_console` and `boot_serial_input_raw`, Zephyr's serial_adapter.c), for a front end
/// serving a device in serial recovery with raw framing.
///
/// - Bytes are accumulated; every whole packet at the front (its length from the SMP header) is handed
///   on, and what follows is kept for the next one.
/// - A header whose operation is not read (0) or write (2), or whose packet would not fit the receive
///   buffer (`MCUBOOT_SERIAL_MAX_RECEIVE_SIZE` + 1), discards everything buffered: the raw stream has no
///   framing to resynchronise on.
/// - A partial packet with no new byte for `inputTimeout` (`BOOT_SERIAL_RAW_PROTOCOL_INPUT_TIMEOUT_MS`,
///   3 s by default) is discarded.
/// - While the bootloader is busy (erasing flash), the UART interrupt stores what arrives in the serial
///   adapter's free line buffers and drops each byte it reads when none is free: only `busyCapacity`
///   bytes survive a busy spell. A request sent then (a resend during an erase) reaches the bootloader
///   cut short, and the next request's bytes complete it: an undecodable packet, answered `rc 3`.
struct RecoveryRawInput {
    /// `MCUBOOT_SERIAL_MAX_RECEIVE_SIZE` + 1 (`in_buf`).
    let maximumPacketSize: Int
    let inputTimeout: Duration
    /// Bytes kept while busy; nil keeps all.
    let busyCapacity: Int?
    private var buffer: [UInt8] = []
    private var lastInput: SMPInstant?
    /// The busy spell the count below belongs to, and bytes kept in it.
    private var busySpell: SMPInstant?
    private var keptWhileBusy = 0
    /// Bytes dropped while busy, in all.
    private(set) var droppedWhileBusy = 0

    init(bufferSize: Int, inputTimeout: Duration = .seconds(3), busyCapacity: Int?) {
        maximumPacketSize = bufferSize + 1
        self.inputTimeout = inputTimeout
        self.busyCapacity = busyCapacity
    }

    /// Takes bytes that arrived at `now` while the bootloader is busy until `busyUntil` (if later); returns
    /// the whole packets the bootloader handles.
    mutating func receive(_ bytes: [UInt8], now: SMPInstant, busyUntil: SMPInstant?) -> [[UInt8]] {
        var bytes = bytes
        if let busyUntil, now < busyUntil, let capacity = busyCapacity {
            if busySpell != busyUntil {
                busySpell = busyUntil
                keptWhileBusy = 0
            }
            let keep = max(0, min(bytes.count, capacity - keptWhileBusy))
            droppedWhileBusy += bytes.count - keep
            keptWhileBusy += keep
            bytes = Array(bytes.prefix(keep))
        }
        if let last = lastInput, !buffer.isEmpty, now - last >= inputTimeout { buffer.removeAll() }
        guard !bytes.isEmpty else { return [] }
        lastInput = now
        buffer += bytes
        var packets: [[UInt8]] = []
        while buffer.count >= SMPHeader.size {
            let operation = buffer[0] & 0b111
            let size = SMPHeader.size + (Int(buffer[2]) << 8 | Int(buffer[3]))
            guard operation == 0 || operation == 2, size <= maximumPacketSize else {
                buffer.removeAll()
                break
            }
            guard buffer.count >= size else { break }
            packets.append(Array(buffer[..<size]))
            buffer.removeFirst(size)
        }
        return packets
    }
}
