import McuManager
import McuMgrBLE
import McuMgrDBus
import Testing

/// BlueZ's and the bus's error names, as real BlueZ 5.66 returns them, become errors that say what to do.
@Suite struct BlueZErrorMappingTests {
    /// bluetoothd 5.66 crashed in the real-BlueZ guest when pairing for an encrypted characteristic
    /// failed; the next call made the bus try to start it on demand.
    @Test func bluetoothdGoneAndNotStartableSaysRestartIt() {
        let error = BlueZClient.map(
            DBusError(name: "org.freedesktop.DBus.Error.Spawn.ChildExited", message: "Launch helper exited with unknown return code 1"),
            "asking BlueZ for its adapters and devices")
        #expect(error.kind == .transport)
        #expect(error.message.contains("bluetoothd) is not running"), "\(error.message)")
        #expect(error.message.contains("systemctl restart bluetooth") && error.message.contains("journalctl -u bluetooth"), "\(error.message)")
    }

    @Test(arguments: ["org.bluez.Error.NotAuthorized", "org.bluez.Error.AuthenticationFailed", "org.bluez.Error.NotPermitted"])
    func pairingErrorsSayHowToPair(_ name: String) {
        let error = BlueZClient.map(DBusError(name: name, message: "Not paired"), "subscribing to the SMP notifications")
        #expect(error.message.contains("smp ble pair"), "\(error.message)")
        #expect(!error.message.contains("baud"))
        #expect((error.cause as? DBusError)?.name == name, "BlueZ's own error is the cause, for code that branches on it")
    }

    @Test func noBlueZSaysStartIt() {
        let error = BlueZClient.map(DBusError(name: DBusError.serviceUnknown, message: ""), "scanning")
        #expect(error.message.contains("systemctl start bluetooth"), "\(error.message)")
        #expect((error.cause as? DBusError)?.name == DBusError.serviceUnknown)
    }
}
