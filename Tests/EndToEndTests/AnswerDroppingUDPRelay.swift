import Foundation

/// The answers to chosen fs upload requests lost on their way back: the device gets every request, but
/// the answer to the n-th fs upload request (group 8, command 0, write) is dropped, as when a datagram
/// is lost (a `LossyUDPProxy` rule).
enum AnswerDroppingUDPRelay {
    /// - Parameter dropAnswersTo: 1-based numbers of the fs upload requests whose answer is lost.
    static func start(devicePort: Int, dropAnswersTo drops: Set<Int>) throws -> LossyUDPProxy {
        var uploads = 0
        var pending: Set<UInt8> = []
        func isUpload(_ d: ArraySlice<UInt8>) -> Bool {
            let b = Array(d.prefix(8))
            return b.count == 8 && b[4] == 0 && b[5] == 8 && b[7] == 0
        }
        return try LossyUDPProxy(devicePort: devicePort, lose: { direction, datagram in
            guard isUpload(datagram) else { return false }
            let sequence = datagram[datagram.startIndex + 6]
            switch direction {
            case .toDevice:
                // A write request: count it, and mark its sequence when its answer is to be lost.
                guard datagram[datagram.startIndex] & 0x07 == 2 else { return false }
                uploads += 1
                if drops.contains(uploads) { pending.insert(sequence) }
                return false
            case .toClient:
                return pending.remove(sequence) != nil
            }
        })
    }
}
