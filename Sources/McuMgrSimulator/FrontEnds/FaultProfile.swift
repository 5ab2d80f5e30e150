import McuMgrCore

/// Which link faults a simulated device injects, parsed from one option such as
/// `loss=0.1,dup=0.02,reorder=0.02,corrupt=1e-4,noise=0.05,seed=7` (smp-sim `--faults`, `sim:?faults=`).
///
/// Probabilities are per request, answer, console line or byte as each key says; the same seed and the
/// same traffic make the same faults, so a failure replays.
public struct FaultProfile: Sendable, Hashable, CustomStringConvertible {
    /// A request (datagram, serial frame, BLE write) is lost on its way to the device.
    public var requestLoss: Double = 0
    /// An answer is lost on its way back.
    public var responseLoss: Double = 0
    /// An answer arrives twice.
    public var duplication: Double = 0
    /// An answer is held back and arrives after the next one.
    public var reordering: Double = 0
    /// Added to every answer.
    public var delay: Duration = .zero
    /// Up to this much more, uniformly, per answer.
    public var jitter: Duration = .zero
    /// Serial: each byte, in either direction, has one bit flipped.
    public var corruption: Double = 0
    /// Serial: before each line the device writes, a console log line (between frames, or between the
    /// lines of a frame, as Zephyr's console prints them).
    public var noise: Double = 0
    /// Serial: a console line the host sends never reaches the device's receive buffers.
    public var lineLoss: Double = 0
    /// The device resets (power cycle, no answer) each time it has received this many more bytes of upload
    /// requests (image, file system, SUIT uploads), up to `resetCount` times.
    public var resetEveryUploadBytes: Int?
    /// How many resets `resetEveryUploadBytes` makes (a device that resets forever before an upload can
    /// finish only tests patience).
    public var resetCount: Int = 1
    /// The device resets while erasing the slot for the first chunk of this many image uploads.
    public var resetsInErase: Int = 0
    /// After answering this many requests the device stops answering (until smp-sim restarts).
    public var silentAfterRequests: Int?
    /// The seed of every decision.
    public var seed: UInt64 = 1

    public init() {}

    /// The keys `init(parsing:)` takes, with what each means (for help texts).
    public static let keys: [(String, String)] = [
        ("loss=P", "a request or an answer is lost (each direction with probability P)"),
        ("loss-in=P", "a request is lost on its way to the device"),
        ("loss-out=P", "an answer is lost on its way back"),
        ("dup=P", "an answer arrives twice"),
        ("reorder=P", "an answer arrives after the next one"),
        ("delay=MS", "every answer is delayed by MS milliseconds"),
        ("jitter=MS", "and by up to MS more, at random"),
        ("corrupt=P", "serial: each byte (both directions) has a bit flipped"),
        ("noise=P", "serial: a console log line before a line the device writes (between or inside frames)"),
        ("drop-lines=P", "serial: a line the host sends is lost"),
        ("reset-after=BYTES", "the device resets once it received BYTES bytes of upload requests, and again after each BYTES more, up to `resets` times"),
        ("resets=N", "how many resets reset-after makes (default 1)"),
        ("reset-in-erase=N", "the device resets while erasing for the first chunk of the first N image uploads"),
        ("silent-after=N", "the device stops answering after N answered requests"),
        ("seed=N", "seed of every random decision (default 1): the same seed replays the same faults"),
    ]

    /// Parses `key=value,key=value`; an empty text or `none` is no faults.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingSpaces
        if trimmed.isEmpty || trimmed == "none" { return }
        for item in trimmed.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map { String($0).trimmingSpaces }
            let key = parts[0]
            guard parts.count == 2, !parts[1].isEmpty else {
                throw FaultProfileError("fault \"\(item)\" has no value; write KEY=VALUE, e.g. loss=0.1 (keys: \(Self.keyList))")
            }
            let value = parts[1]
            func probability() throws -> Double {
                guard let p = Double(value), p >= 0, p <= 1 else {
                    throw FaultProfileError("fault \(key)=\(value): give a probability from 0 to 1, e.g. \(key)=0.02 or 1e-4")
                }
                return p
            }
            func milliseconds() throws -> Duration {
                let number = value.hasSuffix("ms") ? String(value.dropLast(2)) : value
                guard let ms = Double(number), ms >= 0, ms <= 60_000 else {
                    throw FaultProfileError("fault \(key)=\(value): give milliseconds from 0 to 60000, e.g. \(key)=20")
                }
                return .microseconds(Int64((ms * 1000).rounded()))
            }
            func count(_ range: ClosedRange<Int>) throws -> Int {
                guard let n = Int(value), range.contains(n) else {
                    throw FaultProfileError("fault \(key)=\(value): give a whole number in \(range.lowerBound)...\(range.upperBound)")
                }
                return n
            }
            switch key {
            case "loss":
                requestLoss = try probability()
                responseLoss = requestLoss
            case "loss-in": requestLoss = try probability()
            case "loss-out": responseLoss = try probability()
            case "dup": duplication = try probability()
            case "reorder": reordering = try probability()
            case "delay": delay = try milliseconds()
            case "jitter": jitter = try milliseconds()
            case "corrupt": corruption = try probability()
            case "noise": noise = try probability()
            case "drop-lines": lineLoss = try probability()
            case "reset-after": resetEveryUploadBytes = try count(1...Int(Int32.max))
            case "resets": resetCount = try count(0...1_000_000)
            case "reset-in-erase": resetsInErase = try count(0...1000)
            case "silent-after": silentAfterRequests = try count(0...Int(Int32.max))
            case "seed":
                guard let seed = UInt64(value) else {
                    throw FaultProfileError("fault seed=\(value): give a whole number, e.g. seed=7")
                }
                self.seed = seed
            default:
                throw FaultProfileError("unknown fault \"\(key)\"; use \(Self.keyList)")
            }
        }
        if requestLoss >= 1 || responseLoss >= 1 {
            throw FaultProfileError("a loss of 1 loses everything; for a device that never answers use silent-after=0")
        }
    }

    private static var keyList: String { keys.map { String($0.0.prefix { $0 != "=" }) }.joined(separator: ", ") }

    /// Whether any fault is configured.
    public var isEmpty: Bool { self == FaultProfile(seedOf: self) }

    private init(seedOf other: FaultProfile) { seed = other.seed }

    public var description: String {
        var parts: [String] = []
        func add(_ key: String, _ value: Double) { if value > 0 { parts.append("\(key)=\(value)") } }
        if requestLoss == responseLoss { add("loss", requestLoss) } else {
            add("loss-in", requestLoss)
            add("loss-out", responseLoss)
        }
        add("dup", duplication)
        add("reorder", reordering)
        if delay > .zero { parts.append("delay=\(delay.milliseconds)ms") }
        if jitter > .zero { parts.append("jitter=\(jitter.milliseconds)ms") }
        add("corrupt", corruption)
        add("noise", noise)
        add("drop-lines", lineLoss)
        if let n = resetEveryUploadBytes { parts.append("reset-after=\(n)") }
        if resetCount != 1 { parts.append("resets=\(resetCount)") }
        if resetsInErase > 0 { parts.append("reset-in-erase=\(resetsInErase)") }
        if let n = silentAfterRequests { parts.append("silent-after=\(n)") }
        parts.append("seed=\(seed)")
        return parts.joined(separator: ",")
    }
}

extension Duration {
    fileprivate var milliseconds: String {
        let (seconds, attoseconds) = components
        let ms = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        return ms == ms.rounded() ? String(Int(ms)) : String(ms)
    }
}

extension String {
    /// Without the spaces and tabs at either end.
    fileprivate var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
