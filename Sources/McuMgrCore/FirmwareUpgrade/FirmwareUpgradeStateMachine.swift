/// The firmware-upgrade state machine: validate, upload, test/confirm, reset, reconnect, confirm,
/// for the four upgrade modes and the MCUboot modes (swap, overwrite, Direct-XIP with and without
/// revert, RAM load, firmware loader, single slot) and SUIT envelopes.
///
/// Pure: every event is a `mutating func` returning the actions the driver runs, in order. The
/// driver answers each request action with the matching event. Time is an input: `waitUntil`
/// arms the driver's single timer (a new one replaces the old) and the driver calls
/// `timerFired(now:)` when it expires; stale timers are ignored.
///
/// This file holds the events and the plumbing; the steps before the upload are in
/// `FirmwareUpgradeStateMachine+Validate.swift`, those from the upload on in `+Install.swift`, and the
/// per-mode routes the handlers switch on in `+Route.swift`. The machine's own state is internal rather
/// than private only so those extensions reach it.
public struct FirmwareUpgradeStateMachine: Sendable {
    /// What the driver must do.
    public enum Action: Sendable, Hashable {
        /// The public state changed.
        case notify(FirmwareUpgradeStateChange)
        /// Read MCUmgr parameters (OS group, command 6).
        case requestParameters
        /// Read bootloader info: the name (no query) and the mode (`query: "mode"`).
        case requestBootloaderInfo
        /// Read the image list (image group, command 0).
        case requestImageList
        /// Erase the application settings (Zephyr basic group, command 0).
        case eraseAppSettings
        /// Upload these images in order (report `uploadFinished(image:)` for each), `pipelineDepth`
        /// requests in flight; `bufferSize` is the device's SMP buffer when known.
        case upload([FirmwareUpgradeImage], pipelineDepth: Int, bufferSize: Int?)
        /// Hold the running upload (pause); keep its offset.
        case pauseUpload
        /// Continue the held upload.
        case resumeUpload
        /// State write `{hash, confirm: false}`; answer with `stateWriteSucceeded`.
        case testImage(hash: [UInt8])
        /// State write `{hash?, confirm: true}`; answer with `stateWriteSucceeded`.
        case confirmImage(hash: [UInt8]?)
        /// Firmware-loader mode: store the name the loader is to advertise (settings write of
        /// `fw_loader/adv_name`, then a settings save); answer with `firmwareLoaderNameSet()` or `requestFailed`.
        case setFirmwareLoaderName(String)
        /// Reset the device; answer with `resetSent(now:)`.
        case reset(FirmwareUpgradeResetMode)
        /// Arm the timer for this instant (replaces any armed timer).
        case waitUntil(SMPInstant)
        /// (Re)open the link to the device (its application); answer with `reconnected()` or `requestFailed`.
        case reconnect
        /// Open the link to the firmware loader the device reset into (firmware-loader mode). Over serial
        /// or UDP it answers on the same port; over Bluetooth LE it is another peripheral, advertising
        /// `name` (the name written with `setFirmwareLoaderName`, nil when none was configured), often at
        /// another address. Answer like `.reconnect`.
        case reconnectToFirmwareLoader(name: String?)
        /// The upgrade succeeded.
        case finished(FirmwareUpgradeSummary)
        /// The upgrade failed; no further actions follow.
        case failed(FirmwareUpgradeFailure)
        /// The upgrade was cancelled: stop any transfer; no further actions follow.
        case cancelled
    }

    enum Write: Sendable, Hashable {
        case test([UInt8])
        case confirm([UInt8])
    }

    /// Why the device is reset, and what follows the reconnect; the route says into what.
    enum ResetPurpose: Sendable, Hashable {
        /// Install the uploaded images.
        case install
        /// Reboot (boot_mode 1) into the bootloader that takes the upload, before uploading: the firmware
        /// loader (route `.firmwareLoader`: it answers the reconnect, over Bluetooth LE as another peripheral)
        /// or MCUboot's serial recovery (route `.singleApplication`: it answers on the application's port,
        /// and its image list comes first).
        case enterBootloader
        /// Let MCUboot boot a pending image that blocks the secondary slot (as ios-dm does).
        case resolveSecondary
    }

