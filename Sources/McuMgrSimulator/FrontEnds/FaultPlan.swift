#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import McuMgrCore

/// Decides, request by request, answer by answer and byte by byte, what a faulty link does. Pure: no
/// clock and no I/O; the front ends ask it and apply the decisions. One plan per front end.
public struct FaultPlan: Sendable {
    /// What happens to a request that reached the link.
    public enum RequestFate: Sendable, Hashable {
        /// The device gets it.
        case deliver
        /// Lost on the way.
        case lose
        /// The device resets instead of answering (power cut mid-transfer or during the erase).
        case reset
        /// The device has gone silent.
        case silence
    }

    /// What happens to one answer.
    public enum AnswerFate: Sendable, Hashable {
        /// Sent `copies` times (0 = lost, 2 = duplicated) after `delay`.
        case send(copies: Int, delay: Duration)
        /// Held back and sent right after the next answer (or after `delay` when none follows).
        case holdForNext(delay: Duration)
    }

    public let profile: FaultProfile
    private var random: SplitMix64
    private var uploadBytes = 0
    private var uploadResets = 0
    private var imageUploadStarts = 0
    private var answered = 0
    /// Bytes still to pass before the next corrupted one.
    private var cleanBytes: Int

    public init(_ profile: FaultProfile, stream: UInt64 = 0) {
        self.profile = profile
        self.random = SplitMix64(seed: profile.seed &+ stream &* 0x9E37_79B9_7F4A_7C15)
        self.cleanBytes = 0
        self.cleanBytes = nextCleanRun()
    }

    /// Whether the device is silent for good.
    public var isSilent: Bool { profile.silentAfterRequests.map { answered >= $0 } ?? false }

    /// Decides the fate of a whole request the device would now handle (its SMP packet).
    public mutating func request(_ packet: [UInt8]) -> RequestFate {
        if isSilent { return .silence }
        if random.chance(profile.requestLoss) { return .lose }
        if let header = try? SMPHeader(decoding: packet), header.operation == .write {
            let upload =
                (header.group == .image && header.command.rawValue == 1)
                || (header.group == .fileSystem && header.command.rawValue == 0)
                || (header.group.rawValue == 66 && [2, 3, 5].contains(header.command.rawValue))
            if header.group == .image && header.command.rawValue == 1 && isFirstChunk(packet) {
                imageUploadStarts += 1
                if imageUploadStarts <= profile.resetsInErase { return .reset }
            }
            if upload, let every = profile.resetEveryUploadBytes, uploadResets < profile.resetCount {
                let before = uploadBytes / every
                uploadBytes += packet.count
                if uploadBytes / every > before {
                    uploadResets += 1
                    return .reset
                }
            }
        }
        answered += 1
        return .deliver
    }

    /// Decides the fate of one answer.
    public mutating func answer() -> AnswerFate {
        var delay = profile.delay
        if profile.jitter > .zero {
            delay += .nanoseconds(Int64(Double(profile.jitter.nanosecondsClamped) * random.unit()))
        }
        if random.chance(profile.responseLoss) { return .send(copies: 0, delay: delay) }
        if random.chance(profile.reordering) { return .holdForNext(delay: delay) }
        return .send(copies: random.chance(profile.duplication) ? 2 : 1, delay: delay)
    }

    /// Flips one bit in each byte the corruption rate picks; returns how many bytes changed.
    @discardableResult
    public mutating func corrupt(_ bytes: inout [UInt8]) -> Int {
        guard profile.corruption > 0 else { return 0 }
        var changed = 0
        var index = 0
        while index + cleanBytes < bytes.count {
            index += cleanBytes
            bytes[index] ^= UInt8(1) << UInt8(random.next() % 8)
            changed += 1
            index += 1
            cleanBytes = nextCleanRun()
        }
        cleanBytes -= bytes.count - index
        return changed
    }

    /// A console log line to print before the next line the device writes, if the noise rate picks one.
    public mutating func noiseLine() -> [UInt8]? {
        guard random.chance(profile.noise) else { return nil }
        let messages = [
            "<inf> littlefs: /lfs1 mounted", "<wrn> net_arp: Gateway not set", "<dbg> smp_svr: tick",
            "<err> flash_sim: flash write in progress", "<inf> mcuboot_util: Swap type: none",
            "uart:~$ ", "*** Booting Zephyr OS build v4.4.0 ***",
        ]
        let seconds = random.next() % 1000
        let fraction = random.next() % 1000
        let text = "[00:00:\(seconds / 10).\(fraction),\(random.next() % 1000)] "
            + messages[Int(random.next() % UInt64(messages.count))] + "\n"
        return Array(text.utf8)
    }

    /// Whether a console line the host sent reaches the device.
    public mutating func keepLine() -> Bool { !random.chance(profile.lineLoss) }

    private mutating func nextCleanRun() -> Int {
        let p = profile.corruption
        guard p > 0 else { return Int.max / 2 }
        if p >= 1 { return 0 }
        // Geometric: bytes before the next corrupted one.
        let u = max(random.unit(), 1e-12)
        return Int(min(Double(Int32.max), (log(u) / log(1 - p)).rounded(.down)))
    }

    /// Whether an image upload request carries offset 0 (the chunk that erases the slot).
    private func isFirstChunk(_ packet: [UInt8]) -> Bool {
        // CBOR map key "off" (0x63 'o' 'f' 'f') followed by the unsigned integer 0.
        let key: [UInt8] = [0x63, 0x6F, 0x66, 0x66]
        guard packet.count > SMPHeader.size + key.count else { return false }
        var index = SMPHeader.size
        while index + key.count < packet.count {
            if packet[index] == key[0], Array(packet[index..<index + key.count]) == key {
                return packet[index + key.count] == 0x00
            }
            index += 1
        }
        return false
    }
}

/// A small seeded generator (SplitMix64): the same seed gives the same sequence on every platform.
struct SplitMix64: Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(UInt64(1) << 53) }
    /// True with probability `p` (draws nothing when `p` is 0, so faults off leave the stream alone).
    mutating func chance(_ p: Double) -> Bool { p > 0 && unit() < p }
}
