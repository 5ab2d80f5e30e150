import McuMgrBLE
import Testing

/// Whether a link runs EATT: the device's Server Supported Features and the local main.conf.
@Suite struct BlueZEATTTests {
    @Test func theDeviceOffersEATTInBitZero() {
        #expect(BlueZEATT.offered(serverSupportedFeatures: [0x01]))
        #expect(BlueZEATT.offered(serverSupportedFeatures: [0x03, 0x00]))
        #expect(!BlueZEATT.offered(serverSupportedFeatures: [0x02]))
        #expect(!BlueZEATT.offered(serverSupportedFeatures: []))
    }

    @Test func channelsAreReadFromTheGATTSectionOnly() {
        // Debian's main.conf: everything commented out, so bluetoothd's default (3) holds.
        let debian = """
            [General]
            #Name = BlueZ
            [GATT]
            # Number of ATT channels
            # Possible values: 1-5 (1 disables EATT)
            # Default to 3
            #Channels = 3
            """
        #expect(BlueZEATT.channels(mainConf: debian) == nil)
        #expect(BlueZEATT.channels(mainConf: "[GATT]\nCache = always\n  Channels = 1  \n[LE]\n") == 1)
        #expect(BlueZEATT.channels(mainConf: "[General]\nChannels = 1\n[GATT]\nChannels=2\r\n") == 2)
        #expect(BlueZEATT.channels(mainConf: "[GATT]\nChannels = many\n") == nil)
        #expect(BlueZEATT.channels(mainConf: "[GATT]\nChannels = 9\n") == nil, "out of BlueZ's range 1-5")
    }

    @Test func aMissingMainConfAllowsEATTAsBlueZDoes() {
        #expect(BlueZEATT.localBearersAllowed(mainConf: "/nonexistent/main.conf"))
    }
}
