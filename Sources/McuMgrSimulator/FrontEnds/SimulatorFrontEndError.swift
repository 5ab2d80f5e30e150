import Logging
import McuMgrCore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A front end could not start.
public struct SimulatorFrontEndError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
