import Foundation
import McuManager
import McuMgrCore

/// A transport event in a form tests compare: packets and drops as they are, a closure by its error's
/// kind and message.
enum SeenEvent: Equatable, CustomStringConvertible {
    case packet([UInt8])
    case dropped(SMPFramingDrop)
    case closed(McuMgrError.Kind?, String?)

    init(_ event: McuMgrTransportEvent) {
        switch event {
        case .packet(let bytes): self = .packet(bytes)
        case .dropped(let drop): self = .dropped(drop)
        case .closed(let error): self = .closed(error?.kind, error?.message)
        }
    }

    var description: String {
        switch self {
        case .packet(let bytes): return "packet(\(bytes.count) bytes)"
        case .dropped(let drop): return "dropped(\(drop))"
        case .closed(let kind, let message): return "closed(\(kind.map { "\($0)" } ?? "nil"), \(message ?? "nil"))"
        }
    }
}

/// Collects what a link handler reports, in order (the handler's callback is `@Sendable`).
final class TransportEventRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [SeenEvent] = []

    var events: [SeenEvent] { lock.withLock { seen } }

    func record(_ event: McuMgrTransportEvent) {
        lock.withLock { seen.append(SeenEvent(event)) }
    }

    /// The callback to hand a handler.
    var handler: @Sendable (McuMgrTransportEvent) -> Void { { [self] in record($0) } }
}
