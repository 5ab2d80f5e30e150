// swift-tools-version:6.0
import PackageDescription

/// What every target that does I/O over SwiftNIO (transports, simulator front ends) builds on.
let ioTargetDependencies: [Target.Dependency] = [
    "McuManager", "McuMgrCore",
    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "Logging", package: "swift-log"),
]

/// The README's library examples as programs (Sources/Examples/NAME): each imports `McuManager` and the
/// transport it needs, as a user's package does; the end-to-end tests run them against smp-sim.
let examples: [Target] = [
    ("example-udp-upgrade", "UDPUpgrade", ["McuMgrUDP"]),
    ("example-serial-upgrade", "SerialUpgrade", ["McuMgrSerial"]),
    ("example-udp-fleet", "UDPFleetQuery", ["McuMgrUDP"]),
    ("example-ble-upload", "BLEUpload", ["McuMgrBLE"]),
    ("example-file-transfer", "FileTransfer", ["McuMgrSerial", "McuMgrUDP"]),
].map { name, directory, transports in
    .executableTarget(
        name: name, dependencies: ["McuManager"] + transports.map { .target(name: $0) },
        path: "Sources/Examples/\(directory)")
}

/// How the executables link on Linux. The toolchain's static-stdlib link exports every symbol of the
/// program's own objects (`-export-dynamic`), which keeps `--gc-sections` from dropping any public
/// function of ours or of our dependencies and adds 20,000 dynamic symbols: a stripped static `smp`
/// is 2.6 MB smaller without it. Nothing looks symbols up in the executable at run time.
let executableLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(platforms: [.linux]))
]

let package = Package(
    name: "McuManager",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "McuMgrCore", targets: ["McuMgrCore"]),
        .library(name: "McuManager", targets: ["McuManager"]),
        .library(name: "McuMgrSerial", targets: ["McuMgrSerial"]),
        .library(name: "McuMgrUDP", targets: ["McuMgrUDP"]),
        .library(name: "McuMgrSimulator", targets: ["McuMgrSimulator"]),
        .library(name: "McuMgrBLE", targets: ["McuMgrBLE"]),
        .executable(name: "smp", targets: ["smp"]),
        .executable(name: "smp-sim", targets: ["smp-sim"]),
        .library(name: "McuMgrDiscovery", targets: ["McuMgrDiscovery"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
    ],
    targets: [
        // Pure protocol core: no I/O, no clocks, no threads.
        .target(name: "McuMgrCore"),
        // Client runtime: transport protocol, client actor, managers, transfers.
        .target(
            name: "McuManager",
            dependencies: [
                "McuMgrCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "CZlibSystem",
            ]
        ),
        // zlib (system library) for the zip reader of firmware packages.
        .systemLibrary(name: "CZlibSystem", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "McuMgrSerial",
            dependencies: ioTargetDependencies
        ),
        .target(
            name: "McuMgrUDP",
            dependencies: ioTargetDependencies
        ),
        .target(
            name: "McuMgrSimulator",
            dependencies: ioTargetDependencies
        ),
        .executableTarget(
            name: "smp",
            dependencies: [
                "McuManager", "McuMgrCore", "McuMgrSerial", "McuMgrUDP", "McuMgrSimulator",
                "McuMgrDiscovery",
                "McuMgrBLE",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            linkerSettings: executableLinkerSettings
        ),
        .executableTarget(
            name: "smp-sim",
            dependencies: [
                "McuMgrSimulator", "McuMgrCore", "McuManager",
                "McuMgrBLE",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            linkerSettings: executableLinkerSettings
        ),
        // Helpers shared by the test targets (locating the Python reference implementations, the
        // framing verifier).
        .target(name: "TestSupport", dependencies: ["McuMgrCore"], path: "Tests/TestSupport"),
        .testTarget(name: "McuMgrCoreTests", dependencies: ["McuMgrCore", "TestSupport"], exclude: ["Fixtures"]),
        .testTarget(
            name: "McuManagerTests",
            dependencies: [
                "McuManager", "McuMgrCore", "McuMgrSerial", "McuMgrUDP", "McuMgrSimulator", "TestSupport",
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "McuMgrCore", "McuManager", "McuMgrSimulator", .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                "TestSupport",
            ]),
        .testTarget(
            name: "HardwareTests",
            dependencies: ["McuManager", "McuMgrCore", "McuMgrSerial", "McuMgrUDP", "McuMgrDiscovery", "McuMgrBLE"],
            path: "HardwareTests"
        ),
        // libudev (system library) for serial device discovery.
        .systemLibrary(name: "CUdev", pkgConfig: "libudev", providers: [.apt(["libudev-dev"])]),
        // Finds SMP devices (udev: USB serial ports, known boards, hotplug) and resolves discovery filters.
        .target(
            name: "McuMgrDiscovery",
            dependencies: [
                "CUdev", "McuManager", "McuMgrCore", "McuMgrSerial",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "McuMgrDiscoveryTests", dependencies: ["McuMgrDiscovery", "McuManager", "TestSupport"]),
        // Bluetooth LE through BlueZ over D-Bus: libdbus-1, a small Swift D-Bus layer, the BlueZ
        // client transport and the GATT peripheral the simulator serves through.
        .systemLibrary(
            // libdbus-1's types alone: the library is loaded when first used (McuMgrDBus/LibDBus.swift).
            name: "CDBus", path: "Sources/CDBus"),
        .target(
            name: "McuMgrDBus",
            dependencies: [
                "CDBus", "McuManager", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .target(
            name: "McuMgrBLE",
            dependencies: [
                "McuMgrDBus", "McuManager", "McuMgrCore", .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "McuMgrBLETests",
            dependencies: ["McuMgrBLE", "McuMgrDBus", "McuManager", "McuMgrCore", "McuMgrSimulator", "TestSupport"]
        ),
    ] + examples,
    swiftLanguageModes: [.v6]
)
