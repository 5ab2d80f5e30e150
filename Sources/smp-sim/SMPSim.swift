import ArgumentParser
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrBLE
import McuMgrCore
import McuMgrSimulator
import NIOCore

/// `smp-sim`: a simulated SMP device served over a pty and/or UDP until signalled.
@main
struct SMPSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smp-sim",
        abstract: "A simulated SMP (mcumgr) device for tests, demos and test rigs.",
        discussion: """
            Serves every SMP group (OS, image with MCUboot slots, stats, settings, file system, shell,
            enumeration, basic, and the Mynewt log/crash/run groups) over a pseudo-terminal and/or UDP.
            Prints one line per front end when ready, then runs until SIGINT or SIGTERM.

            Many devices from one process (--count N): each device has its own state (image slots, file \
            system, settings, upload sessions, reboots; faults from stream I of the seed, so a failure \
            replays), and its own front ends: --udp HOST:PORT serves device I on PORT+I (port 0: N free \
            ports), --pty-link PATH serves device I at PATH-I (or at PATH with %d replaced by I), --pty opens \
            N ptys. Each ready line then ends with "device I", and a last line "devices N" follows them:
              smp-sim --count 64 --udp 127.0.0.1:0 --swap-time 2 >sim.out &
              # udp 127.0.0.1:40313 buffers 4 device 0
              # ...
              # udp 127.0.0.1:52071 buffers 4 device 63
              # devices 64
              grep '^udp ' sim.out | awk '{ print "udp:" $2 }' >devices.txt
              smp dfu --devices devices.txt app.bin

            Examples:
              smp-sim --pty-link /tmp/smp-tty                 # then: smp --device serial:/tmp/smp-tty os echo hi
              smp-sim --udp 127.0.0.1:1337                    # then: smp --device udp:127.0.0.1 image list
              smp-sim --pty-link /tmp/tty --baud 1000000      # emulate a 1 Mbaud UART
              smp-sim --udp 127.0.0.1:1337 --bootloader-mode direct-xip-revert --swap-time 2
              smp-sim --pty-link /tmp/tty --suit --reset-vanish
              smp-sim --ble hci1 --ble-mtu 247               # a BLE peripheral through BlueZ; then: smp --device ble:ADDRESS ...
              smp-sim --like native_sim_udp --udp 127.0.0.1:1337   # answers as ../shared/firmware's native_sim_udp.exe
              smp-sim --pty-link /tmp/tty --rx-lines 0 --buf-size 2048   # no line-buffer limits: speed tests
              smp-sim --udp 127.0.0.1:1337 --faults loss=0.1,dup=0.02,reorder=0.02,seed=7   # a lossy link that replays
              smp-sim --pty-link /tmp/tty --faults corrupt=1e-4,noise=0.05,reset-after=200000

            Faults (--faults KEY=VALUE,...; seeded: the same seed and traffic replay the same faults; every
            front end applies them, serial-only ones only on the pty):
            \(FaultProfile.keys.map { "  \($0.0 + String(repeating: " ", count: max(0, 20 - $0.0.count))) \($0.1)" }.joined(separator: "\n"))

            Defaults are Zephyr's smp_svr defaults, as the shared native_sim_serial build reports them: 4 SMP
            buffers of 384 bytes (os params), 2 serial receive lines of 128 bytes (a console line longer than
            128 bytes is dropped; lines beyond the free buffers are dropped until the device's next read of
            its console, every 20 ms, processes them, so a frame of 3 lines sent back to back, or a second
            frame sent right behind a 2-line frame, gets no answer), UDP requests that hold two buffers each
            until answered on the device's 10 ms tick
            (datagrams that find no free buffers are dropped), and a LittleFS of four 4 KiB blocks at /lfs1.
            """)

    @Option(help: ArgumentHelp("Serve over a new pty and make PATH a symlink to it (with --count: PATH-I, or PATH with %d replaced by the device's index I).", valueName: "path"))
    var ptyLink: String?

    @Option(
        help: ArgumentHelp(
            "Serve this many independent devices (1...\(Self.maximumCount)): device I on PORT+I of each --udp (port 0: a free port each), at PATH-I of --pty-link (or PATH's %d), on its own --pty.",
            valueName: "n"))
    var count: Int = 1

    @Flag(help: "Serve over a new pty (its path is printed); implied by --pty-link.")
    var pty = false

    @Option(help: ArgumentHelp("Serve over UDP at HOST:PORT ([::1]:1337 for IPv6; port 0 picks one). Repeatable.", valueName: "host:port"))
    var udp: [String] = []

    @Option(help: "Serial framing on the pty: console (Base64 lines, the default) or raw.")
    var framing: String = "console"

    @Option(help: "Longest console frame line the device sends, markers and newline included.")
    var lineLength: Int = 127

    @Option(help: ArgumentHelp("Emulate a serial link of this many bits per second on the pty (8N1).", valueName: "baud"))
    var baud: Int?

    @Option(help: ArgumentHelp("Delay every answer by this many milliseconds.", valueName: "ms"))
    var latency: Int = 0

    @Option(help: "The device's SMP buffer size (buf_size), header included (default 384, or the --like build's).")
    var bufSize: Int?

    @Option(help: "The device's number of SMP buffers (buf_count) (default 4, or the --like build's).")
    var bufCount: Int?

    @Option(help: ArgumentHelp("Bytes of each serial receive line buffer (CONFIG_UART_MCUMGR_RX_BUF_SIZE; default 128): longer console lines, marker and newline included, are dropped.", valueName: "bytes"))
    var rxLineSize: Int?

    @Option(help: ArgumentHelp("Serial receive line buffers (CONFIG_UART_MCUMGR_RX_BUF_COUNT; default 2); 0 = no line buffers (every line taken at once, for speed tests).", valueName: "count"))
    var rxLines: Int?

    @Option(help: ArgumentHelp("UDP receive: zephyr (default: a request holds two of the buf_count SMP buffers until it is answered on the device's 10 ms tick; datagrams that find none are dropped, so of requests sent back to back only every other one is answered on 2 buffers, as on native_sim_udp) or unlimited (every datagram answered at once).", valueName: "model"))
    var udpQueue: String = "zephyr"

    @Option(help: ArgumentHelp("LittleFS blocks of the file system at /lfs1 (default 4; two hold the root directory); 0 = unlimited.", valueName: "count"))
    var fsBlocks: Int = 4

    @Option(help: ArgumentHelp("LittleFS block size in bytes (default 4096).", valueName: "bytes"))
    var fsBlockSize: Int = 4096

    @Option(help: ArgumentHelp("Answer as one of the shared Zephyr 4.4.0 builds: native_sim_serial, native_sim_serial_fs, native_sim_udp, mps2_recovery (MCUboot serial recovery, no app), mps2_app (app under MCUboot RAM load) or qemu_cortex_m0 (buffers, line buffers, groups, slots, bootloader, CBOR encoding, empty file system). Other options override it.", valueName: "build"))
    var like: String?

    @Flag(help: "Behave like a server that predates SMP v2 (answers v1 only).")
    var v1Only = false

    @Flag(help: "Encode answers with indefinite-length maps, as non-canonical zcbor does.")
    var indefiniteMaps = false

    @Option(help: "Number of updatable images (1 = single image; 2 = app + net core).")
    var images: Int = 1

    @Option(
        help: ArgumentHelp(
            "MCUboot mode: swap-scratch (default, or the --like build's), swap-move, swap-offset (swap on reset, revert unless confirmed), overwrite (copy on reset, no revert), direct-xip (higher version boots, no test/confirm), direct-xip-revert, ram-load, firmware-loader (reset --boot-mode 1 runs the loader: OS reset/params/bootloader info, image and basic groups only; over --ble it advertises the name saved in fw_loader/adv_name, until the next reset brings the application back), single-app.",
            valueName: "mode"))
    var bootloaderMode: String?

    @Option(help: ArgumentHelp(
        "firmware-loader mode with --ble: the name the loader advertises when the application stored none in the setting fw_loader/adv_name (default: FW loader, as Nordic's fw_loader sample).",
        valueName: "name"))
    var loaderName: String?

    @Option(help: ArgumentHelp(
        "firmware-loader mode with --ble: serve the loader on this adapter (another address, as a loader with a Bluetooth identity of its own); default: the --ble adapter, under the loader's name.",
        valueName: "adapter"))
    var bleLoaderAdapter: String?

    @Flag(help: "Downgrade prevention: bootloader info reports \"no-downgrade\": true.")
    var noDowngrade = false

    @Flag(help: "Be a SUIT device (nRF54H): group 66 envelope, resource and cache uploads; rc in every answer.")
    var suit = false

    @Option(help: ArgumentHelp("Seconds (fractional) the device stays silent after a reset that swaps images or installs an update.", valueName: "seconds"))
    var swapTime: Double = 0

    @Option(help: ArgumentHelp("Seconds (fractional) the device takes to boot after every reset, before it answers or advertises again (default 0.05): a firmware loader or application that is slow to come back.", valueName: "seconds"))
    var bootTime: Double?

    @Option(help: ArgumentHelp("Milliseconds MCUboot's serial recovery spends erasing one flash sector before it answers the chunk that reaches it (default 376, as measured on MCUboot's raw serial recovery; 0: no erase delay).", valueName: "ms"))
    var recoveryEraseTime: Int?

    @Option(help: ArgumentHelp("Bytes in one flash sector that MCUboot's serial recovery erases as an upload reaches it (default 4096).", valueName: "bytes"))
    var recoveryEraseSector: Int?

    @Option(help: ArgumentHelp("Raw framing into serial recovery: bytes kept of what arrives while it erases (default 896: the serial adapter's 7 free 128-byte line buffers; the rest is dropped, as MCUboot's UART interrupt drops a byte it has no buffer for), or 'all'.", valueName: "bytes|all"))
    var recoveryBusyRx: String?

    @Flag(help: "A reset removes the pty (and its --pty-link) while the device reboots and creates a fresh one after, like USB CDC re-enumeration.")
    var resetVanish = false

    @Option(help: ArgumentHelp("Size of every image slot in bytes (default 483328 = 0x76000); larger uploads fail with IMG err 30.", valueName: "bytes"))
    var slotSize: Int?

    @Option(help: ArgumentHelp("Serve as a Bluetooth LE peripheral through BlueZ on this adapter (e.g. hci1): SMP GATT service, advertised with its UUID.", valueName: "adapter"))
    var ble: String?

    @Option(help: ArgumentHelp("ATT MTU of the BLE peripheral (23...517); notifications carry MTU - 3 bytes.", valueName: "mtu"))
    var bleMtu: Int = 247

    @Option(help: ArgumentHelp("The name the BLE peripheral advertises.", valueName: "name"))
    var bleName: String = "smp-sim"

    @Flag(help: "The BLE peripheral offers no AcquireWrite/AcquireNotify: writes and notifications go over D-Bus.")
    var bleNoAcquire = false

    @Flag(help: "The BLE peripheral takes every write as whole requests, as Zephyr without CONFIG_MCUMGR_TRANSPORT_BT_REASSEMBLY does: a request split over writes is answered with rc 9 (ECORRUPT).")
    var bleNoReassembly = false

    @Option(help: ArgumentHelp("What the BLE peripheral's SMP characteristic asks of the link, as Zephyr's CONFIG_MCUMGR_TRANSPORT_BT_PERM_RW / _RW_ENCRYPT / _RW_AUTHEN: open, encrypt (a paired, encrypted link) or authenticated (pairing with MITM protection, e.g. a passkey).", valueName: "security"))
    var bleSecurity: SMPGattPeripheral.Configuration.Security = .open

    @Option(help: ArgumentHelp("What the BLE peripheral can show and take in when pairing (its BlueZ agent's I/O capabilities): none (Just Works), display (shows a passkey, the central types it), display-yes-no (numeric comparison), keyboard (types the --ble-passkey), keyboard-display. Default: none with --ble-security encrypt, display with authenticated, no agent when open. Passkeys it shows are printed as `ble pairing ... passkey NNNNNN` lines.", valueName: "io"))
    var bleIo: BLEIOCapabilityOption?

    @Option(help: ArgumentHelp("The six-digit passkey the BLE peripheral types when pairing asks it for one (--ble-io keyboard).", valueName: "digits"))
    var blePasskey: UInt32?

    @Option(help: ArgumentHelp("The longest notification value the BLE peripheral sends (default: as much as the link carries, ATT MTU - 3).", valueName: "bytes"))
    var bleNotifySize: Int?

    @Option(help: ArgumentHelp("The BLE peripheral's SMP service: standard (the SMP characteristic alone, at handles BlueZ picks), smp-first or smp-second (beside a vendor characteristic that never answers, first or second, at fixed handles: two firmware builds whose service keeps its handles and UUID, so that a central that kept its copy of one layout's table would write to the wrong characteristic under the other, as after an upgrade).", valueName: "layout"))
    var bleLayout: SMPGattPeripheral.Configuration.Layout = .standard

    @Option(help: ArgumentHelp("The BLE link drops instead of every Nth answer going out (the device handled the request, keeps running and advertises again at once), as a central out of range does.", valueName: "n"))
    var bleDropEvery: Int?

    @Option(help: ArgumentHelp("Inject seeded link faults on every front end, e.g. loss=0.1,dup=0.02,reorder=0.02,corrupt=1e-4,noise=0.05,seed=7 (keys below).", valueName: "faults"))
    var faults: String?

    @Option(help: ArgumentHelp("Append one line per request the device receives to FILE, written before the request is answered: `read 0/6` or `write 8/0` (operation, group/command); with --count, prefixed by the device's index. For counting a client's requests.", valueName: "file"))
    var requestLog: String?

    @Flag(help: "Let --udp bind addresses other than loopback (127.0.0.0/8, ::1): the simulator answers anyone who can reach it.")
    var allowRemote = false

    /// The most devices one smp-sim serves (each takes up to three file descriptors: a pty's two and a socket).
    static let maximumCount = 1024

    /// The peripheral's pairing capabilities: --ble-io, else what --ble-security needs.
    var blePairing: BLEIOCapability? {
        if let bleIo { return bleIo.capability }
        switch bleSecurity {
        case .open: return nil
        case .encrypt: return .noInputNoOutput
        case .authenticated: return .displayOnly
        }
    }

    func validate() throws {
        if let blePasskey, blePasskey > 999_999 { throw ValidationError("--ble-passkey takes six digits (000000...999999)") }
        if ptyLink == nil, !pty, udp.isEmpty, ble == nil {
            throw ValidationError("give at least one front end: --pty, --pty-link PATH, --udp HOST:PORT or --ble ADAPTER")
        }
        guard (1...Self.maximumCount).contains(count) else { throw ValidationError("--count must be 1...\(Self.maximumCount)") }
        if count > 1, ble != nil {
            throw ValidationError("--ble serves one device (one advertised peripheral per adapter); use --count with --udp or --pty-link")
        }
        if let ptyLink, ptyLink.ranges(of: "%d").count > 1 {
            throw ValidationError("--pty-link \(ptyLink): use %d at most once (it becomes the device's index)")
        }
        guard (23...517).contains(bleMtu) else { throw ValidationError("--ble-mtu must be 23...517") }
        if let ble, ble.isEmpty { throw ValidationError("--ble needs an adapter name, e.g. hci1") }
        if bleLoaderAdapter != nil, ble == nil { throw ValidationError("--ble-loader-adapter goes with --ble") }
        if let bleLoaderAdapter, bleLoaderAdapter == ble { throw ValidationError("--ble-loader-adapter must be another adapter than --ble (leave it out to serve the loader on the same one)") }
        guard ["console", "raw"].contains(framing) else { throw ValidationError("--framing must be console or raw") }
        guard (8...4096).contains(lineLength) else { throw ValidationError("--line-length must be 8...4096") }
        if let bufSize, !(64...65535).contains(bufSize) { throw ValidationError("--buf-size must be 64...65535") }
        if let bufCount, !(1...64).contains(bufCount) { throw ValidationError("--buf-count must be 1...64") }
        if let rxLineSize, !(8...65535).contains(rxLineSize) { throw ValidationError("--rx-line-size must be 8...65535") }
        if let rxLines, !(0...64).contains(rxLines) { throw ValidationError("--rx-lines must be 0...64 (0 = no line buffers)") }
        guard fsBlocks == 0 || (3...1_000_000).contains(fsBlocks) else {
            throw ValidationError("--fs-blocks must be 0 (unlimited) or 3...1000000 (two blocks hold the root directory)")
        }
        guard (128...1_048_576).contains(fsBlockSize) else { throw ValidationError("--fs-block-size must be 128...1048576") }
        guard ["zephyr", "unlimited"].contains(udpQueue) else { throw ValidationError("--udp-queue must be zephyr or unlimited") }
        if let like, ZephyrBuild(rawValue: like) == nil {
            throw ValidationError("--like must be one of " + ZephyrBuild.allCases.map(\.rawValue).joined(separator: ", "))
        }
        guard (1...8).contains(images) else { throw ValidationError("--images must be 1...8") }
        if let baud, baud < 300 { throw ValidationError("--baud must be at least 300") }
        if let bootloaderMode, SimulatedBootloader.Mode(name: bootloaderMode) == nil {
            throw ValidationError(
                "--bootloader-mode must be one of " + SimulatedBootloader.Mode.names.joined(separator: ", "))
        }
        if let recoveryEraseTime, !(0...60_000).contains(recoveryEraseTime) {
            throw ValidationError("--recovery-erase-time must be 0...60000 milliseconds")
        }
        if let recoveryBusyRx, recoveryBusyRx != "all", (Int(recoveryBusyRx) ?? -1) < 0 {
            throw ValidationError("--recovery-busy-rx must be a byte count or 'all'")
        }
        if let recoveryEraseSector, recoveryEraseSector < 1 {
            throw ValidationError("--recovery-erase-sector must be at least 1 byte")
        }
        guard swapTime >= 0, swapTime <= 3600 else { throw ValidationError("--swap-time must be 0...3600 seconds") }
        if let bootTime, !(0...3600).contains(bootTime) { throw ValidationError("--boot-time must be 0...3600 seconds") }
        if resetVanish && ptyLink == nil && !pty { throw ValidationError("--reset-vanish needs --pty or --pty-link") }
        for endpoint in udp {
            let (host, port) = try Self.hostPort(endpoint)
            if port != 0, port + count - 1 > 65535 {
                throw ValidationError("--udp \(endpoint) with --count \(count) needs ports up to \(port + count - 1); start lower, or give port 0 (free ports)")
            }
            if !allowRemote, !Self.isLoopback(host) {
                throw ValidationError(
                    "--udp \(endpoint) is not a loopback address: smp-sim would answer (and let anyone upgrade or erase) from the network; use 127.0.0.1 or [::1], or add --allow-remote")
            }
        }
        if let faults {
            do { _ = try FaultProfile(parsing: faults) } catch { throw ValidationError("--faults: \(error)") }
        }
        if let slotSize, !(4096...(256 << 20)).contains(slotSize) { throw ValidationError("--slot-size must be 4096...268435456 bytes") }
    }

    /// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    static func hostPort(_ text: String) throws -> (String, Int) {
        let uri = try? McuMgrEndpoint.parse(text)
        guard let uri else { throw ValidationError("--udp \(text): use HOST:PORT, e.g. 127.0.0.1:1337 or [::1]:1337") }
        return uri
    }

    func run() async throws {
        let build = like.flatMap(ZephyrBuild.init(rawValue:))
        var configuration = build?.configuration ?? SimulatorConfiguration()
        configuration.bufferSize = bufSize ?? (build == nil ? 384 : configuration.bufferSize)
        configuration.bufferCount = bufCount ?? (build == nil ? 4 : configuration.bufferCount)
        configuration.fileSystemBlockCount = fsBlocks == 0 ? nil : fsBlocks
        configuration.fileSystemBlockSize = fsBlockSize
        configuration.v1Only = v1Only
        if indefiniteMaps { configuration.indefiniteLengthMaps = true }
        configuration.imageCount = images
        if let bootloaderMode {
            configuration.bootloader.mode = SimulatedBootloader.Mode(name: bootloaderMode)!
        }
        configuration.bootloader.noDowngrade = noDowngrade
        if let loaderName { configuration.bootloader.firmwareLoaderName = loaderName }
        if suit { configuration.suit = SimulatedSUITConfiguration() }
        configuration.swapTime = .milliseconds(Int64((swapTime * 1000).rounded()))
        if let bootTime { configuration.bootTime = .milliseconds(Int64((bootTime * 1000).rounded())) }
        if let slotSize { configuration.imageSlotSize = slotSize }
        if let recoveryEraseTime { configuration.bootloader.serialRecoveryEraseTime = .milliseconds(recoveryEraseTime) }
        if let recoveryEraseSector { configuration.bootloader.serialRecoveryEraseSectorSize = recoveryEraseSector }
        if let recoveryBusyRx { configuration.bootloader.serialRecoveryBusyReceiveLimit = Int(recoveryBusyRx) }
        let faultProfile = try faults.map { try FaultProfile(parsing: $0) } ?? FaultProfile()

        var stops: [@Sendable () async -> Void] = []
        let log = try requestLog.map { try RequestLog(path: $0) }
        do {
            for index in 0..<count {
                let device = SimulatedDevice(configuration: configuration)
                if let log {
                    let prefix = count > 1 ? "\(index) " : ""
                    device.setRequestObserver { log.append(prefix + $0.description) }
                }
                try await serve(device, index: index, build: build, faults: faultProfile, stops: &stops)
            }
        } catch {
            for stop in stops { await stop() }
            throw error
        }
        if count > 1 { print("devices \(count)") }
        if !faultProfile.isEmpty { print("faults \(faultProfile)" + (count > 1 ? " streams 0-\(count - 1)" : "")) }
        fflush(nil)
        await Signals.wait(for: [SIGINT, SIGTERM])
        for stop in stops { await stop() }
    }

    /// The --pty-link path of device `index`: PATH itself for one device, else PATH with %d replaced by the
    /// index, or PATH-index.
    func linkPath(index: Int) -> String? {
        guard let ptyLink else { return nil }
        if ptyLink.contains("%d") { return ptyLink.replacing("%d", with: String(index)) }
        return count == 1 ? ptyLink : "\(ptyLink)-\(index)"
    }

    /// Starts device `index`'s front ends and prints their ready lines; appends how to stop them.
    private func serve(
        _ device: SimulatedDevice, index: Int, build: ZephyrBuild?, faults faultProfile: FaultProfile,
        stops: inout [@Sendable () async -> Void]
    ) async throws {
        let configuration = device.configuration
        // With one device nothing changes (the UDP fault stream stays the port, as before); with many,
        // device I draws from stream I, whatever ports it got.
        let stream: UInt64? = count > 1 ? UInt64(index) : nil
        let suffix = count > 1 ? " device \(index)" : ""
        if pty || ptyLink != nil {
            let ptyLink = linkPath(index: index)
            let lineBuffers = build?.receiveLineBuffers
            let lineCount = rxLines ?? lineBuffers?.count ?? PtyFrontEnd.Configuration.zephyrReceiveLineCount
            let lineSize = rxLineSize ?? lineBuffers?.size ?? PtyFrontEnd.Configuration.zephyrReceiveLineSize
            let frontEnd = PtyFrontEnd(
                device: device,
                configuration: .init(
                    rawFraming: framing == "raw", lineLength: lineLength, baudRate: baud,
                    latency: .milliseconds(latency), linkPath: ptyLink, vanishOnReset: resetVanish,
                    receiveLineSize: lineSize, receiveLineCount: lineCount == 0 ? nil : lineCount,
                    onDrop: { message in
                        writeUnbuffered("<wrn> uart_mcumgr: \(message)\n", to: STDERR_FILENO)
                    }, faults: faultProfile, faultStream: stream ?? 0))
            let path = try await frontEnd.start()
            stops.append { await frontEnd.stop() }
            print(
                "pty \(path)" + (ptyLink.map { " link \($0)" } ?? "") + " framing \(framing)"
                    + (framing == "console" ? (lineCount == 0 ? " rx-lines unlimited" : " rx-lines \(lineCount)x\(lineSize)") : "")
                    + (baud.map { " baud \($0)" } ?? "") + (resetVanish ? " reset-vanish" : "") + suffix)
        }
        for endpoint in udp {
            let (host, firstPort) = try Self.hostPort(endpoint)
            let port = firstPort == 0 ? 0 : firstPort + index
            let frontEnd = UDPFrontEnd(
                device: device, host: host, port: port, latency: .milliseconds(latency),
                emulatesBuffers: udpQueue == "zephyr", faults: faultProfile, faultStream: stream)
            let address: SocketAddress
            do {
                address = try await frontEnd.start()
            } catch {
                throw SimStartError(
                    "--udp \(host):\(port)\(count > 1 ? " (device \(index))" : ""): cannot bind: \(error)"
                        + (count > 1 ? "; give port 0 for free ports, or a range that is free" : ""))
            }
            stops.append { await frontEnd.stop() }
            let shown = address.protocol == .inet6 ? "[\(address.ipAddress ?? host)]" : (address.ipAddress ?? host)
            print(
                "udp \(shown):\(address.port ?? port)" + (udpQueue == "zephyr" ? " buffers \(configuration.bufferCount)" : "")
                    + suffix)
        }
        if let ble {
            let frontEnd = BLEFrontEnd(
                device: device, adapter: ble, attMTU: bleMtu, name: bleName, acquire: !bleNoAcquire,
                reassembly: !bleNoReassembly, security: bleSecurity, notificationSize: bleNotifySize, dropLinkEvery: bleDropEvery,
                pairing: blePairing, passkey: blePasskey, layout: bleLayout,
                latency: .milliseconds(latency), faults: faultProfile, loaderAdapter: bleLoaderAdapter)
            let line = try await frontEnd.start()
            stops.append { await frontEnd.stop() }
            print(line)
        }
        // Ready lines of many devices reach a script as they come.
        if count > 1 { fflush(nil) }
    }
}

