import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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

    init(device: SimulatedDevice, adapter: String, attMTU: Int, name: String, acquire: Bool, latency: Duration) {
        self.device = device
        self.peripheral = SMPGattPeripheral(
            configuration: .init(
                adapter: adapter, localName: name, attMTU: attMTU, acquire: acquire, responseDelay: latency)
        ) { [device] request in
            guard !device.isRebooting(at: BLEFrontEnd.monotonicNow()) else { return [] }
            return device.responses(to: request, now: BLEFrontEnd.monotonicNow())
        }
    }

    /// Starts serving; returns the ready line (`ble hci1 00:00:5E:00:53:01 name smp-sim mtu 247`).
    func start() async throws -> String {
        let adapter = try await peripheral.start()
        let token = device.addResetObserver { [peripheral] event in
            // The answer to the reset goes out first; the link drops when the device reboots and
            // comes back (advertising) when it is up again.
            let now = BLEFrontEnd.monotonicNow()
            let down = event.rebootAt > now ? event.rebootAt - now : .zero
            let up = event.rebootingUntil > now ? event.rebootingUntil - now : .zero
            Task {
                try? await Task.sleep(for: down)
                await peripheral.suspend()
                try? await Task.sleep(for: up - down)
                try? await peripheral.resume()
            }
        }
        observer.set(token)
        let configuration = peripheral.configuration
        return "ble \(adapter.name) \(adapter.address ?? "?") name \(configuration.localName) mtu \(configuration.attMTU)"
            + (configuration.acquire ? "" : " no-acquire")
    }

    func stop() async {
        if let token = observer.take() { device.removeResetObserver(token) }
        await peripheral.stop()
    }

    static func monotonicNow() -> SMPInstant {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return SMPInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }
}

/// The reset-observer token, set once started.
final class LockedObserverToken: @unchecked Sendable {
    private let lock = NIOLock()
    private var token: Int?
    func set(_ value: Int) { lock.withLock { token = value } }
    func take() -> Int? { lock.withLock { defer { token = nil }; return token } }
}
