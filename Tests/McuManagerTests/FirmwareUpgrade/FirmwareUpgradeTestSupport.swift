import Foundation
import McuManager
import McuMgrCore
import McuMgrSimulator
import Testing
import TestSupport

/// Builders and a rig for firmware-upgrade runtime tests against the in-memory simulated device.
enum DFUFixtures {
    /// An unsigned MCUboot image file (McuMgrImageBuilder) as a package file.
    static func image(
        number: Int = 0, version: McuMgrImageVersion = McuMgrImageVersion(major: 1, minor: 1), size: Int = 24 * 1024,
        seed: UInt64 = 1, slot: Int? = nil, flags: McuMgrImageFlags = [], fileName: String? = nil
    ) -> McuMgrPackage.Image {
        let body = Data(managerTestBytes(max(1, size - 0x200 - 48), seed: seed &+ UInt64(number) &* 7919))
        let image = try! McuMgrImageBuilder(version: version, flags: flags).image(body: body)
        return McuMgrPackage.Image(
            image: number, slot: slot, contentType: .mcubootImage, hash: image.hash, version: version.description,
            data: image.data, fileName: fileName ?? "image\(number)\(slot.map { "-slot\($0)" } ?? "").bin")
    }

    /// Fast timings for a simulated device that reboots in ~0.3 s.
    static func configuration(
        _ mode: FirmwareUpgradeMode = .confirmOnly, _ change: (inout FirmwareUpgradeConfiguration) -> Void = { _ in }
    ) -> FirmwareUpgradeConfiguration {
        var configuration = FirmwareUpgradeConfiguration(
            upgradeMode: mode, resetDelay: .milliseconds(320), reconnectTimeout: .seconds(10),
            retryInterval: .milliseconds(100))
        change(&configuration)
        return configuration
    }

    static let options = FirmwareUpgradeManager.Options(
        reconnectProbeTimeout: .milliseconds(300), progressInterval: .zero, suitPollInterval: .milliseconds(20),
        suitPollDuration: .milliseconds(300))
}

/// Collects the events of a stream as they arrive.
class StreamRecorder<Event: Sendable>: @unchecked Sendable {
    private let box = ManagerTestBox([Event]())
    private var task: Task<Void, Never>?

    init(_ events: AsyncStream<Event>, onEvent: (@Sendable (Event) -> Void)? = nil) {
        let box = self.box
        task = Task {
            for await event in events {
                box.withValue { $0.append(event) }
                onEvent?(event)
            }
        }
    }

    deinit { task?.cancel() }

    var events: [Event] { box.current }

    /// Waits until the events so far satisfy `predicate` (or 10 s passed).
    func wait(untilAll predicate: ([Event]) -> Bool) async {
        await waitUntil { predicate(events) }
    }
}

/// Collects a manager's events.
final class EventRecorder: StreamRecorder<FirmwareUpgradeEvent>, @unchecked Sendable {
    init(_ manager: FirmwareUpgradeManager, onEvent: (@Sendable (FirmwareUpgradeEvent) -> Void)? = nil) {
        super.init(manager.events(), onEvent: onEvent)
    }

    /// The states entered, in order.
    var states: [FirmwareUpgradeState] {
        events.compactMap { if case .stateChanged(_, let to) = $0 { to } else { nil } }
    }

    var logs: [String] {
        events.compactMap { if case .log(let entry) = $0 { entry.message } else { nil } }
    }

    var progress: [FirmwareUpgradeProgress] {
        events.compactMap { if case .uploadProgress(let p) = $0 { p } else { nil } }
    }

    /// Waits until an event matching `predicate` arrived (or 10 s passed).
    func wait(until predicate: @escaping (FirmwareUpgradeEvent) -> Bool) async {
        await wait(untilAll: { $0.contains(where: predicate) })
    }
}

/// Records the iOS-style delegate calls.
final class RecordingDelegate: FirmwareUpgradeDelegate, @unchecked Sendable {
    let calls = ManagerTestBox([String]())

    func upgradeDidStart(controller: FirmwareUpgradeManager) { calls.withValue { $0.append("start") } }
    func upgradeStateDidChange(from previousState: FirmwareUpgradeState, to newState: FirmwareUpgradeState) {
        calls.withValue { $0.append("state \(previousState)->\(newState)") }
    }
    func uploadProgressDidChange(bytesSent: Int, imageSize: Int, timestamp: Date) {
        calls.withValue { $0.append("progress \(bytesSent)/\(imageSize)") }
    }
    func upgradeDidComplete() { calls.withValue { $0.append("complete") } }
    func upgradeDidFail(inState state: FirmwareUpgradeState, with error: Error) { calls.withValue { $0.append("fail \(state)") } }
    func upgradeDidCancel(state: FirmwareUpgradeState) { calls.withValue { $0.append("cancel \(state)") } }
}

extension SimulatedDevice {
    /// The slot of `image` holding `hash`.
    func slot(holding hash: Data, image: Int = 0) -> SimulatedImageSlot? {
        imageSlots.first { $0.image == image && $0.hash == Array(hash) }
    }
}

/// Expects `body` to throw an `McuMgrError` and returns it.
func expectMcuMgrError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> McuMgrError? {
    do {
        try await body()
        Issue.record("expected an error", sourceLocation: sourceLocation)
        return nil
    } catch let error as McuMgrError {
        return error
    } catch {
        Issue.record("expected McuMgrError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
