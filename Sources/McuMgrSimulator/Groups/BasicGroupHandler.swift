import McuMgrCore

/// Zephyr basic group (63): erase the storage partition, which holds the settings (PROTOCOL.md 3.10).
extension DeviceState {
    mutating func handleBasic(_ request: SimulatedRequest) throws(SimulatorFault) -> SimulatedOutcome {
        guard request.command.rawValue == 0 else { throw .notSupported }
        settings.erase()
        if configuration.fileSystemOnStoragePartition { files.storageErased = true }
        return .empty
    }
}
