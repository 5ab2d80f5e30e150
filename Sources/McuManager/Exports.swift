// What `import McuManager` brings from McuMgrCore, the pure protocol core, and from swift-log.
//
// The rule: every type of another module that McuManager's public API takes, returns or exposes (and
// the core types those types' own public members use) is re-exported by name, so that one
// `import McuManager` and the transport's module compile any use of this library's API, also with the
// upcoming feature MemberImportVisibility (members visible only through imported modules). Nothing
// else is: the framing codecs, the CBOR reader, writer, encoder and decoder, the session, upload and
// firmware-upgrade state machines and the checksums stay in McuMgrCore, for transport authors and
// tests that `import McuMgrCore` themselves. `Tests/McuManagerTests/Exports/PublicSurfaceTests.swift`
// (which imports McuManager alone) names each of these; the consumer package of
// `Scripts/consumer-test.sh` shows that they work from another package.

// Firmware upgrades: FirmwareUpgradeManager's configuration, states and summary.
@_exported import struct McuMgrCore.FirmwareUpgradeConfiguration
@_exported import enum McuMgrCore.FirmwareUpgradeMode
@_exported import struct McuMgrCore.BootloaderMode
@_exported import enum McuMgrCore.FirmwareUpgradeState
@_exported import struct McuMgrCore.FirmwareUpgradeSummary
@_exported import struct McuMgrCore.FirmwareUpgradeImage

// Requests and answers: the numbers every request names (custom groups define their own), the device's
// return codes and group errors in `McuMgrError`, the packets `McuMgrClient` and upload targets read.
@_exported import struct McuMgrCore.McuMgrGroup
@_exported import struct McuMgrCore.McuMgrCommand
@_exported import enum McuMgrCore.SMPOperation
@_exported import enum McuMgrCore.SMPVersion
@_exported import struct McuMgrCore.McuMgrReturnCode
@_exported import struct McuMgrCore.McuMgrGroupError
@_exported import enum McuMgrCore.SMPResponseStatus
@_exported import struct McuMgrCore.SMPPacket
@_exported import struct McuMgrCore.SMPHeader
@_exported import enum McuMgrCore.CBOR
@_exported import struct McuMgrCore.CBORMapEntry
@_exported import struct McuMgrCore.McuMgrImageStateResponse

// Images: the MCUboot version of an image header (also what the simulator builds images with).
@_exported import struct McuMgrCore.McuMgrImageVersion

// The link: session settings (`McuMgrClient.Configuration`), what a transport reports about its link.
@_exported import struct McuMgrCore.SMPSessionConfiguration
@_exported import struct McuMgrCore.LinkLimits
@_exported import enum McuMgrCore.SMPFramingDrop

// Logging: the `Logger` the managers and the client take, and `FirmwareUpgradeLogEntry.level`.
@_exported import struct Logging.Logger
