/// What the board table says about one serial port.
public struct BoardMatch: Sendable, Hashable {
    public var name: String
    public var kind: BoardRule.Kind
    public var smp: BoardRule.SMPHint
    public var role: String?
    public var followsResets: Bool
    /// True when the match came from the user's own rules.
    public var fromUserRules: Bool

    public init(rule: BoardRule, fromUserRules: Bool) {
        name = rule.name
        kind = rule.kind
        smp = rule.smp
        role = rule.role
        followsResets = rule.followsResets
        self.fromUserRules = fromUserRules
    }
}
