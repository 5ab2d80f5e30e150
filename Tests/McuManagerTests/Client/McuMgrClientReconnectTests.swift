import Foundation
import McuManager
import McuMgrCore
import Testing

/// A link the transport ended, then a reconnection that fails: the error says both.
@Suite("McuMgrClient: a failed reconnection after the link was closed", .timeLimit(.minutes(10)))
struct McuMgrClientReconnectTests {
    /// Answers every echo at once; `drop()` ends the link as a port server killed mid-transfer does, and
    /// every later open is refused.
    final class DroppingLink: McuMgrTransport, @unchecked Sendable {
        let name = "tcp://127.0.0.1:9"
        let linkLimits = LinkLimits(
            maximumPacketSize: 512, framesInFlight: 1,
            session: SMPSessionConfiguration(adaptiveRetransmit: true, retransmitFloor: .milliseconds(250), maximumRetransmits: 2))
        private let lock = NSLock()
        private var handler: (@Sendable (McuMgrTransportEvent) -> Void)?
        private var opens = 0
        private var gone = false

        var openCount: Int { lock.withLock { opens } }

        func open(_ handler: @escaping @Sendable (McuMgrTransportEvent) -> Void) async throws {
            let first = lock.withLock { () -> Bool in
                opens += 1
                if opens == 1 { self.handler = handler }
                return opens == 1
            }
            guard first else {
                throw McuMgrError(.transport, "cannot connect to \(name): connection refused; is the port server running?")
            }
        }

        func send(_ bytes: [UInt8]) throws {
            if lock.withLock({ gone }) {
                throw McuMgrError(.transport, "connection to \(name) closed by the server")
            }
            let packet = try SMPPacket(decoding: bytes)
            var payload: [UInt8] = []
            CBORWriter.write(["r": "ok"], into: &payload)
            let header = SMPHeader(
                version: packet.header.version, operation: packet.header.operation.response, length: UInt16(payload.count),
                group: packet.header.group, sequence: packet.header.sequence, command: packet.header.command)
            let handler = lock.withLock { self.handler }
            handler?(.packet(SMPPacket(header: header, payload: payload).bytes))
        }

        func drop() {
            let handler = lock.withLock { () -> (@Sendable (McuMgrTransportEvent) -> Void)? in
                defer { self.handler = nil }
                return self.handler
            }
            handler?(.closed(McuMgrError(.transport, "connection to \(name) closed by the server")))
        }

        /// Ends the link as `drop()` does, except that the closing event has not reached the client when
        /// it sends next: the send finds the link gone.
        func dropUnannounced() {
            lock.withLock {
                gone = true
                handler = nil
            }
        }

        func close() async {
            lock.withLock { handler = nil }
        }
    }

    @Test func theRefusalAfterTheServerClosedTheLinkNamesBoth() async throws {
        let link = DroppingLink()
        let client = McuMgrClient(transport: link)
        #expect(try await client.send(EchoRequest(text: "ok")).text == "ok")
        link.drop()
        // The next request comes once the client has handled the closing (its events arrive on a task).
        while await client.isLinkOpen { await Task.yield() }
        let error = await #expect(throws: McuMgrError.self) { try await client.send(EchoRequest(text: "again")) }
        #expect(error?.kind == .transport)
        #expect(
            error?.message
                == "connection to tcp://127.0.0.1:9 closed by the server; connecting again failed: cannot connect to tcp://127.0.0.1:9: connection refused; is the port server running?",
            "\(error?.message ?? "")")
        #expect(link.openCount == 2)
    }

    /// A request sent before the closing event was handled finds the link gone: it fails with the
    /// transport's reason, and the refused reconnection names that reason as well.
    @Test func aSendThatFindsTheLinkGoneCountsAsTheClosing() async throws {
        let link = DroppingLink()
        let client = McuMgrClient(transport: link)
        #expect(try await client.send(EchoRequest(text: "ok")).text == "ok")
        link.dropUnannounced()
        let first = await #expect(throws: McuMgrError.self) { try await client.send(EchoRequest(text: "lost")) }
        #expect(first?.message == "echo failed: connection to tcp://127.0.0.1:9 closed by the server", "\(first?.message ?? "")")
        let second = await #expect(throws: McuMgrError.self) { try await client.send(EchoRequest(text: "again")) }
        #expect(
            second?.message
                == "connection to tcp://127.0.0.1:9 closed by the server; connecting again failed: cannot connect to tcp://127.0.0.1:9: connection refused; is the port server running?",
            "\(second?.message ?? "")")
        #expect(link.openCount == 2)
    }

    @Test func aLinkClosedOnPurposeLeavesTheRefusalAlone() async throws {
        let link = DroppingLink()
        let client = McuMgrClient(transport: link)
        #expect(try await client.send(EchoRequest(text: "ok")).text == "ok")
        await client.close()
        let error = await #expect(throws: McuMgrError.self) { try await client.send(EchoRequest(text: "again")) }
        #expect(error?.message == "cannot connect to tcp://127.0.0.1:9: connection refused; is the port server running?")
    }
}
