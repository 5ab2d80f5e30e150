#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import McuMgrCore

/// The shell group (9): runs shell commands on the device.
public struct ShellManager: Sendable {
    /// The client requests go through.
    public let client: McuMgrClient

    /// Creates a manager on `client`.
    public init(client: McuMgrClient) { self.client = client }

    /// Runs `argv` (command, then arguments) and returns its output and return code.
    ///
    /// The return code comes from `ret`, or from `rc` on devices built with the legacy return-code
    /// option; a non-zero command result is not an error here. The request is never sent again without
    /// an answer (the device would run the copy too): a lost request ends in a timeout that says so.
    /// - Throws: `McuMgrError` when the device refuses the command (e.g. shell error `EMPTY_COMMAND`).
    public func execute(_ argv: [String]) async throws -> ShellExecuteResponse {
        guard !argv.isEmpty else { throw McuMgrError(.usage, "shell execute: give a command to run") }
        let request = ShellExecuteRequest(argv: argv)
        let payload: [UInt8]
        do {
            payload = try CBOREncoder().encode(request)
        } catch {
            throw McuMgrError(.usage, "cannot encode the shell command: \(error)", cause: error)
        }
        let packet: SMPPacket
        do {
            packet = try await client.send(
                operation: ShellExecuteRequest.operation, group: ShellExecuteRequest.group,
                command: ShellExecuteRequest.command, payload: payload, retransmittable: ShellExecuteRequest.isIdempotent,
                name: ShellExecuteRequest.operationName)
        } catch let error as McuMgrError {
            throw McuMgrClient.notSentAgain(error)
        }
        // Legacy builds report the command's result as `rc` next to the output `o`.
        if let item = try? CBOR(decoding: packet.payload), item["o"] != nil, item["err"] == nil,
            let rc = item["rc"]?.int
        {
            return ShellExecuteResponse(output: item["o"]?.string ?? "", returnCode: rc)
        }
        return try McuMgrClient.decode(ShellExecuteResponse.self, from: packet, operation: ShellExecuteRequest.operationName)
    }

    /// Runs a command line split at spaces (no quoting).
    public func execute(command: String) async throws -> ShellExecuteResponse {
        try await execute(command.split(separator: " ").map(String.init))
    }
}
