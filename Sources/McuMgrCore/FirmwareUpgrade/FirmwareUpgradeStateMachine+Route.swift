extension FirmwareUpgradeStateMachine {
    /// Which way the images reach the device: who writes them, and what shows they were installed. Chosen
    /// once after bootloader info (`chooseFlowAndValidate`); revised when MCUboot's serial recovery answers
    /// instead of the application. The event handlers switch on it with the state; `Flow` says how the
    /// bootloader installs what was written.
    enum Route: Sendable, Hashable {
        /// The application writes a slot it does not run from through its image group, and a reset installs
        /// it (swap, overwrite, Direct-XIP, RAM load, single-slot RAM load, or a mode not known yet).
        case application
        /// A SUIT envelope (and its cache images) go up through the application; the device installs and
        /// reboots by itself.
        case suit
        /// Nordic's firmware loader (MCUboot mode 7): the application cannot write its own slot, so it resets
        /// into the loader (boot_mode 1), which takes the upload into slot 0; a normal reset boots it.
        case firmwareLoader
        /// MCUboot's single-application mode while its application answers: it has no image group (or cannot
        /// write its own slot), so it resets into serial recovery (boot_mode 1) before the upload.
        case singleApplication
        /// MCUboot's serial recovery answers: the images go to slot 0 with no state writes (MCUboot has
        /// neither test nor confirm there), and a reset boots them.
        case serialRecovery(Recovery)

        /// How the device came to answer from serial recovery.
        enum Recovery: Sendable, Hashable {
            /// Nothing was known of the bootloader (no bootloader info, no mode given) and the image list had
            /// no active slot: no application runs.
            case modeUnknown
            /// Single-application MCUboot, reset into recovery or found there: recovery's image list checks
            /// slot 0 after the upload, and after the reset the application's rc 8 to the image list shows it runs.
            case singleApplication
        }

        /// A bootloader writes slot 0 in the application's place (the firmware loader, or single-application
        /// MCUboot's serial recovery, entered from the application or found answering): the reset that boots
        /// slot 0 follows the upload, or the validation when the image is already there. A device found in
        /// serial recovery with no mode known takes that reset straight after an upload only (with nothing
        /// uploaded it resets after its empty state writes).
        var entersBootloaderFirst: Bool {
            switch self {
            case .firmwareLoader, .singleApplication, .serialRecovery(.singleApplication): true
            case .application, .suit, .serialRecovery(.modeUnknown): false
            }
        }
    }
}
