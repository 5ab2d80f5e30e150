/// An MCUboot image version (`struct image_version`): major.minor.revision+build.
public struct McuMgrImageVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `iv_major`.
    public var major: UInt8
    /// `iv_minor`.
    public var minor: UInt8
    /// `iv_revision`.
    public var revision: UInt16
    /// `iv_build_num`.
    public var build: UInt32

    public init(major: UInt8, minor: UInt8 = 0, revision: UInt16 = 0, build: UInt32 = 0) {
        self.major = major
        self.minor = minor
        self.revision = revision
        self.build = build
    }

    /// Parses imgtool's notation: "1", "1.2", "1.2.3" or "1.2.3+4"; nil if malformed or out of range.
    public init?(_ text: String) {
        let parts = text.split(separator: "+", maxSplits: 1, omittingEmptySubsequences: false)
        let numbers = parts[0].split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(numbers.count),
            let major = UInt8(numbers[0]),
            let minor = numbers.count > 1 ? UInt8(numbers[1]) : 0,
            let revision = numbers.count > 2 ? UInt16(numbers[2]) : 0,
            let build = parts.count > 1 ? UInt32(parts[1]) : 0
        else { return nil }
        self.init(major: major, minor: minor, revision: revision, build: build)
    }

    /// "1.2.3+4", or "1.2.3" when the build number is 0 (as imgtool writes versions).
    public var description: String {
        let base = "\(major).\(minor).\(revision)"
        return build == 0 ? base : "\(base)+\(build)"
    }

    /// `major.minor.revision`, plus `.build` only when the build number is not 0: how Zephyr's image
    /// group writes the `version` of an image list entry ("1.2.3.4").
    public var imageListText: String {
        "\(major).\(minor).\(revision)" + (build != 0 ? ".\(build)" : "")
    }

    /// Whether this version is older than `other` by major, minor and revision alone: how MCUboot and
    /// Zephyr's image group compare versions unless built to use the build number
    /// (`MCUBOOT_VERSION_CMP_USE_BUILD_NUMBER`, `CONFIG_MCUMGR_GRP_IMG_VERSION_CMP_USE_BUILD_NUMBER`).
    public func isOlderIgnoringBuild(than other: Self) -> Bool {
        (major, minor, revision) < (other.major, other.minor, other.revision)
    }

    /// Compares major, minor, revision, then build (MCUboot's order when it compares build numbers).
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.major, lhs.minor, lhs.revision, lhs.build) < (rhs.major, rhs.minor, rhs.revision, rhs.build)
    }
}
