#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The iOS library's delegate, for code ported from it. Pass one to `FirmwareUpgradeManager` and it
/// is called, in order, from the manager's task for each event (`FirmwareUpgradeEvent` carries more).
/// Every method has an empty default.
public protocol FirmwareUpgradeDelegate: AnyObject, Sendable {
    /// The upgrade started.
    func upgradeDidStart(controller: FirmwareUpgradeManager)
    /// The state changed.
    func upgradeStateDidChange(from previousState: FirmwareUpgradeState, to newState: FirmwareUpgradeState)
    /// Upload progress of the image being sent.
    func uploadProgressDidChange(bytesSent: Int, imageSize: Int, timestamp: Date)
    /// The upgrade succeeded.
    func upgradeDidComplete()
    /// The upgrade failed in `state`.
    func upgradeDidFail(inState state: FirmwareUpgradeState, with error: Error)
    /// The upgrade was cancelled in `state`.
    func upgradeDidCancel(state: FirmwareUpgradeState)
}

extension FirmwareUpgradeDelegate {
    public func upgradeDidStart(controller: FirmwareUpgradeManager) {}
    public func upgradeStateDidChange(from previousState: FirmwareUpgradeState, to newState: FirmwareUpgradeState) {}
    public func uploadProgressDidChange(bytesSent: Int, imageSize: Int, timestamp: Date) {}
    public func upgradeDidComplete() {}
    public func upgradeDidFail(inState state: FirmwareUpgradeState, with error: Error) {}
    public func upgradeDidCancel(state: FirmwareUpgradeState) {}
}

/// Turns events into delegate calls.
struct FirmwareUpgradeDelegateAdapter: Sendable {
    let delegate: any FirmwareUpgradeDelegate
    let manager: FirmwareUpgradeManager

    func deliver(_ event: FirmwareUpgradeEvent) {
        switch event {
        case .started: delegate.upgradeDidStart(controller: manager)
        case .stateChanged(let from, let to): delegate.upgradeStateDidChange(from: from, to: to)
        case .uploadProgress(let p):
            delegate.uploadProgressDidChange(bytesSent: p.bytesSent, imageSize: p.imageSize, timestamp: p.timestamp)
        case .completed: delegate.upgradeDidComplete()
        case .failed(let state, let error): delegate.upgradeDidFail(inState: state, with: error)
        case .cancelled(let state): delegate.upgradeDidCancel(state: state)
        case .log, .paused, .resumed: break
        }
    }
}
