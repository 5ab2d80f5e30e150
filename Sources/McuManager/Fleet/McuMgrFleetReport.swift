#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The outcome of a fleet run, one entry per device, as JUnit XML for CI systems (one test case per
/// device; a failed device is a `<failure>` whose `type` is the error's kind).
public struct McuMgrFleetReport: Sendable {
    /// One device's outcome.
    public struct Entry: Sendable {
        /// The device's name.
        public var device: String
        /// Why it failed; nil when it succeeded.
        public var error: McuMgrError?
        /// From the device's turn to its end.
        public var duration: Duration
        /// What was done, for people (e.g. "uploaded image 0, reset"), or more about a failure.
        public var detail: String

        /// Creates an entry.
        public init(device: String, error: McuMgrError? = nil, duration: Duration, detail: String = "") {
            self.device = device
            self.error = error
            self.duration = duration
            self.detail = detail
        }
    }

    /// The suite's name (e.g. "smp dfu").
    public var name: String
    /// One entry per device, in order.
    public var entries: [Entry]
    /// The whole run's time.
    public var duration: Duration
    /// When the run started.
    public var timestamp: Date

    /// Creates a report.
    public init(name: String, entries: [Entry], duration: Duration, timestamp: Date) {
        self.name = name
        self.entries = entries
        self.duration = duration
        self.timestamp = timestamp
    }

    /// A report of a fleet run's results; `detail` describes a device's value.
    public init<Value>(
        name: String, results: [McuMgrFleetResult<Value>], duration: Duration, timestamp: Date,
        detail: (Value) -> String = { _ in "" }
    ) {
        self.init(
            name: name,
            entries: results.map { result in
                Entry(device: result.device, error: result.error, duration: result.duration, detail: result.value.map(detail) ?? "")
            },
            duration: duration, timestamp: timestamp)
    }

    /// The entries of devices that failed.
    public var failures: [Entry] { entries.filter { $0.error != nil } }

    /// The report as JUnit XML: `<testsuites>` holding one `<testsuite name=NAME>` with a `<testcase
    /// classname=NAME name=DEVICE time=SECONDS>` per device; a failed one holds `<failure message=MESSAGE
    /// type=KIND>` with the message and detail, a successful one `<system-out>` with its detail.
    public func junitXML() -> String {
        let failed = failures.count
        let time = Self.seconds(duration)
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml += "<testsuites name=\"\(Self.escape(name))\" tests=\"\(entries.count)\" failures=\"\(failed)\" errors=\"0\" time=\"\(time)\">\n"
        xml += "  <testsuite name=\"\(Self.escape(name))\" tests=\"\(entries.count)\" failures=\"\(failed)\" errors=\"0\" skipped=\"0\""
        xml += " time=\"\(time)\" timestamp=\"\(Self.timestampText(timestamp))\">\n"
        for entry in entries {
            xml += "    <testcase classname=\"\(Self.escape(name))\" name=\"\(Self.escape(entry.device))\" time=\"\(Self.seconds(entry.duration))\""
            if let error = entry.error {
                xml += ">\n"
                var text = error.message
                if !entry.detail.isEmpty { text += "\n" + entry.detail }
                xml += "      <failure message=\"\(Self.escape(error.message))\" type=\"\(error.kind.rawValue)\">\(Self.escape(text))</failure>\n"
                xml += "    </testcase>\n"
            } else if !entry.detail.isEmpty {
                xml += ">\n      <system-out>\(Self.escape(entry.detail))</system-out>\n    </testcase>\n"
            } else {
                xml += "/>\n"
            }
        }
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

    /// Seconds with three decimals, as JUnit's `time` attributes.
    static func seconds(_ duration: Duration) -> String {
        let milliseconds = Int64((duration.seconds * 1000).rounded())
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// `yyyy-MM-ddTHH:mm:ss` in UTC, as JUnit's schema wants it (no zone).
    static func timestampText(_ date: Date) -> String {
        var text = date.formatted(.iso8601)
        if text.hasSuffix("Z") { text.removeLast() }
        return text
    }

    /// `text` safe inside XML attribute values and elements; characters XML 1.0 cannot hold become U+FFFD.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            case let c where c.value < 0x20 || c.value == 0xFFFE || c.value == 0xFFFF:
                out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