    /// Where the upgrade is. Every reset (into the firmware loader or serial recovery, to install, to clear
    /// a pending secondary slot) goes through the same reset, wait and reconnect states; their
    /// `ResetPurpose` and the plan's `Route` say which flow it belongs to.
    enum State: Sendable, Hashable {
        case idle
        case parameters
        case bootloaderInfo
        case validate
        /// Firmware-loader mode: the loader's advertising name is being stored before the reset into it.
        case namingLoader
        /// Confirming the running image so a confirmed secondary slot can be overwritten.
        case resolvingSecondary
        case upload(remaining: [Int])
        case eraseSettings
        /// State writes before the reset; the first is in flight.
        case writing([Write])
        case reset(ResetPurpose)
        case waitForSwap(until: SMPInstant, ResetPurpose)
        case reconnecting(deadline: SMPInstant, retryAt: SMPInstant?, ResetPurpose)
        /// Reading the image list after the install reset. `recoveryAnswered`: serial recovery (not the
        /// application) answered it, so MCUboot has not booted the image (yet): a timeout says so (route
        /// `.serialRecovery` only).
        case verifying(deadline: SMPInstant, retryAt: SMPInstant?, recoveryAnswered: Bool = false)
        /// Route `.serialRecovery(.singleApplication)`: reading serial recovery's image list after the upload,
        /// before the reset (the application has no image group, so this is the last look at the hash in slot 0).
        case checkingRecovery
        /// Confirms after the reset (testAndConfirm); the first is in flight.
        case confirmingAfterReset([[UInt8]])
        case success
        case failed
        case cancelled
    }

    /// How this bootloader mode installs an image (the route says who writes it).
    struct Flow: Sendable, Hashable {
        enum SlotChoice: Sendable, Hashable { case secondary, inactive, primary }
        enum Writes: Sendable, Hashable { case asMode, confirmOnly, none }
        var slots: SlotChoice
        var writes: Writes
        var swapWait: Bool
    }

    /// The plan for one image number.
    struct Target: Sendable, Hashable {
        var image: FirmwareUpgradeImage
        var needsUpload: Bool
        var write: Write?
        /// Needs a reset to take effect (uploaded, or already waiting in a slot).
        var needsReset: Bool
    }

    /// What the machine learned about the device it talks to. Filled in by the first phases (parameters,
    /// bootloader info) and revised when serial recovery answers instead of the application.
    struct Device: Sendable, Hashable {
        /// The SMP buffer size the device reported; nil when unknown, or when the one answering now
        /// (a firmware loader, serial recovery) is not the one that reported it.
        var bufferSize: Int?
        /// How many SMP buffers the device has (the upload's depth follows); nil when unknown.
        var bufferCount: Int?
        /// The bootloader's name from bootloader info (`"MCUboot"`, `"SUIT"`).
        var bootloaderName: String?
        /// The bootloader mode in use (from the device, the configuration, or unknown).
        var mode: BootloaderMode = .unknown
    }

    /// What the machine decided to do: the route and how the bootloader installs (chosen after bootloader
    /// info; serial recovery revises them), and what each image number needs (chosen by each validation).
    struct Plan: Sendable, Hashable {
        /// Which way the images reach the device; `.application` until bootloader info says otherwise.
        var route = Route.application
        var flow = Flow(slots: .secondary, writes: .asMode, swapWait: true)
        var targets: [Target] = []
        /// Image numbers whose image the device already holds (reported as skipped).
        var skipped: [Int] = []
        /// How many more times validation may clear a secondary slot held by another image (confirm the
        /// running image, or reset to boot the pending one) before giving up: it counts across validations.
        var resolutionsLeft = 2
    }

    /// What the summary reports beyond the plan: the notes gathered on the way and what was done or checked.
    struct Report: Sendable, Hashable {
        var notes: [String] = []
        var didReset = false
        /// The settings erase ran (or failed and was tolerated); it runs once.
        var settingsErased = false
        /// What serial recovery's image list showed of slot 0 (single-application MCUboot), as a sentence part.
        var recoveryCheck: String?
        /// What was checked to know the device runs the new images (single-application MCUboot).
        var verified: String?
    }

    /// The request last sent, which a retriable failure resends, and how many more times it may.
    private struct Resend: Sendable, Hashable {
        var action: Action
        var retriesLeft: Int
    }

