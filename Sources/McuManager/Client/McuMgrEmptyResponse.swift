import McuMgrCore

/// A response without fields (`{}`), or whose fields the caller does not need.
public struct McuMgrEmptyResponse: Decodable, Sendable, Hashable {
    public init() {}
    public init(from decoder: any Decoder) throws {}
}
