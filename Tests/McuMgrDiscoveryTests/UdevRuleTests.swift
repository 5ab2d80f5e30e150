import Foundation
import Testing

@testable import McuMgrDiscovery

/// The Debian package's udev rule (Scripts/debian/70-smp-boards.rules) gives `plugdev` the serial ports
/// of the board table's boards and debug probes: every such vendor in the table has its line, and the
/// rule names no vendor the table does not know.
@Suite("udev rule of the Debian package")
struct UdevRuleTests {
    static let rulePath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/debian/70-smp-boards.rules")

    static func ruleVendors() throws -> Set<UInt16> {
        let text = try String(contentsOf: rulePath, encoding: .utf8)
        var vendors = Set<UInt16>()
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && line.contains("ATTRS{idVendor}") {
            #expect(line.contains("SUBSYSTEMS==\"usb\"") && line.contains("GROUP=\"plugdev\"") && line.contains("MODE=\"0660\""), "\(line)")
            let value = line.components(separatedBy: "ATTRS{idVendor}==\"").dropFirst().first?.prefix(4) ?? ""
            let vendor = try #require(UInt16(value, radix: 16), "no vendor ID in: \(line)")
            vendors.insert(vendor)
        }
        return vendors
    }

    @Test("every board and debug-probe vendor of the table, and no other")
    func vendorsMatchTheBoardTable() throws {
        let table = Set(KnownBoards.rules.filter { $0.kind == .board || $0.kind == .debugProbe }.map(\.vendorID))
        let rule = try Self.ruleVendors()
        #expect(!rule.isEmpty)
        let hex = { (s: Set<UInt16>) in s.sorted().map { String($0, radix: 16) } }
        #expect(table.subtracting(rule).isEmpty, "vendors of boards or probes without a udev line: \(hex(table.subtracting(rule)))")
        #expect(rule.subtracting(table).isEmpty, "udev lines for vendors the board table does not know: \(hex(rule.subtracting(table)))")
    }

    @Test("the rule applies to tty devices only and jumps past itself otherwise")
    func scopedToTTY() throws {
        let text = try String(contentsOf: Self.rulePath, encoding: .utf8)
        #expect(text.contains("SUBSYSTEM!=\"tty\", GOTO=\"smp_boards_end\""))
        #expect(text.contains("LABEL=\"smp_boards_end\""))
    }
}
