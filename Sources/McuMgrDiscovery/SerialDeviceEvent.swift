import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// A serial port that appeared or went away.
public struct SerialDeviceEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// The port appeared (or was present when watching started, when asked for).
        case added
        /// The port went away (unplugged, or the board reset and left the bus).
        case removed
    }

    public var kind: Kind
    /// The port; for removals, as it was last seen.
    public var device: SerialDevice

    public init(kind: Kind, device: SerialDevice) {
        self.kind = kind
        self.device = device
    }
}
