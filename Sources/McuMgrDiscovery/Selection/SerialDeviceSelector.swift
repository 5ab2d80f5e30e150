import Logging
import McuManager

/// Resolves a discovery filter (`auto`, `usb:...`) to one serial port: the only match; or, when several
/// match, the only one that answers an SMP probe; else a clear error listing the candidates.
public struct SerialDeviceSelector: Sendable {
    public var discovery: SerialDeviceDiscovery
    public var prober: SerialDeviceProber

    public init(discovery: SerialDeviceDiscovery = SerialDeviceDiscovery(), prober: SerialDeviceProber = SerialDeviceProber()) {
        self.discovery = discovery
        self.prober = prober
    }

    /// The ports present and those `filter` matches; waits up to the filter's `wait` for a first match.
    private func matches(_ filter: SerialDeviceFilter) async throws -> (all: [SerialDevice], candidates: [SerialDevice]) {
        var all = discovery.devices()
        var candidates = all.filter(filter.matches)
        if candidates.isEmpty, filter.wait > .zero {
            discovery.logger.debug("no device matches \(filter) yet; waiting up to \(filter.wait)")
            if let device = try await waitForMatch(filter) {
                all = discovery.devices()
                candidates = all.filter(filter.matches)
                if candidates.isEmpty { candidates = [device] }
            }
        }
        return (all, candidates)
    }

    /// - Throws: `McuMgrError`: `.transport` when nothing (or nothing unambiguous) matches, listing what was
    ///   found and what to pass instead.
    public func select(_ filter: SerialDeviceFilter) async throws -> SerialDeviceSelection {
        let (all, candidates) = try await matches(filter)
        switch candidates.count {
        case 0:
            throw McuMgrError(.transport, Self.noMatchMessage(filter, all: all))
        case 1:
            return SerialDeviceSelection(device: candidates[0], uri: filter.uri(for: candidates[0]), reason: "the only match")
        default:
            let results = await prober.probe(candidates)
            let answering = results.filter(\.answered)
            if answering.count == 1 {
                let device = answering[0].device
                return SerialDeviceSelection(
                    device: device, uri: filter.uri(for: device),
                    reason: "the only one of \(candidates.count) matches that answered SMP")
            }
            throw McuMgrError(.transport, Self.ambiguousMessage(filter, results: results))
        }
    }

    /// Every port `filter` matches, for commands that work on many devices (a filter with `all`): waits up
    /// to the filter's `wait` for the first one to appear; `auto` keeps only the ports that answer an SMP
    /// probe (it matches any port), a `usb:` filter keeps every match.
    /// - Throws: `McuMgrError` of kind `.transport` when nothing matches (or, for `auto`, nothing answers),
    ///   listing what was found.
    public func selectAll(_ filter: SerialDeviceFilter) async throws -> [SerialDeviceSelection] {
        let (all, candidates) = try await matches(filter)
        guard !candidates.isEmpty else { throw McuMgrError(.transport, Self.noMatchMessage(filter, all: all)) }
        guard filter.isAuto else {
            return candidates.map {
                SerialDeviceSelection(device: $0, uri: filter.uri(for: $0), reason: "one of the \(candidates.count) matches")
            }
        }
        let results = await prober.probe(candidates)
        let answering = results.filter(\.answered)
        guard !answering.isEmpty else { throw McuMgrError(.transport, Self.ambiguousMessage(filter, results: results)) }
        return answering.map {
            SerialDeviceSelection(
                device: $0.device, uri: filter.uri(for: $0.device),
                reason: "one of the \(answering.count) of \(candidates.count) ports that answered SMP")
        }
    }

    /// Waits (up to the filter's `wait`) for a matching port to appear.
    private func waitForMatch(_ filter: SerialDeviceFilter) async throws -> SerialDevice? {
        let monitor = SerialDeviceMonitor(discovery: discovery, rescanInterval: .milliseconds(250))
        return try await withThrowingTaskGroup(of: SerialDevice?.self) { group in
            group.addTask {
                for await event in monitor.events(includingPresent: true)
                where event.kind == .added && filter.matches(event.device) {
                    return event.device
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: filter.wait)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    static func noMatchMessage(_ filter: SerialDeviceFilter, all: [SerialDevice]) -> String {
        var message: String
        if filter.isAuto {
            message = all.isEmpty
                ? "auto: no serial devices found; connect a board (check the cable and `dmesg`), or pass --device serial:/dev/ttyX, udp:HOST or sim:"
                : "auto: none of the serial devices found is an SMP candidate"
        } else {
            message = "no serial device matches \(filter)"
            if filter.wait > .zero { message += " (waited \(filter.wait))" }
            message += all.isEmpty ? "; no USB serial devices are present: check the cable and `dmesg`" : ""
        }
        if !all.isEmpty {
            message += "; found: " + all.map(describe).joined(separator: "; ")
            message += " (see `smp devices`)"
        }
        return message
    }

    static func ambiguousMessage(_ filter: SerialDeviceFilter, results: [SerialProbeResult]) -> String {
        let answering = results.filter(\.answered)
        let head: String
        if answering.isEmpty {
            head = "\(filter): \(results.count) serial devices match and none answered SMP"
        } else {
            head = "\(filter): \(answering.count) of the \(results.count) matching serial devices answered SMP; say which one"
        }
        let list = results.map { "\(describe($0.device)) [\($0.summary)]" }.joined(separator: "; ")
        let example = (answering.first ?? results.first).flatMap { $0.device.suggestedFilter ?? $0.device.uri.description }
        var message = "\(head): \(list)"
        if let example { message += "; e.g. --device \"\(example)\"" }
        return message
    }

    static func describe(_ device: SerialDevice) -> String {
        var text = device.summary
        if let filter = device.suggestedFilter { text += " (\(filter))" }
        return text
    }
}
