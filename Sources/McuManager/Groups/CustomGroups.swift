import McuMgrCore

/// A request of an application-defined group (64 and up): any `McuMgrRequest` works.
///
/// Define the request's group, command, operation and response type; its stored properties are the
/// CBOR body and `Response` decodes the answer. Devices without the group answer `rc 8`, which
/// arrives as an `McuMgrError` of kind `.device` with `returnCode == .notSupported`.
///
/// ```swift
/// struct ReadSensor: McuMgrRequest {
///     static var group: McuMgrGroup { McuMgrGroup(64) }
///     static var command: McuMgrCommand { McuMgrCommand(0) }
///     static var operation: SMPOperation { .read }
///     static var operationName: String { "sensor read" }
///     struct Response: Decodable, Sendable { var celsius: Double }
///
///     var channel: Int   // sent as {"channel": n}
/// }
///
/// let reading = try await client.send(ReadSensor(channel: 2))
/// print(reading.celsius)
/// ```
public typealias McuMgrCustomRequest = McuMgrRequest
