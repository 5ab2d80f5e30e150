import Foundation
import McuManager
import Testing
import TestSupport

@testable import McuMgrDiscovery

/// `DeviceFollower` in virtual time: hotplug events from the test instead of udev, time from a manual
/// clock. When the board is taken back (at its add event, or at the end of the departure grace for a
/// port that never left) and when the follower gives up.
@Suite("Device follower: departure grace and deadline in virtual time", .timeLimit(.minutes(10)))
struct DeviceFollowerTimingTests {
    /// A USB CDC-ACM port of an unknown board (it follows resets: 3 s departure grace); /dev/null stands in
    /// for its node, so that it opens.
    static func port(_ name: String, sysPath: String) -> SerialDevice {
        SerialDevice(
            path: "/dev/null", name: name, sysPath: sysPath,
            usb: USBSerialInfo(vendorID: 0x2FE3, productID: 0x0100, serialNumber: "VIRTUAL1", interfaceNumber: 0))
    }

    struct Rig {
        let clock = ManualClock()
        let events: AsyncStream<SerialDeviceEvent>.Continuation
        let follower: DeviceFollower
        let before = DeviceFollowerTimingTests.port("ttyACM0", sysPath: "/sys/devices/virtual-usb/1-1:1.0/tty/ttyACM0")

        init() {
            let (stream, events) = AsyncStream.makeStream(of: SerialDeviceEvent.self)
            self.events = events
            follower = DeviceFollower(
                device: before, monitor: SerialDeviceMonitor(events: { _ in stream }), clock: McuMgrClock(clock))
        }

        /// Waits for the board and reports when (virtual time) it was back.
        func reconnect(within timeout: Duration) -> Task<(SerialDevice, Duration), any Error> {
            let follower = self.follower
            let clock = self.clock
            return Task {
                let device = try await follower.reconnected(within: timeout)
                return (device, clock.elapsed)
            }
        }
    }

    @Test func aPortThatNeverLeavesIsTakenBackWhenTheDepartureGraceEnds() async throws {
        let rig = Rig()
        #expect(rig.follower.followsResets)
        let back = rig.reconnect(within: .seconds(30))
        // 50 ms for the monitor's first snapshot, then the 3 s grace for the port to leave.
        await rig.clock.waitForSleepers { $0 == [.milliseconds(50)] }
        rig.clock.advance(to: .milliseconds(50))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(3_050)] }
        rig.clock.advance(to: .milliseconds(3_049))
        #expect(rig.clock.pendingDeadlines == [.milliseconds(3_050)], "still waiting for the port to leave")
        rig.clock.advance(to: .milliseconds(3_050))
        let (device, at) = try await back.value
        #expect(at == .milliseconds(3_050))
        #expect(device == rig.before)
    }

    @Test func aPortThatLeavesAndComesBackIsTakenAtOnceUnderItsNewName() async throws {
        let rig = Rig()
        let back = rig.reconnect(within: .seconds(30))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(50)] }
        rig.clock.advance(to: .milliseconds(50))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(3_050)] }
        // It leaves at 400 ms: the grace no longer applies, only the deadline (30.05 s).
        rig.clock.advance(to: .milliseconds(400))
        rig.events.yield(SerialDeviceEvent(kind: .removed, device: rig.before))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(30_050)] }
        // It comes back at 1.2 s as ttyACM1: taken then, not at a timer.
        rig.clock.advance(to: .milliseconds(1_200))
        let after = Self.port("ttyACM1", sysPath: "/sys/devices/virtual-usb/1-1:1.0/tty/ttyACM1")
        rig.events.yield(SerialDeviceEvent(kind: .added, device: after))
        let (device, at) = try await back.value
        #expect(at == .milliseconds(1_200))
        #expect(device == after)
        #expect(await rig.follower.current == after)
    }

    @Test func aBoardThatDoesNotComeBackFailsExactlyAtTheDeadline() async throws {
        let rig = Rig()
        let back = rig.reconnect(within: .seconds(5))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(50)] }
        rig.clock.advance(to: .milliseconds(50))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(3_050)] }
        rig.events.yield(SerialDeviceEvent(kind: .removed, device: rig.before))
        await rig.clock.waitForSleepers { $0 == [.milliseconds(5_050)] }
        // One timer for the deadline, armed once: waiting for the board does not spin (a cancelled
        // timer used to wake the next wait, which armed and cancelled another, and so on).
        let sleeps = rig.clock.sleepsBegun
        rig.clock.advance(to: .milliseconds(5_049))
        #expect(rig.clock.pendingDeadlines == [.milliseconds(5_050)])
        _ = await rig.follower.current  // a hop through the follower: a spinning wait would have re-armed by now
        #expect(rig.clock.sleepsBegun == sleeps, "no timer re-armed while nothing happened")
        rig.clock.advance(to: .milliseconds(5_050))
        let error = await #expect(throws: McuMgrError.self) { try await back.value }
        #expect(error?.kind == .timeout)
        #expect(error?.message.contains("did not come back within 5.0 seconds after the reset") == true, "\(error?.message ?? "")")
    }
}