    public private(set) var configuration: FirmwareUpgradeConfiguration
    /// The images to install, in upload order.
    public let images: [FirmwareUpgradeImage]
    /// What the link carries; refined with the device's buffer count for the upload's depth.
    let link: LinkLimits
    var state: State = .idle
    var device = Device()
    var plan = Plan()
    var report = Report()
    private var resend: Resend?
    /// The instant of the last event that carried one: `imageListReceived` has none, and retries from it.
    var lastNow: SMPInstant = .zero

    // The plumbing between events and the driver.
    private var published: FirmwareUpgradeState = .none
    var out: [Action] = []
    private var held: [Action] = []
    /// Whether the machine is paused (actions are held until `resume()`).
    public private(set) var isPaused = false

    /// A machine for these images (upload order: as given).
    /// - Parameter link: what the link to the device carries (the client's `linkLimits`): the upload's
    ///   depth is its `window` once refined with the device's buffer count and the configuration's
    ///   `pipelineDepth`. The default bounds nothing: `buf_count - 1`.
    public init(
        images: [FirmwareUpgradeImage], configuration: FirmwareUpgradeConfiguration = .init(),
        link: LinkLimits = LinkLimits(maximumPacketSize: BLEFramingCodec.defaultMaximumPacketSize, framesInFlight: 255)
    ) {
        self.images = images
        self.configuration = configuration
        self.link = link
    }

    /// The current public state.
    public var currentState: FirmwareUpgradeState { published }

    /// The bootloader mode in use (from the device, the configuration, or unknown).
    public var bootloaderMode: BootloaderMode { device.mode }

    /// Whether the device answered from MCUboot's serial recovery: no application runs, so it reports no
    /// bootloader info (rc 8) and no active slot (an empty image list when it holds no image). The images then go to their primary slot (slot 0
    /// of image 0), without test or confirm (MCUboot has neither: ENOTSUP), and a reset boots them.
    public var isSerialRecovery: Bool {
        if case .serialRecovery = plan.route { true } else { false }
    }

    // MARK: - Events

    /// Starts the upgrade.
    public mutating func start(now: SMPInstant) -> [Action] {
        lastNow = now
        guard state == .idle else { return [] }
        guard !images.isEmpty else {
            fail("the package holds no images: nothing to upload — check the package file")
            return flush()
        }
        go(.parameters)
        request(.requestParameters)
        return flush()
    }

    /// MCUmgr parameters arrived.
    public mutating func parametersReceived(bufferSize: Int, bufferCount: Int) -> [Action] {
        guard state == .parameters else { return [] }
        device.bufferSize = bufferSize > 0 ? bufferSize : nil
        device.bufferCount = bufferCount > 0 ? bufferCount : nil
        askBootloader()
        return flush()
    }

    /// The device does not implement MCUmgr parameters (rc 8): no pipelining.
    public mutating func parametersUnsupported() -> [Action] {
        guard state == .parameters else { return [] }
        device.bufferSize = nil
        device.bufferCount = 1
        askBootloader()
        return flush()
    }

    /// Bootloader info arrived: the name (`"MCUboot"`, `"SUIT"`) and the mode when reported.
    public mutating func bootloaderInfoReceived(name: String?, mode: BootloaderMode?) -> [Action] {
        guard state == .bootloaderInfo else { return [] }
        device.bootloaderName = name
        device.mode = mode ?? .unknown
        chooseFlowAndValidate()
        return flush()
    }

    /// The device does not implement bootloader info: assume an MCUboot swap mode.
    public mutating func bootloaderInfoUnsupported() -> [Action] {
        guard state == .bootloaderInfo else { return [] }
        device.mode = .unknown
        chooseFlowAndValidate()
        return flush()
    }

    /// The image list arrived (answer to `requestImageList`).
    public mutating func imageListReceived(_ slots: [McuMgrImageStateResponse.ImageSlot]) -> [Action] {
        switch state {
        case .validate: validate(slots)
        case .verifying: verify(slots)
        case .checkingRecovery: checkRecovery(slots)
        default: return []
        }
        return flush()
    }

