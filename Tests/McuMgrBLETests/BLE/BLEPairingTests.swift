import Foundation
import McuManager
import McuMgrBLE
import McuMgrDBus
import TestSupport
import Testing

/// Answers pairing questions from a script, and records what it was asked.
final class ScriptedPairing: BLEPairingDelegate, @unchecked Sendable {
    let passkeyAnswer: UInt32?
    let confirmAnswer: Bool
    let asked = LockedValue<[String]>([])
    /// Held before answering a passkey request, until the test lets it go.
    let passkeyGate = LockedValue<CheckedContinuation<Void, Never>?>(nil)
    let holdPasskey: Bool

    init(passkey: UInt32? = nil, confirm: Bool = true, holdPasskey: Bool = false) {
        passkeyAnswer = passkey
        confirmAnswer = confirm
        self.holdPasskey = holdPasskey
    }

    func passkey(for device: String) async -> UInt32? {
        asked.withValue { $0.append("passkey \(device)") }
        if holdPasskey { await withCheckedContinuation { continuation in passkeyGate.withValue { $0 = continuation } } }
        return passkeyAnswer
    }

    func display(passkey: UInt32, entered: Int?, for device: String) {
        asked.withValue { $0.append("display \(BLEPasskey.text(passkey)) \(device)") }
    }

    func confirm(passkey: UInt32, for device: String) async -> Bool {
        asked.withValue { $0.append("confirm \(BLEPasskey.text(passkey)) \(device)") }
        return confirmAnswer
    }

    func authorize(_ device: String) async -> Bool {
        asked.withValue { $0.append("authorize \(device)") }
        return true
    }

    func release() { passkeyGate.withValue { $0?.resume(); $0 = nil } }
}

/// Pairing, bonds and forgetting through a scripted BlueZ: what the agent is asked, what it answers,
/// and BlueZ's errors as messages that say what to do. (Real BlueZ pairs in RealBlueZTests.)
@Suite("BLE pairing against a scripted BlueZ", .enabled(if: BLERig.isAvailable, BLERig.skipReason), .serialized)
struct BLEPairingTests {
    static func configuration(_ rig: BLERig) throws -> McuMgrBleTransport.Configuration {
        var configuration = try McuMgrBleTransport.Configuration(uri: McuMgrDeviceURI(parsing: "ble:\(FakeBlueZ.address)?timeout=5"))
        configuration.busAddress = rig.address
        return configuration
    }

    static let unused = FakeBlueZ.Behaviour.refuseConnect(name: "org.bluez.Error.Failed", message: "unused")

