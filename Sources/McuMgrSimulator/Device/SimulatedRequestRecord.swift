import McuMgrCore

/// One request a simulated device received and answered: its operation, group and command. What a test
/// counts to check a command's round-trip budget (`SimulatedDevice.setRequestObserver`,
/// `smp-sim --request-log`).
public struct SimulatedRequestRecord: Sendable, Hashable, CustomStringConvertible {
    /// Read or write.
    public var operation: SMPOperation
    public var group: McuMgrGroup
    public var command: McuMgrCommand

    public init(operation: SMPOperation, group: McuMgrGroup, command: McuMgrCommand) {
        self.operation = operation
        self.group = group
        self.command = command
    }

    /// `read 0/6` or `write 8/0`: the operation, then group/command in decimal (one line of `--request-log`).
    public var description: String {
        "\(operation == .read ? "read" : "write") \(group.rawValue)/\(command.rawValue)"
    }

    /// Reads a `description` back; nil for any other text.
    public init?(line: some StringProtocol) {
        let parts = line.split(separator: " ")
        guard parts.count == 2, let operation = parts[0] == "read" ? SMPOperation.read : parts[0] == "write" ? .write : nil
        else { return nil }
        let numbers = parts[1].split(separator: "/")
        guard numbers.count == 2, let group = UInt16(numbers[0]), let command = UInt8(numbers[1]) else { return nil }
        self.init(operation: operation, group: McuMgrGroup(rawValue: group), command: McuMgrCommand(rawValue: command))
    }
}