/// A front end that could not start, with what to do about it.
struct SimStartError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// HOST:PORT parsing for --udp.
enum McuMgrEndpoint {
    static func parse(_ text: String) throws -> (String, Int) {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[close...].hasPrefix("]:") else { throw ValidationError("bad endpoint") }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw ValidationError("bad endpoint") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { throw ValidationError("bad endpoint") }
        return (String(host), port)
    }
}

/// Waits for a signal without blocking a thread.
enum Signals {
    static func wait(for signals: [Int32]) async {
        let once = OnceFlag()
        var sources: [any DispatchSourceSignal] = []
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            for s in signals {
                signal(s, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: s, queue: .global())
                source.setEventHandler {
                    if once.fire() { continuation.resume() }
                }
                source.resume()
                sources.append(source)
            }
        }
        for source in sources { source.cancel() }
    }
}

/// True the first time only.
final class OnceFlag: @unchecked Sendable {
    private let lock = NIOLock()
    private var fired = false
    func fire() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if fired { return false }
        fired = true
        return true
    }
}


/// `--request-log`: one line per request, appended and flushed at once (the file is complete for every
/// request a client has an answer to).
final class RequestLog: @unchecked Sendable {
    private let file: UnsafeMutablePointer<FILE>
    private let lock = NIOLock()

    init(path: String) throws {
        guard let file = fopen(path, "a") else {
            throw ValidationError("--request-log \(path): cannot open it for writing (\(String(cString: strerror(errno))))")
        }
        self.file = file
    }

    func append(_ line: String) {
        lock.withLock {
            fputs(line + "\n", file)
            fflush(file)
        }
    }
}
