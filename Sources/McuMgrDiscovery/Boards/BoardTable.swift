/// The board table: the built-in entries below, plus the user's rules (which win).
public struct BoardTable: Sendable {
    /// The user's rules, checked first.
    public var userRules: [BoardRule]
    /// The built-in rules.
    public var builtInRules: [BoardRule]

    public init(userRules: [BoardRule] = [], builtInRules: [BoardRule] = KnownBoards.rules) {
        self.userRules = userRules
        self.builtInRules = builtInRules
    }

    /// The most specific matching user rule, else the most specific built-in one; for a CDC-ACM port that
    /// no rule names, a generic entry.
    public func match(_ usb: USBSerialInfo, driver: String?) -> BoardMatch? {
        if let rule = Self.best(userRules, usb) { return BoardMatch(rule: rule, fromUserRules: true) }
        if let rule = Self.best(builtInRules, usb) { return BoardMatch(rule: rule, fromUserRules: false) }
        if driver == "cdc_acm" {
            // Most USB CDC-ACM devices that are not probes are the target's own USB.
            let generic = BoardRule(
                vendorID: usb.vendorID, name: "USB CDC-ACM device", kind: .board, smp: .possible,
                role: "a CDC-ACM serial port not in the board table")
            return BoardMatch(rule: generic, fromUserRules: false)
        }
        return nil
    }

    private static func best(_ rules: [BoardRule], _ usb: USBSerialInfo) -> BoardRule? {
        var best: BoardRule?
        for rule in rules where rule.matches(usb) {
            if best == nil || rule.specificity > best!.specificity { best = rule }
        }
        return best
    }
}