    /// The image list was answered with NOT_SUPPORTED (rc 8): the device has no image group. A
    /// single-application MCUboot's application has none (MCUMGR_GRP_IMG depends on
    /// !MCUBOOT_BOOTLOADER_MODE_SINGLE_APP): the upgrade then goes through serial recovery, and after the
    /// final reset this answer is the application's (serial recovery lists its slots).
    public mutating func imageListUnsupported(_ description: String, now: SMPInstant) -> [Action] {
        lastNow = now
        switch (state, plan.route) {
        case (.validate, .singleApplication):
            report.notes.append("the application has no image group (single-application MCUboot): reset into MCUboot's serial recovery to upload")
            resetIntoRecovery()
        case (.validate, .serialRecovery(.singleApplication)):
            fail("after the reset into the bootloader (boot_mode 1) the device still answers the image list with rc 8 (\(description)): "
                + "it did not enter MCUboot's serial recovery. The application needs CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE and MCUboot "
                + "serial recovery with boot-mode entry (or enter recovery by hand, e.g. hold the button while resetting), then run the upgrade again")
        case (.validate, _):
            fail("the device has no image group: the image list answered rc 8 (\(description)). If it runs MCUboot in "
                + "single-application mode (its application has no image group), pass `--bootloader-mode single-app` to upgrade "
                + "through MCUboot's serial recovery")
        case (.verifying, .serialRecovery(.singleApplication)):
            // Serial recovery answers the image list; the single-application application does not.
            report.verified = (report.recoveryCheck ?? "") + "after the reset the application answers the image list with rc 8 (it has no "
                + "image group; serial recovery would list its slots), so MCUboot booted slot 0 (a single-application MCUboot "
                + "boots nothing else; the application cannot report its hash)"
            succeed()
        case (.checkingRecovery, _):
            fail("MCUboot's serial recovery stopped answering the image list (\(description)) after the upload; the new image "
                + "could not be checked. Run `smp image list` while the device is in serial recovery")
        default:
            return requestFailed(description, retriable: false, now: now)
        }
        return flush()
    }

    /// One image finished uploading.
    public mutating func uploadFinished(image: Int) -> [Action] {
        guard case .upload(var remaining) = state, let index = remaining.firstIndex(of: image) else { return [] }
        remaining.remove(at: index)
        if remaining.isEmpty {
            afterUpload()
        } else {
            state = .upload(remaining: remaining)
        }
        return flush()
    }

    /// A state write (test or confirm) succeeded; `slots` is the image list it returned.
    public mutating func stateWriteSucceeded(_ slots: [McuMgrImageStateResponse.ImageSlot]) -> [Action] {
        switch state {
        case .resolvingSecondary:
            go(.validate)
            request(.requestImageList)
        case .writing(var writes):
            let write = writes.removeFirst()
            switch write {
            case .test(let hash):
                if let slot = find(hash, in: slots), !slot.pending, !slot.active {
                    fail("image \(imageNumber(hash)) was marked for test but the device does not show it pending: "
                        + "check the image is valid for this device and slot, then run the upgrade again")
                    return flush()
                }
            case .confirm(let hash):
                if let slot = find(hash, in: slots), !(slot.permanent || slot.pending || (slot.active && slot.confirmed)) {
                    fail("image \(imageNumber(hash)) was confirmed but the device does not show it permanent: "
                        + "check the image is valid for this device and slot, then run the upgrade again")
                    return flush()
                }
            }
            if writes.isEmpty {
                afterWrites()
            } else {
                go(.writing(writes))
                request(action(for: writes[0]))
            }
        case .confirmingAfterReset(var hashes):
            let hash = hashes.removeFirst()
            if let slot = find(hash, in: slots), !slot.confirmed, !slot.permanent {
                fail("image \(imageNumber(hash)) was confirmed but the device does not show it confirmed: "
                    + "the device may have rejected the confirm; run `smp image list` and confirm it by hand")
                return flush()
            }
            if hashes.isEmpty {
                succeed()
            } else {
                go(.confirmingAfterReset(hashes))
                request(.confirmImage(hash: hashes[0]))
            }
        default:
            return []
        }
        return flush()
    }

    /// The application settings were erased.
    public mutating func eraseSettingsDone() -> [Action] {
        guard state == .eraseSettings else { return [] }
        report.settingsErased = true
        afterUpload()
        return flush()
    }

