import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ArgumentParser
import Logging
import McuMgrBLE
import McuMgrCore
import McuMgrSimulator

/// Serves the simulated device as a BLE peripheral through BlueZ (`--ble ADAPTER`): every request
/// written to the SMP characteristic is answered like on the other front ends; while the device
/// reboots it is silent, its connections drop and it stops advertising, and it advertises again once
/// it is back.
final class BLEFrontEnd: Sendable {
    let device: SimulatedDevice
    let peripheral: SMPGattPeripheral
    private let observer = LockedObserverToken()
    private let drops: LinkDrops?
    /// Firmware-loader mode: the adapter the loader is served on (another address, as an nRF Connect SDK
    /// loader with a Bluetooth identity of its own); nil: the application's adapter, under the loader's name.
    let loaderAdapter: String?
    /// The loader's peripheral, made when the loader first runs.
    private let loader = LockedPeripheral()
    private let handler: SMPGattPeripheral.RequestHandler

    /// - Parameter faults: request and answer loss, duplication, resets and silence apply here; delay,
    ///   jitter and reordering need the peripheral's own timing and are not applied over BLE, nor the
    ///   serial-only faults.
    /// - Parameter dropLinkEvery: every that many requests, the link drops instead of the answer going
    ///   out (the device handled the request and keeps running, and advertises again at once): a
    ///   central that went out of range or met interference.
    init(
        device: SimulatedDevice, adapter: String, attMTU: Int, name: String, acquire: Bool, reassembly: Bool = true,
        security: SMPGattPeripheral.Configuration.Security = .open, notificationSize: Int? = nil, dropLinkEvery: Int? = nil,
        pairing: BLEIOCapability? = nil, passkey: UInt32? = nil, layout: SMPGattPeripheral.Configuration.Layout = .standard,
        latency: Duration, faults: FaultProfile = FaultProfile(), loaderAdapter: String? = nil
    ) {
        self.device = device
        self.loaderAdapter = loaderAdapter
        let plan = faults.isEmpty ? nil : LockedFaultPlan(FaultPlan(faults))
        let drops = dropLinkEvery.map(LinkDrops.init(every:))
        self.drops = drops
        let handler: SMPGattPeripheral.RequestHandler = { [device] request in
            guard !device.isRebooting(at: BLEFrontEnd.monotonicNow()) else { return [] }
            switch drops?.take() ?? .answer {
            case .answer: break
            case .handledThenDrop:
                _ = device.responses(to: request, now: BLEFrontEnd.monotonicNow())
                return []
            case .lost: return []
            }
            guard let plan else { return device.responses(to: request, now: BLEFrontEnd.monotonicNow()) }
            switch plan.request(request) {
            case .deliver: break
            case .lose, .silence: return []
            case .reset:
                device.powerCycle()
                return []
            }
            return device.responses(to: request, now: BLEFrontEnd.monotonicNow()).flatMap { response in
                switch plan.answer() {
                case .send(let copies, _): Array(repeating: response, count: copies)
                case .holdForNext: [response]
                }
            }
        }
        self.handler = handler
        self.peripheral = SMPGattPeripheral(
            configuration: .init(
                adapter: adapter, localName: name, attMTU: attMTU, acquire: acquire, responseDelay: latency,
                reassembly: reassembly, bufferSize: device.configuration.bufferSize, security: security,
                notificationSize: notificationSize, pairing: pairing, passkey: passkey, layout: layout),
            logger: BLEFrontEnd.logger,
            onPairing: { text in
                print("ble \(adapter) \(text)")
                fflush(nil)
            },
            handler: handler)
    }

    /// Starts serving; returns the ready line (`ble hci1 00:00:5E:00:53:01 name smp-sim mtu 247`).
    func start() async throws -> String {
        let adapter = try await peripheral.start()
        let applicationName = peripheral.configuration.localName
        let adapterName = adapter.name
        let token = device.addResetObserver { [self] event in
            // The answer to the reset goes out first; the link drops when the device reboots and
            // comes back (advertising) when it is up again. The firmware loader comes back under its
            // own name (the one the application stored, or its built-in one), on its own adapter when
            // given one (another address), and the application under its name and address again.
            let now = BLEFrontEnd.monotonicNow()
            let down = event.rebootAt > now ? event.rebootAt - now : .zero
            let up = event.rebootingUntil > now ? event.rebootingUntil - now : .zero
            Task {
                try? await Task.sleep(for: down)
                await peripheral.suspend()
                await loader.value?.suspend()
                try? await Task.sleep(for: up - down)
                if let loaderName = device.firmwareLoaderAdvertisingName, let loaderAdapter {
                    await serveLoader(on: loaderAdapter, name: loaderName)
                    return
                }
                let name = device.firmwareLoaderAdvertisingName ?? applicationName
                let renamed = name != peripheral.localName
                try? await peripheral.resume(localName: name)
                if renamed {
                    print("ble \(adapterName) advertising \(name)\(event.runMode == .firmwareLoader ? " (firmware loader)" : "")")
                    fflush(nil)
                }
            }
        }
        observer.set(token)
        drops?.peripheral = peripheral
        let configuration = peripheral.configuration
        return "ble \(adapter.name) \(adapter.address ?? "?") name \(configuration.localName) mtu \(configuration.attMTU)"
            + " buffer \(configuration.bufferSize)" + (configuration.reassembly ? "" : " no-reassembly")
            + (configuration.acquire ? "" : " no-acquire") + (configuration.security == .open ? "" : " security \(configuration.security.rawValue)")
            + (configuration.notificationSize.map { " notify \($0)" } ?? "") + (drops.map { " drop-every \($0.every)" } ?? "")
            + (configuration.layout == .standard ? "" : " layout \(configuration.layout.rawValue)")
    }

