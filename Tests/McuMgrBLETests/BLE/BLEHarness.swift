import Foundation
import McuManager
import McuMgrBLE
import McuMgrCore
import McuMgrDBus
import McuMgrSimulator
import TestSupport
import Synchronization
import Testing

/// A simulated device served as a BLE peripheral on the rig's hci1, in this process, with the same
/// reset behaviour as `smp-sim --ble` (silent while rebooting, link dropped at the reboot, advertising
/// again once up).
final class BLEHarness: @unchecked Sendable {
    let rig: BLERig
    let device: SimulatedDevice
    let peripheral: SMPGattPeripheral
    private var observer: Int?
    private let reboots = Mutex(0)
    private let ignored = IgnoredCount()

    /// Counts the requests the device ignores; a class, so the request handler can hold it before `self` exists.
    private final class IgnoredCount: Sendable {
        let value = Mutex(0)
    }

    /// - Parameter drop: requests the device ignores (to hold requests in flight).
    init(
        rig: BLERig, attMTU: Int = 247, acquire: Bool = true, name: String = "smp-sim",
        drop: (@Sendable ([UInt8]) -> Bool)? = nil
    ) {
        self.rig = rig
        // Transfers of up to 64 KiB: no 16 KiB LittleFS here (the simulator's default is the shared builds').
        var configuration = SimulatorConfiguration()
        configuration.fileSystemBlockCount = nil
        let device = SimulatedDevice(configuration: configuration)
        self.device = device
        let ignored = self.ignored
        self.peripheral = SMPGattPeripheral(
            configuration: .init(adapter: BLERig.peripheralAdapter, localName: name, attMTU: attMTU, acquire: acquire, busAddress: rig.address)
        ) { request in
            if let drop, drop(request) {
                ignored.value.withLock { $0 += 1 }
                return []
            }
            guard !device.isRebooting() else { return [] }
            return device.responses(to: request)
        }
    }

    func start() async throws {
        try await peripheral.start()
        let peripheral = self.peripheral
        observer = device.addResetObserver { event in
            let now = monotonicNow()
            let down = event.rebootAt > now ? event.rebootAt - now : .zero
            let up = event.rebootingUntil > now ? event.rebootingUntil - now : .zero
            // The device's own reboot, as smp-sim --ble times it (the scenario, not a wait for anything):
            // tests wait for its end with `waitUntilRebooted`, and the device is silent meanwhile.
            Task { [weak self] in
                try? await Task.sleep(for: down)
                await peripheral.suspend()
                try? await Task.sleep(for: up - down)
                try? await peripheral.resume()
                self?.reboots.withLock { $0 += 1 }
            }
        }
    }

    /// Requests the device took and ignored as `drop` told it (they stay in flight at the client).
    var ignoredRequests: Int { ignored.value.withLock { $0 } }

    /// Waits until the peripheral has gone down and come back up `count` times in all (the D-Bus calls
    /// of a reboot take longer than its nominal 300 ms on a loaded machine).
    func waitUntilRebooted(_ count: Int = 1, within limit: Duration = .seconds(120)) async throws {
        guard await waitUntil(timeout: limit, interval: .milliseconds(20), { reboots.withLock { $0 } >= count }) else {
            Issue.record("the simulated device did not come back within \(limit)")
            return
        }
    }

    func stop() async {
        if let observer { device.removeResetObserver(observer) }
        await peripheral.stop()
    }

    /// A transport to the peripheral through hci0.
    func transport(_ options: String = "") throws -> McuMgrBleTransport {
        var configuration = try McuMgrBleTransport.Configuration(
            uri: McuMgrDeviceURI(parsing: "ble:\(BLERig.peripheralAddress)" + (options.isEmpty ? "" : "?\(options)")))
        configuration.busAddress = rig.address
        return McuMgrBleTransport(configuration: configuration)
    }

    /// Starts a rig and a peripheral, runs `body`, stops both.
    static func with<R>(
        attMTU: Int = 247, acquire: Bool = true, drop: (@Sendable ([UInt8]) -> Bool)? = nil,
        _ body: (BLEHarness) async throws -> R
    ) async throws -> R {
        let rig = try BLERig.start()
        defer { rig.stop() }
        let harness = BLEHarness(rig: rig, attMTU: attMTU, acquire: acquire, drop: drop)
        try await harness.start()
        do {
            let result = try await body(harness)
            await harness.stop()
            return result
        } catch {
            await harness.stop()
            throw error
        }
    }
}

func monotonicNow() -> SMPInstant {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return SMPInstant(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
}

/// Expects `body` to fail with a `McuMgrError` of `kind` whose message contains every fragment.
func expectMcuMgrError(
    _ kind: McuMgrError.Kind, containing fragments: [String], sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record("expected a \(kind) error", sourceLocation: sourceLocation)
    } catch let error as McuMgrError {
        #expect(error.kind == kind, "\(error.message)", sourceLocation: sourceLocation)
        for fragment in fragments {
            #expect(error.message.contains(fragment), "\"\(fragment)\" not in: \(error.message)", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected McuMgrError, got \(error)", sourceLocation: sourceLocation)
    }
}
