/// Limits for a file download.
public struct FileDownloadConfiguration: Sendable, Hashable {
    /// The largest file accepted, in bytes: a device that announces more is refused before anything is
    /// written (default 64 MiB).
    public var maximumLength: Int
    /// Give up when no data arrived for this long; requests that timed out or met a busy device are
    /// repeated until then (default 30 s).
    public var stallTimeout: Duration
    /// Give up when the whole download takes longer; nil: no limit.
    public var deadline: Duration?

    /// Creates a configuration.
    public init(
        maximumLength: Int = 64 * 1024 * 1024, stallTimeout: Duration = McuMgrTimeouts().downloadStall, deadline: Duration? = nil
    ) {
        self.maximumLength = max(0, maximumLength)
        self.stallTimeout = stallTimeout
        self.deadline = deadline
    }
}
