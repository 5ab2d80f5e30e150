import Foundation
import Testing

/// Expects exit status 0 and returns the result; the whole run is shown on failure.
@discardableResult
func expectSuccess(
    _ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation
) -> ProcessResult {
    #expect(result.status == 0 && !result.timedOut, "\(result)", sourceLocation: sourceLocation)
    return result
}

/// Expects a given exit status.
func expectStatus(
    _ result: ProcessResult, _ status: Int32, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == status && !result.timedOut, "expected exit \(status): \(result)", sourceLocation: sourceLocation)
}

/// Parses stdout as a JSON object.
func jsonObject(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any]? {
    guard let object = try? JSONSerialization.jsonObject(with: result.stdoutData) as? [String: Any] else {
        Issue.record("stdout is not a JSON object: \(result)", sourceLocation: sourceLocation)
        return nil
    }
    return object
}

/// Integer value of a JSON number.
func jsonInt(_ value: Any?) -> Int? {
    if let n = value as? NSNumber { return n.intValue }
    return nil
}

/// Exit codes of `smp` (README; sysexits-style).
enum SMPExit {
    static let ok: Int32 = 0
    static let device: Int32 = 1
    static let usage: Int32 = 64
    static let file: Int32 = 66
    static let transport: Int32 = 69
    static let timeout: Int32 = 75
    static let protocolError: Int32 = 76
}
