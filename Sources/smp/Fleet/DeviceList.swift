import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuManager
import McuMgrDiscovery

/// The devices a command line names: every `--device`, then the lines of `--devices FILE`; `$SMP_DEVICE`
/// when neither is given.
enum DeviceList {
    /// The commands that work on many devices at once, for help and error texts.
    static let fleetCommands = "smp dfu, smp image upload, smp fs upload, smp os echo and smp os reset"

    /// The device texts given, in order.
    /// - Throws: `McuMgrError` of kind `.file` when the `--devices` file cannot be read.
    /// `texts(options)`, or a reported error and the exit code for it (a `--devices` file that cannot be read).
    static func textsOrExit(_ options: GlobalOptions) throws -> [String] {
        do {
            return try texts(options)
        } catch let error as McuMgrError {
            CommandRunner.report(error, json: options.json)
            throw ExitCode(ExitStatus.code(for: error.kind))
        }
    }

    static func texts(_ options: GlobalOptions) throws -> [String] {
        var texts = options.device.map { $0.trimmedForList }
        if let file = options.devicesFile {
            texts += entries(in: try read(file))
        }
        if texts.isEmpty, options.devicesFile == nil,
            let environment = ProcessInfo.processInfo.environment["SMP_DEVICE"], !environment.isEmpty
        {
            texts = [environment]
        }
        return texts
    }

    /// Whether the command line asks for a multi-device run: several devices, a `--devices` file (even of
    /// one line: scripts get the same output whatever the file holds), or a filter with `all`.
    static func isFleet(_ options: GlobalOptions, texts: [String]) -> Bool {
        options.devicesFile != nil || texts.count > 1 || texts.contains(where: selectsAll)
    }

    /// Whether `text` is a discovery filter with `all`.
    static func selectsAll(_ text: String) -> Bool {
        guard SerialDeviceFilter.isFilter(text), let filter = try? SerialDeviceFilter(parsing: text) else { return false }
        return filter.selectsAll
    }

    /// The one device of a single-device command (nil: none given; the resolver says what to do).
    /// - Throws: `McuMgrError` of kind `.usage` when several devices (or a filter with `all`) are given.
    static func single(_ options: GlobalOptions) throws -> String? {
        let texts = try texts(options)
        guard !isFleet(options, texts: texts) else {
            let what = texts.count > 1 ? "\(texts.count) devices were given" : texts.contains(where: selectsAll)
                ? "\(texts.first(where: selectsAll)!) selects every matching board" : "--devices was given"
            throw McuMgrError(
                .usage,
                "this command works on one device, but \(what); the commands that take many devices are \(fleetCommands) (give one --device for the others)")
        }
        return texts.first
    }

    /// The device URIs in a `--devices` file's text: one per line; blank lines and comments (from `#` at
    /// the start of a line or after a blank) left out.
    static func entries(in text: String) -> [String] {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).compactMap { line in
            var content = Substring(line)
            if content.hasPrefix("#") {
                content = ""
            } else if let comment = content.firstRange(of: " #") ?? content.firstRange(of: "\t#") {
                content = content[..<comment.lowerBound]
            }
            let entry = String(content).trimmedForList
            return entry.isEmpty ? nil : entry
        }
    }

    /// What was read from standard input (it can be read once; the list is asked for more than once).
    private static let standardInput = LockedBox<String?>(nil)

    /// The text of `path`, or of standard input for `-`.
    private static func read(_ path: String) throws -> String {
        if path == "-" {
            if let text = standardInput.value { return text }
            var lines: [String] = []
            while let line = readLine() { lines.append(line) }
            let text = lines.joined(separator: "\n")
            standardInput.set(text)
            return text
        }
        let url = try LocalFiles.readable(path)
        do {
            return String(decoding: try Data(contentsOf: url), as: UTF8.self)
        } catch {
            throw McuMgrError(.file, "cannot read the device list \(path): \(describeFileError(error))")
        }
    }

    /// What makes two URIs the same device: the serial port (links resolved), the UDP host and port, a
    /// `sim:` URI with its options, or another URI without its options.
    static func identity(_ uri: McuMgrDeviceURI) -> String {
        if uri.scheme == .serial {
            var path = uri.target
            if let resolved = realpath(uri.target, nil) {
                path = String(cString: resolved)
                free(resolved)
            }
            return "serial:" + path
        }
        if uri.scheme == .udp {
            return "udp:[\(uri.target.lowercased())]:\(uri.port ?? McuMgrDeviceURI.defaultUDPPort)"
        }
        if uri.scheme == .sim {
            return uri.description  // every sim: is a device of its own; its options tell them apart
        }
        return McuMgrDeviceURI(scheme: uri.scheme, target: uri.target, port: uri.port).description.lowercased()
    }

    /// The first device given twice, as its two names; `targets` pairs each name with its ``identity(_:)``.
    static func duplicate(in targets: [(name: String, key: String)]) -> (String, String)? {
        var seen: [String: String] = [:]
        for target in targets {
            if let first = seen[target.key] { return (first, target.name) }
            seen[target.key] = target.name
        }
        return nil
    }
}

extension String {
    /// Without leading and trailing blanks.
    fileprivate var trimmedForList: String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
