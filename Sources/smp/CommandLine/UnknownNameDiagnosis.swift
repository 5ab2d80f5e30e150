import ArgumentParser

/// Names a misspelled group or command and suggests the nearest known one. The argument parser itself
/// reports the first token it cannot place, which is often another one: `smp --device X stats list`
/// would answer "Unknown option '--device'" because no group named `stats` took the option.
enum UnknownNameDiagnosis {
    /// The message for the first group or command name in `arguments` (as `GlobalOptionPlacement`
    /// leaves them: names first) that `root` does not know, or nil when every name is known.
    static func message(for arguments: [String], root: ParsableCommand.Type = SMP.self) -> String? {
        var command = root
        var path = [root._commandName]
        for token in arguments {
            if token == "--" || token.hasPrefix("-") { return nil }
            let subcommands = command.configuration.subcommands
            if subcommands.isEmpty { return nil }  // a leaf: the rest are its arguments
            if let next = subcommands.first(where: { names(of: $0).contains(token) }) {
                command = next
                path.append(token)
                continue
            }
            if path.count == 1, token == "help" { return nil }  // ArgumentParser's own `smp help GROUP`
            return describe(unknown: token, path: path, known: subcommands.map { $0._commandName }, root: root)
        }
        return nil
    }

    private static func describe(unknown token: String, path: [String], known: [String], root: ParsableCommand.Type) -> String {
        let isGroup = path.count == 1
        var message = isGroup ? "unknown group '\(token)'" : "unknown command '\(token)' in `\(path.joined(separator: " "))`"
        if let nearest = nearest(to: token, in: known) {
            message += "; did you mean '\(nearest)'?"
        } else if isGroup, let owner = groupHolding(command: token, root: root) {
            message += "; '\(token)' is a command of a group: did you mean `\(path[0]) \(owner) \(token)`?"
        }
        message += " \(isGroup ? "Groups" : "Commands"): \(known.joined(separator: ", ")). "
        message += "See `\(path.joined(separator: " ")) --help`."
        return message
    }

    /// The group of `root` that has a command named `name`, when exactly one has.
    private static func groupHolding(command name: String, root: ParsableCommand.Type) -> String? {
        let owners = root.configuration.subcommands.filter { group in
            group.configuration.subcommands.contains { names(of: $0).contains(name) }
        }
        return owners.count == 1 ? owners[0]._commandName : nil
    }

    private static func names(of command: ParsableCommand.Type) -> [String] {
        [command._commandName] + command.configuration.aliases
    }

    /// The known name closest to `token`: within an edit distance of a third of the longer name (at
    /// least 1, at most 3; a swap of two neighbouring letters counts once), or one that starts with
    /// `token` (three letters or more). Nil when nothing is that close.
    static func nearest(to token: String, in known: [String]) -> String? {
        let typed = token.lowercased()
        var best: (name: String, distance: Int)?
        for name in known {
            let distance = editDistance(typed, name.lowercased())
            let limit = min(3, max(1, max(typed.count, name.count) / 3))
            let close = distance <= limit || (typed.count >= 3 && name.lowercased().hasPrefix(typed))
            if close, best == nil || distance < best!.distance { best = (name, distance) }
        }
        return best?.name
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    /// neighbouring characters each count 1.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