    /// The firmware loader on its own adapter: its peripheral is made (and registered) the first time the
    /// loader runs, and advertises again under the current name after that.
    private func serveLoader(on adapter: String, name: String) async {
        do {
            let info: BlueZAdapterInfo?
            if let running = loader.value {
                try await running.resume(localName: name)
                info = nil
            } else {
                let configuration = peripheral.configuration
                let made = SMPGattPeripheral(
                    configuration: .init(
                        adapter: adapter, localName: name, attMTU: configuration.attMTU, acquire: configuration.acquire,
                        responseDelay: configuration.responseDelay, reassembly: configuration.reassembly,
                        bufferSize: device.currentBufferSize, notificationSize: configuration.notificationSize),
                    logger: BLEFrontEnd.logger, handler: handler)
                info = try await made.start()
                loader.value = made
            }
            print("ble \(adapter)\(info?.address.map { " \($0)" } ?? "") advertising \(name) (firmware loader)")
        } catch {
            print("ble \(adapter) firmware loader cannot advertise: \(error)")
        }
        fflush(nil)
    }

    func stop() async {
        if let token = observer.take() { device.removeResetObserver(token) }
        await loader.value?.stop()
        await peripheral.stop()
    }

    /// The peripheral's log: every write it takes and every answer it drops, on stderr with
    /// `SMP_SIM_DEBUG=1`; silent otherwise.
    static var logger: Logger {
        var logger = Logger(label: "smp-sim.ble") { label in
            ProcessInfo.processInfo.environment["SMP_SIM_DEBUG"] == "1"
                ? StreamLogHandler.standardError(label: label) as any LogHandler : SwiftLogNoOpLogHandler()
        }
        logger.logLevel = .debug
        return logger
    }

    static func monotonicNow() -> SMPInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return SMPInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }
}

/// The firmware loader's peripheral, once made.
final class LockedPeripheral: @unchecked Sendable {
    private let lock = NIOLock()
    private var peripheral: SMPGattPeripheral?
    var value: SMPGattPeripheral? {
        get { lock.withLock { peripheral } }
        set { lock.withLock { peripheral = newValue } }
    }
}

/// The reset-observer token, set once started.
final class LockedObserverToken: @unchecked Sendable {
    private let lock = NIOLock()
    private var token: Int?
    func set(_ value: Int) { lock.withLock { token = value } }
    func take() -> Int? { lock.withLock { defer { token = nil }; return token } }
}

/// `--ble-drop-every`: counts requests and drops the link on every Nth.
final class LinkDrops: @unchecked Sendable {
    /// What becomes of one request.
    enum Fate {
        /// Handled and answered.
        case answer
        /// Handled, and the link drops before the answer goes out.
        case handledThenDrop
        /// Arrived while the link drops: it never reaches the device.
        case lost
    }

    let every: Int
    private let lock = NIOLock()
    private var seen = 0
    private var dropping = false
    private var held: SMPGattPeripheral?

    /// Set once the peripheral exists (the request handler is made before it).
    var peripheral: SMPGattPeripheral? {
        get { lock.withLock { held } }
        set { lock.withLock { held = newValue } }
    }

    init(every: Int) { self.every = max(1, every) }

    /// Counts one request; on every Nth, drops every connection and advertises again, as a device
    /// does that stays up.
    func take() -> Fate {
        let (fate, peripheral): (Fate, SMPGattPeripheral?) = lock.withLock {
            if dropping { return (.lost, nil) }
            seen += 1
            guard seen % every == 0, let held else { return (.answer, nil) }
            dropping = true
            return (.handledThenDrop, held)
        }
        if let peripheral {
            Task {
                await peripheral.suspend()
                try? await peripheral.resume()
                lock.withLock { dropping = false }
            }
        }
        return fate
    }
}

/// A fault plan shared by the peripheral's request handler calls.
final class LockedFaultPlan: @unchecked Sendable {
    private let lock = NIOLock()
    private var plan: FaultPlan
    init(_ plan: FaultPlan) { self.plan = plan }
    func request(_ packet: [UInt8]) -> FaultPlan.RequestFate { lock.withLock { plan.request(packet) } }
    func answer() -> FaultPlan.AnswerFate { lock.withLock { plan.answer() } }
}

extension SMPGattPeripheral.Configuration.Security: ExpressibleByArgument {}
extension SMPGattPeripheral.Configuration.Layout: ExpressibleByArgument {}

/// `--ble-io`: BlueZ's I/O capabilities by shorter names.
enum BLEIOCapabilityOption: String, ExpressibleByArgument, CaseIterable {
    case none, display, displayYesNo = "display-yes-no", keyboard, keyboardDisplay = "keyboard-display"

    var capability: BLEIOCapability {
        switch self {
        case .none: .noInputNoOutput
        case .display: .displayOnly
        case .displayYesNo: .displayYesNo
        case .keyboard: .keyboardOnly
        case .keyboardDisplay: .keyboardDisplay
        }
    }
}
