#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

// Shell group (9): PROTOCOL.md 3.7.

extension McuMgrCommand {
    /// Shell group commands.
    public enum Shell {
        /// Execute a shell command.
        public static let execute = McuMgrCommand(0)
    }
}

/// Runs a shell command on the device.
///
/// Devices built with `LEGACY_RC_RETURN_CODE` put the command's return code in `rc`, which looks like an
/// SMP error: `ShellManager.execute` handles that; sending this request through `McuMgrClient.send`
/// directly does not.
public struct ShellExecuteRequest: McuMgrRequest, Hashable {
    public static var group: McuMgrGroup { .shell }
    public static var command: McuMgrCommand { McuMgrCommand.Shell.execute }
    public static var operation: SMPOperation { .write }
    public static var operationName: String { "shell execute" }
    public typealias Response = ShellExecuteResponse
    /// The device runs every copy of a command it gets (Zephyr has no way to tell a copy): a command
    /// that takes longer than the link's resend timeout would run twice if it were sent again.
    public static var isIdempotent: Bool { false }

    /// Command and arguments (`argv`).
    public var argv: [String]

    /// Creates the request.
    public init(argv: [String]) { self.argv = argv }
}

/// The command's captured output and return code.
public struct ShellExecuteResponse: Decodable, Sendable, Hashable {
    /// Captured output (`o`).
    public var output: String
    /// The command's return code (`ret`, or legacy `rc`); 0 when neither is sent.
    public var returnCode: Int

    /// Creates a value.
    public init(output: String, returnCode: Int) {
        self.output = output
        self.returnCode = returnCode
    }

    enum CodingKeys: String, CodingKey { case output = "o", ret, rc }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        output = try c.decodeIfPresent(String.self, forKey: .output) ?? ""
        returnCode = try c.decodeIfPresent(Int.self, forKey: .ret) ?? c.decodeIfPresent(Int.self, forKey: .rc) ?? 0
    }
}
