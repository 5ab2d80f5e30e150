import Logging
import McuManager
import McuMgrSerial

/// Asks serial ports whether they speak SMP: an MCUmgr parameters request (OS group, command 6) to each,
/// all at once, each with a short timeout. Any SMP answer counts, an error code included (MCUboot's serial
/// recovery, for example, answers "not supported").
///
/// Probing writes a few bytes of SMP console framing to each port; ports driving other protocols (modems,
/// GPS receivers) may see them.
public struct SerialDeviceProber: Sendable {
    /// Builds the transport for a port (the CLI passes its URI options such as the baud rate).
    public var makeTransport: @Sendable (SerialDevice) throws -> any McuMgrTransport
    public var timeout: Duration
    public var logger: Logger

    public init(
        timeout: Duration = .seconds(1), logger: Logger = Logger(label: "smp.discovery.probe"),
        makeTransport: (@Sendable (SerialDevice) throws -> any McuMgrTransport)? = nil
    ) {
        self.timeout = timeout
        self.logger = logger
        self.makeTransport =
            makeTransport ?? { device in
                SerialTransport(configuration: .init(path: device.path), logger: logger)
            }
    }

    /// Probes every device at once; results in the devices' order.
    public func probe(_ devices: [SerialDevice]) async -> [SerialProbeResult] {
        await withTaskGroup(of: (Int, SerialProbeResult).self) { group in
            for (index, device) in devices.enumerated() {
                group.addTask { (index, await probe(device)) }
            }
            var results = [SerialProbeResult?](repeating: nil, count: devices.count)
            for await (index, result) in group { results[index] = result }
            return results.compactMap { $0 }
        }
    }

    /// Probes one device.
    public func probe(_ device: SerialDevice) async -> SerialProbeResult {
        let clock = ContinuousClock()
        let start = clock.now
        func result(_ outcome: SerialProbeResult.Outcome) -> SerialProbeResult {
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            logger.debug("probe \(device.path): \(SerialProbeResult(device: device, outcome: outcome, seconds: seconds).summary)")
            return SerialProbeResult(device: device, outcome: outcome, seconds: seconds)
        }
        let transport: any McuMgrTransport
        do {
            transport = try makeTransport(device)
        } catch {
            return result(.failed("\(error)"))
        }
        let client = McuMgrClient(transport: transport, configuration: .init(timeout: timeout), logger: logger)
        do {
            let parameters = try await client.send(McuMgrParametersRequest(), timeout: timeout)
            await client.close()
            return result(.answered(bufferSize: parameters.bufferSize, bufferCount: parameters.bufferCount))
        } catch let error as McuMgrError {
            await client.close()
            switch error.kind {
            case .device:
                let name = error.returnCode?.name ?? error.groupError?.name ?? "error"
                return result(.answeredWithError(name))
            case .timeout: return result(.silent)
            case .cancelled: return result(.failed("cancelled"))
            default: return result(.failed(error.message))
            }
        } catch {
            await client.close()
            return result(.failed("\(error)"))
        }
    }
}