    /// Erasing the application settings failed; tolerated (many devices do not implement it).
    public mutating func eraseSettingsFailed(_ description: String) -> [Action] {
        guard state == .eraseSettings else { return [] }
        report.settingsErased = true
        report.notes.append("erasing the application settings failed (\(description)); continued")
        afterUpload()
        return flush()
    }

    /// The application stored the firmware loader's advertising name (settings write and save).
    public mutating func firmwareLoaderNameSet() -> [Action] {
        guard state == .namingLoader else { return [] }
        go(.reset(.enterBootloader))
        request(.reset(.bootloader))
        return flush()
    }

    /// The reset request was answered (or the link dropped while sending it, which a reset does).
    public mutating func resetSent(now: SMPInstant) -> [Action] {
        lastNow = now
        guard case .reset(let purpose) = state else { return [] }
        var wait = configuration.resetDelay
        if purpose != .enterBootloader, plan.flow.swapWait, configuration.estimatedSwapTime > wait {
            wait = configuration.estimatedSwapTime
        }
        let until = now + wait
        go(.waitForSwap(until: until, purpose))
        out.append(.waitUntil(until))
        return flush()
    }

    /// The link to the device is open again after a reset.
    public mutating func reconnected() -> [Action] {
        guard case .reconnecting(let deadline, _, let purpose) = state else { return [] }
        switch (purpose, plan.route) {
        case (.enterBootloader, .singleApplication):
            // MCUboot's serial recovery: one buffer, its own size (the driver asks it). Its image list shows
            // what slot 0 holds (an image already there needs only the reset that boots it).
            device.bufferSize = nil
            device.bufferCount = 1
            plan.route = .serialRecovery(.singleApplication)
            go(.validate)
            request(.requestImageList)
        case (.enterBootloader, .firmwareLoader):
            // The loader has its own, smaller buffer: one request at a time, and the application's buffer
            // size no longer applies (the driver asks the loader).
            device.bufferSize = nil
            startUpload(pipelineDepth: 1)
        case (.enterBootloader, .application), (.enterBootloader, .suit), (.enterBootloader, .serialRecovery):
            // Not reached: only the firmware-loader and single-application routes reset into a bootloader.
            // Should it ever be, the upgrade fails with a message rather than the process with a trap.
            fail("internal error: a reset into the bootloader on the \(plan.route) route, which never enters one; "
                + "please report it with the output of -v")
        case (.resolveSecondary, _):
            go(.validate)
            request(.requestImageList)
        case (.install, _):
            go(.verifying(deadline: deadline, retryAt: nil))
            request(.requestImageList)
        }
        return flush()
    }

