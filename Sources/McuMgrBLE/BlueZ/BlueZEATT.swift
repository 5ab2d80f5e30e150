#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whether a link to a device runs Enhanced ATT: the device offers it (bit 0 of its GATT Server
/// Supported Features, 0x2B3A) and the local bluetoothd opens EATT bearers (`[GATT] Channels` in its
/// main.conf, default 3: ATT plus two EATT bearers; 1 keeps to plain ATT).
///
/// It matters because bluetoothd 5.66 sends the writes of one request, and the device's notifications of
/// one answer arrive, over all the bearers at once, where a short piece overtakes a long one: SMP
/// requests and answers written in pieces do not arrive whole (measured between two bluetoothd: the
/// reassembly probe's one-byte tail reached the device first in most runs, and an image upload in
/// 2.4 kB requests never got past offset 0).
public enum BlueZEATT {
    /// GATT Server Supported Features.
    public static let serverSupportedFeatures = "00002b3a-0000-1000-8000-00805f9b34fb"

    /// Whether a Server Supported Features value offers EATT.
    public static func offered(serverSupportedFeatures value: [UInt8]) -> Bool {
        (value.first ?? 0) & 0x01 != 0
    }

    /// The `Channels` of the `[GATT]` section of a bluetoothd main.conf; nil when it is not set there
    /// (bluetoothd then opens 3). Comments, other sections and malformed values are ignored.
    public static func channels(mainConf text: String) -> Int? {
        var section = ""
        var channels: Int?
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = trimmed(raw)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = trimmed(line.dropFirst().dropLast())
                continue
            }
            guard section == "GATT", let equals = line.firstIndex(of: "=") else { continue }
            let key = trimmed(line[..<equals])
            let value = trimmed(line[line.index(after: equals)...])
            if key == "Channels", let number = Int(value), (1...5).contains(number) { channels = number }
        }
        return channels
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" || $0 == "\r" }).reversed())
    }

    /// Whether the local bluetoothd opens EATT bearers, from /etc/bluetooth/main.conf (where Debian's and
    /// most distributions' bluetoothd read it); true when it cannot tell (BlueZ's default).
    public static func localBearersAllowed(mainConf path: String = "/etc/bluetooth/main.conf") -> Bool {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else { return true }
        return (channels(mainConf: text) ?? 3) > 1
    }
}