    @Test func aPasskeyTheDeviceShowsIsAskedForAndPairs() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(address: rig.address, behaviour: Self.unused, pairing: .passkeyEntry(expected: 4321))
            defer { bluez.connection.close() }
            let answers = ScriptedPairing(passkey: 4321)
            let result = try await BLEBonds.pair(try Self.configuration(rig), delegate: answers)
            #expect(!result.alreadyPaired)
            #expect(result.device.paired)
            #expect(answers.asked.value == ["passkey \(FakeBlueZ.address)"])
            // The agent was this process's own, with keyboard and display, and is gone afterwards.
            #expect(bluez.agents.value.isEmpty, "the agent is unregistered after pairing")
            // Paired already: nothing is asked again.
            let again = try await BLEBonds.pair(try Self.configuration(rig), delegate: answers)
            #expect(again.alreadyPaired)
            #expect(answers.asked.value.count == 1)
        }
    }

    @Test func aWrongPasskeySaysWhatToDo() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(address: rig.address, behaviour: Self.unused, pairing: .passkeyEntry(expected: 4321))
            defer { bluez.connection.close() }
            await expectMcuMgrError(.transport, containing: ["passkey did not match", "smp ble forget \(FakeBlueZ.address)"]) {
                _ = try await BLEBonds.pair(try Self.configuration(rig), delegate: ScriptedPairing(passkey: 1234))
            }
        }
    }

    @Test func aComparisonIsConfirmedOrRefused() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(address: rig.address, behaviour: Self.unused, pairing: .comparison(shown: 7))
            defer { bluez.connection.close() }
            let refusing = ScriptedPairing(confirm: false)
            await expectMcuMgrError(.transport, containing: ["refused or cancelled", "smp ble pair \(FakeBlueZ.address)"]) {
                _ = try await BLEBonds.pair(try Self.configuration(rig), delegate: refusing)
            }
            #expect(refusing.asked.value == ["confirm 000007 \(FakeBlueZ.address)"])
            let confirming = ScriptedPairing(confirm: true)
            let result = try await BLEBonds.pair(try Self.configuration(rig), delegate: confirming)
            #expect(result.device.paired && !result.alreadyPaired)
        }
    }

    /// A person typing a passkey takes their time: meanwhile the agent's connection answers everything
    /// else (the agent's answer is deferred, not waited for on the D-Bus thread).
    @Test func theBusStaysResponsiveWhileAPasskeyIsTyped() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(address: rig.address, behaviour: Self.unused, pairing: .passkeyEntry(expected: 99))
            defer { bluez.connection.close() }
            let answers = ScriptedPairing(passkey: 99, holdPasskey: true)
            let pairing = Task { try await BLEBonds.pair(try Self.configuration(rig), delegate: answers) }
            #expect(await waitUntil { answers.passkeyGate.value != nil }, "the agent was asked for the passkey")
            // While the question is open, BlueZ's other calls to the agent's process are answered.
            let agent = try #require(bluez.agents.value.last)
            let introspection = try await bluez.connection.call(
                destination: agent.sender, path: agent.path, interface: DBusConnection.introspectableInterface, member: "Introspect")
            #expect(introspection.first?.string?.isEmpty == false)
            answers.release()
            let result = try await pairing.value
            #expect(result.device.paired)
        }
    }

    @Test func bondsAreListedAndForgotten() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(address: rig.address, behaviour: Self.unused, pairing: .justWorks)
            defer { bluez.connection.close() }
            let (_, before) = try await BLEBonds.bonds(busAddress: rig.address)
            #expect(before.isEmpty)
            _ = try await BLEBonds.pair(try Self.configuration(rig), delegate: ScriptedPairing())
            let (adapter, after) = try await BLEBonds.bonds(busAddress: rig.address)
            #expect(adapter.path == FakeBlueZ.adapterPath)
            #expect(after.map { $0.address?.rawValue } == [FakeBlueZ.address])
            let address = try #require(BluetoothAddress(FakeBlueZ.address))
            #expect(try await BLEBonds.forget(address, busAddress: rig.address))
            #expect(bluez.removedDevices.value == [FakeBlueZ.devicePath])
            #expect(try await !BLEBonds.forget(try #require(BluetoothAddress("00:11:22:33:44:66")), busAddress: rig.address))
        }
    }

    /// With a pairing delegate, a device that refuses for lack of pairing is paired and tried again; one
    /// that still refuses once paired (as this scripted one does: a device that wants a passkey and got
    /// Just Works) gets an error that says so and how to pair with a passkey.
    @Test func aTransportAllowedToPairPairsWhenTheDeviceAsks() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseNotify(name: "org.bluez.Error.NotAuthorized", message: "Insufficient Authentication"),
                pairing: .comparison(shown: 123_456))
            defer { bluez.connection.close() }
            let answers = ScriptedPairing(confirm: true)
            await expectMcuMgrError(.transport, containing: ["Insufficient Authentication", "still refuses", "smp ble forget \(FakeBlueZ.address)"]) {
                try await McuMgrBleTransport(configuration: try Self.configuration(rig), pairing: answers).open { _ in }
            }
            #expect(answers.asked.value == ["confirm 123456 \(FakeBlueZ.address)"])
            #expect(bluez.agents.value.isEmpty, "the agent is unregistered")
            #expect(!bluez.isConnected, "the connection the transport made is closed")
        }
    }

    /// A paired device whose connections end at once (seen on real BlueZ 5.66 after the device erased
    /// its bonds: le-connection-abort-by-local) gets the way out of a lost bond beside the reason.
    @Test func aPairedDeviceThatWillNotConnectNamesTheLostBond() async throws {
        try await BLERig.with(bluez: false) { rig in
            let bluez = try await FakeBlueZ.start(
                address: rig.address, behaviour: .refuseConnect(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"),
                paired: true)
            defer { bluez.connection.close() }
            var configuration = try Self.configuration(rig)
            configuration.scanTimeout = .seconds(1)
            await expectMcuMgrError(
                .transport, containing: ["le-connection-abort-by-local", "smp ble forget \(FakeBlueZ.address)", "smp ble pair \(FakeBlueZ.address)"]
            ) {
                try await McuMgrBleTransport(configuration: configuration).open { _ in }
            }
        }
    }
}
