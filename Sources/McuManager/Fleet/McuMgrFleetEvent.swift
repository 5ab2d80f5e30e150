#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// Something that happened to one device of a ``McuMgrFleet`` run. Events of one device come in order;
/// events of different devices interleave.
public struct McuMgrFleetEvent: Sendable {
    /// What happened.
    public enum Kind: Sendable {
        /// The device's turn came (a place among ``McuMgrFleet/Configuration/maximumParallel`` was free):
        /// its transport and client are being set up.
        case started
        /// Bytes of the device's transfer that it confirmed, of `total` (reported by the operation through
        /// ``McuMgrFleet/Session/reportProgress(bytes:total:)``).
        case progress(bytes: Int, total: Int)
        /// A line for people from the operation (``McuMgrFleet/Session/log(_:level:)``).
        case log(FirmwareUpgradeLogEntry)
        /// An event of the device's firmware upgrade (``McuMgrFleet/upgrade(images:configuration:options:resources:)``).
        case upgrade(FirmwareUpgradeEvent)
        /// The device is done: `error` is nil when it succeeded. The last event of the device.
        case finished(error: McuMgrError?, duration: Duration)
    }

    /// The device's name (``McuMgrFleet/Device/name``).
    public var device: String
    /// The device's position in ``McuMgrFleet/devices``.
    public var index: Int
    /// What happened.
    public var kind: Kind

    /// Creates an event.
    public init(device: String, index: Int, kind: Kind) {
        self.device = device
        self.index = index
        self.kind = kind
    }
}
