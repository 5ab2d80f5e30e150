/// An MCUboot image version (`struct image_version`): major.minor.revision+build.
public struct SimulatorImageVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var major: UInt8
    public var minor: UInt8
    public var revision: UInt16
    public var build: UInt32

    public init(_ major: UInt8, _ minor: UInt8, _ revision: UInt16, build: UInt32 = 0) {
        self.major = major
        self.minor = minor
        self.revision = revision
        self.build = build
    }

    /// `major.minor.revision`, plus `.build` only when build ≠ 0, as Zephyr's image list shows it.
    public var description: String {
        "\(major).\(minor).\(revision)" + (build != 0 ? ".\(build)" : "")
    }

    /// Compares major.minor.revision only (Zephyr's default for the `upgrade` check).
    public static func < (a: Self, b: Self) -> Bool {
        (a.major, a.minor, a.revision) < (b.major, b.minor, b.revision)
    }
}