    /// A request (or the upload, or a reconnect) failed. `retriable` errors (timeouts, busy) are
    /// resent up to `maximumRetries` times; others fail the upgrade unless the state tolerates them.
    public mutating func requestFailed(_ description: String, retriable: Bool, now: SMPInstant) -> [Action] {
        lastNow = now
        switch state {
        case .idle, .success, .failed, .cancelled, .waitForSwap:
            return []
        case .parameters:
            if !retry(retriable) {
                report.notes.append("MCUmgr parameters unavailable (\(description)); uploading without pipelining")
                device.bufferSize = nil
                device.bufferCount = 1
                askBootloader()
            }
        case .bootloaderInfo:
            if !retry(retriable) {
                device.mode = .unknown
                chooseFlowAndValidate()
            }
        case .eraseSettings:
            return eraseSettingsFailed(description)
        case .namingLoader:
            if !retry(retriable) {
                // Over serial or UDP the name does not matter; over Bluetooth LE the loader then advertises the
                // name it was built with (the fw_loader sample's CONFIG_BT_DEVICE_NAME "FW loader").
                let name = configuration.firmwareLoaderName ?? ""
                report.notes.append("the application did not store the firmware loader's advertising name \"\(name)\" (\(description)), "
                    + "so over Bluetooth LE the loader advertises the name it was built with (\"\(name)\" was looked for)")
                go(.reset(.enterBootloader))
                request(.reset(.bootloader))
            }
        case .reset:
            // The device may drop the link before its answer arrives; a reset is not undone by that.
            return resetSent(now: now)
        case .reconnecting(let deadline, _, let purpose):
            if now >= deadline {
                failNotBack()
            } else {
                let at = min(now + configuration.retryInterval, deadline)
                state = .reconnecting(deadline: deadline, retryAt: at, purpose)
                out.append(.waitUntil(at))
            }
        case .verifying(let deadline, _, let recoveryAnswered):
            if now >= deadline {
                failNotBack()
            } else {
                let at = min(now + configuration.retryInterval, deadline)
                state = .verifying(deadline: deadline, retryAt: at, recoveryAnswered: recoveryAnswered)
                out.append(.waitUntil(at))
            }
        case .upload(let remaining):
            let which = remaining.first.map { "image \($0)" } ?? "the image"
            var hint = ""
            if device.mode == .firmwareLoader {
                // Over serial or UDP an application that ignores boot_mode 1 answers in its loader's place, and
                // refuses to write its own slot.
                hint = " If the application answered instead of its firmware loader, it ignores the reset into the loader "
                    + "(boot_mode 1 needs CONFIG_MCUMGR_GRP_OS_RESET_BOOT_MODE and MCUboot's firmware loader entrance by boot mode)."
            }
            fail("uploading \(which) failed: \(description).\(hint) Run the upgrade again: the upload resumes from the device's offset")
        case .validate:
            if !retry(retriable) { fail("reading the image list failed: \(description). Check the connection and run the upgrade again") }
        case .checkingRecovery:
            if !retry(retriable) {
                fail("reading MCUboot's serial recovery image list after the upload failed: \(description). The image is uploaded; "
                    + "reset the device (`smp os reset`) to boot it")
            }
        case .resolvingSecondary:
            if !retry(retriable) {
                fail("confirming the running image (to free the secondary slot) failed: \(description). "
                    + "Confirm it by hand (`smp image confirm`) or erase the secondary slot, then run the upgrade again")
            }
        case .writing(let writes):
            if !retry(retriable) {
                let what: String
                switch writes[0] {
                case .test(let h): what = "marking image \(imageNumber(h)) for test"
                case .confirm(let h): what = "confirming image \(imageNumber(h))"
                }
                fail("\(what) failed: \(description). The image is uploaded; check it is signed for this device, then run the upgrade again")
            }
        case .confirmingAfterReset(let hashes):
            if !retry(retriable) {
                fail("confirming image \(imageNumber(hashes[0])) after the reset failed: \(description). "
                    + "It runs in test mode and will be reverted on the next reset unless confirmed (`smp image confirm`)")
            }
        }
        return flush()
    }

    /// The timer armed by the last `waitUntil` expired.
    public mutating func timerFired(now: SMPInstant) -> [Action] {
        lastNow = now
        switch state {
        case .waitForSwap(let until, let purpose):
            guard now >= until else { return [] }
            let deadline = now + configuration.reconnectTimeout
            go(.reconnecting(deadline: deadline, retryAt: nil, purpose))
            out.append(reconnectAction(purpose))
            out.append(.waitUntil(deadline))
        case .reconnecting(let deadline, let retryAt, let purpose):
            if now >= deadline {
                failNotBack()
            } else if let retryAt, now >= retryAt {
                state = .reconnecting(deadline: deadline, retryAt: nil, purpose)
                out.append(reconnectAction(purpose))
                out.append(.waitUntil(deadline))
            } else {
                return []
            }
        case .verifying(let deadline, let retryAt, let recoveryAnswered):
            if now >= deadline {
                failNotBack()
            } else if let retryAt, now >= retryAt {
                state = .verifying(deadline: deadline, retryAt: nil, recoveryAnswered: recoveryAnswered)
                out.append(.requestImageList)
                out.append(.waitUntil(deadline))
            } else {
                return []
            }
        default:
            return []
        }
        return flush()
    }

    /// Holds the machine before its next action; the answer to the request in flight is kept.
    public mutating func pause() -> [Action] {
        guard !isTerminal, !isPaused else { return [] }
        isPaused = true
        if case .upload = state { return [.pauseUpload] }
        return []
    }

    /// Continues after `pause()`: returns the actions held meanwhile.
    public mutating func resume() -> [Action] {
        guard isPaused else { return [] }
        isPaused = false
        var actions: [Action] = []
        if case .upload = state, !held.contains(where: { if case .upload = $0 { true } else { false } }) {
            actions.append(.resumeUpload)
        }
        actions += held
        held.removeAll()
        return actions
    }

