#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import McuMgrCore

/// Something that happened during a firmware upgrade, in order. Subscribe with
/// `FirmwareUpgradeManager.events()` before starting.
public enum FirmwareUpgradeEvent: Sendable {
    /// The upgrade started with these package files.
    case started(images: [McuMgrPackage.Image], configuration: FirmwareUpgradeConfiguration)
    /// The public state changed.
    case stateChanged(from: FirmwareUpgradeState, to: FirmwareUpgradeState)
    /// Upload progress (at most every `FirmwareUpgradeManager.Options.progressInterval`, plus each
    /// image's last byte).
    case uploadProgress(FirmwareUpgradeProgress)
    /// A line for people: what the upgrade is doing, notes and warnings.
    case log(FirmwareUpgradeLogEntry)
    /// `pause()` took effect; nothing more is sent until `resume()`.
    case paused(FirmwareUpgradeState)
    /// `resume()` took effect.
    case resumed(FirmwareUpgradeState)
    /// The upgrade succeeded.
    case completed(FirmwareUpgradeResult)
    /// The upgrade failed in this state.
    case failed(state: FirmwareUpgradeState, error: McuMgrError)
    /// The upgrade was cancelled in this state.
    case cancelled(state: FirmwareUpgradeState)
}
