import Logging
import McuManager

/// The port a filter chose and why.
public struct SerialDeviceSelection: Sendable {
    public var device: SerialDevice
    /// `serial:/dev/ttyACM0` with the filter's transport options.
    public var uri: McuMgrDeviceURI
    /// How it was chosen, for `-v`: "the only match", "the only one of 3 that answered SMP".
    public var reason: String
}
