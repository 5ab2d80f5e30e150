/// The last component of a `/`-separated path, trailing slashes ignored: `a/b.zip` -> `b.zip`,
/// `a/b/` -> `b`, `/` -> `/`, `` -> `` (as `NSString.lastPathComponent`, without Foundation).
package func lastPathComponent(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    if trimmed == "/" { return "/" }
    guard let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
    return String(trimmed[trimmed.index(after: slash)...])
}

/// The extension of a path's last component, without its dot: `a/b.tar.zip` -> `zip`; empty when the
/// component has no dot or only a leading one (`.bin`) (as `NSString.pathExtension`, without Foundation).
package func pathExtension(of path: String) -> String {
    let name = lastPathComponent(of: path)
    guard let dot = name.lastIndex(of: "."), dot != name.startIndex, name != "/" else { return "" }
    return String(name[name.index(after: dot)...])
}