    /// Fails the upgrade for a reason the driver found (e.g. a resource the package lacks, a reset the
    /// device refused); `message` says what to do. No device actions follow.
    public mutating func abort(_ message: String) -> [Action] {
        guard !isTerminal else { return [] }
        held.removeAll()
        isPaused = false
        fail(message)
        return flush()
    }

    /// Cancels the upgrade: no device actions follow.
    public mutating func cancel() -> [Action] {
        guard !isTerminal else { return [] }
        held.removeAll()
        isPaused = false
        go(.cancelled)
        out.append(.cancelled)
        return flush()
    }

    /// Whether the upgrade is over (success, failed or cancelled).
    public var isTerminal: Bool { state == .success || state == .failed || state == .cancelled }

    // MARK: - Helpers

    func action(for write: Write) -> Action {
        switch write {
        case .test(let hash): .testImage(hash: hash)
        case .confirm(let hash): .confirmImage(hash: hash)
        }
    }

    private func find(_ hash: [UInt8], in slots: [McuMgrImageStateResponse.ImageSlot]) -> McuMgrImageStateResponse.ImageSlot? {
        slots.first { $0.hash.map(Array.init) == hash }
    }

    private func imageNumber(_ hash: [UInt8]) -> Int {
        images.first { Array($0.hash) == hash }?.image ?? 0
    }

    mutating func request(_ action: Action) {
        resend = Resend(action: action, retriesLeft: configuration.maximumRetries)
        out.append(action)
    }

    private mutating func retry(_ retriable: Bool) -> Bool {
        guard retriable, var resend, resend.retriesLeft > 0 else { return false }
        resend.retriesLeft -= 1
        self.resend = resend
        out.append(resend.action)
        return true
    }

    mutating func succeed() {
        let uploaded = plan.targets.filter(\.needsUpload).map(\.image.image)
        if case .serialRecovery(.singleApplication) = plan.route, report.verified == nil, let recoveryCheck = report.recoveryCheck {
            // Ended before the application could answer (upload-only, no reset).
            report.verified = recoveryCheck + "the device was not reset: MCUboot boots slot 0 on the next reset"
        }
        var summary = FirmwareUpgradeSummary(
            mode: configuration.upgradeMode, bootloaderMode: device.mode, uploadedImages: uploaded,
            skippedImages: plan.skipped, didReset: report.didReset, notes: report.notes)
        summary.serialRecovery = isSerialRecovery
        summary.verified = report.verified
        go(.success)
        out.append(.finished(summary))
    }

    mutating func fail(_ message: String) {
        let failure = FirmwareUpgradeFailure(state: published, message: message)
        go(.failed)
        out.append(.failed(failure))
    }

    mutating func go(_ next: State) {
        state = next
        let now = publicState(next)
        if now != published {
            out.append(.notify(FirmwareUpgradeStateChange(previous: published, current: now)))
            published = now
        }
    }

    private func publicState(_ state: State) -> FirmwareUpgradeState {
        switch state {
        case .namingLoader: .resetIntoFirmwareLoader
        case .reset(.enterBootloader) where plan.route == .firmwareLoader: .resetIntoFirmwareLoader
        case .idle: .none
        case .parameters: .requestMcuMgrParameters
        case .bootloaderInfo: .bootloaderInfo
        case .validate, .resolvingSecondary: .validate
        case .upload, .checkingRecovery: .upload
        case .eraseSettings: .eraseAppSettings
        case .writing(let writes):
            if case .some(.test) = writes.first { .test } else { .confirm }
        case .reset: .reset
        case .waitForSwap, .reconnecting, .verifying: .reconnect
        case .confirmingAfterReset: .confirm
        case .success: .success
        case .failed: .failed
        case .cancelled: .cancelled
        }
    }

    /// Returns the gathered actions; while paused, everything but notifications is held.
    private mutating func flush() -> [Action] {
        defer { out.removeAll() }
        guard isPaused else { return out }
        var passed: [Action] = []
        for action in out {
            if case .notify = action { passed.append(action) } else { held.append(action) }
        }
        return passed
    }
}
