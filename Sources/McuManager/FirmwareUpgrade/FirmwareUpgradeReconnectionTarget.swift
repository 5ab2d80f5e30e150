#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// What the device comes back as after a reset.
public enum FirmwareUpgradeReconnectionTarget: Sendable, Hashable, CustomStringConvertible {
    /// The application (after the install reset, or any reset outside firmware-loader mode).
    case application
    /// The firmware loader after the reset into it (MCUboot firmware-loader mode, os reset with boot_mode 1).
    /// Over serial or UDP it answers on the same port. Over Bluetooth LE it is another peripheral: it
    /// advertises `name` (the one the application stored in `fw_loader/adv_name`; nil when none was
    /// configured: the name it was built with) and often has another address (nRF Connect SDK's loader
    /// is a separate image with its own Bluetooth identity).
    case firmwareLoader(name: String?)

    public var description: String {
        switch self {
        case .application: "the application"
        case .firmwareLoader(let name): "the firmware loader" + (name.map { " (\"\($0)\")" } ?? "")
        }
    }
}
