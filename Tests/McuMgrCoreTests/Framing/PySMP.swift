import Foundation
import TestSupport
import Testing

/// The PyPI `smp` package (intercreate/smp 4.x), run as a reference implementation.
///
/// Each `run` starts one Python process, sends every request as a JSON line on stdin and reads one
/// JSON reply line per request from stdout. The interpreter is `$SMP_TEST_PYTHON`, else
/// `<package root>/.venv/bin/python` (CI creates it with `pip install smp cbor2`).
enum PySMP {
    /// One request to the Python side; `operation` selects the handler in `script`.
    struct Request: Encodable {
        var operation: String
        var hex: String?
        var frames: [String]?
        var lineLength: Int?
        var op: Int?
        var version: Int?
        var flags: Int?
        var length: Int?
        var group: Int?
        var sequence: Int?
        var command: Int?
        var text: String?
        var offset: Int?
    }

    /// One reply; which fields are set depends on the request. `error` is set when Python raised.
    struct Reply: Decodable {
        var hex: String?
        var frames: [String]?
        var op: Int?
        var version: Int?
        var flags: Int?
        var length: Int?
        var group: Int?
        var sequence: Int?
        var command: Int?
        var text: String?
        var offset: Int?
        var data: String?
        var error: String?
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The interpreter to use, or nil.
    static var python: String? { TestPython.path }

    /// Whether the interpreter exists and can import `smp` and `cbor2`.
    static let isAvailable: Bool = TestPython.hasModule("smp.packet, smp.header, smp.os_management, cbor2")

    static let unavailableComment: Comment =
        "needs a Python with the PyPI smp package: set SMP_TEST_PYTHON or create <package root>/.venv"

    /// Runs all requests in one Python process; returns the replies in order.
    static func run(_ requests: [Request]) throws -> [Reply] {
        let encoder = JSONEncoder()
        var input = ""
        for request in requests {
            input += String(decoding: try encoder.encode(request), as: UTF8.self) + "\n"
        }
        let output: String
        do {
            output = try TestPython.run(script: script, input: input)
        } catch {
            throw Failure(description: "\(error)")
        }
        let decoder = JSONDecoder()
        let replies = try output.split(separator: "\n").map { try decoder.decode(Reply.self, from: Data($0.utf8)) }
        guard replies.count == requests.count else {
            throw Failure(description: "python answered \(replies.count) of \(requests.count) requests")
        }
        return replies
    }

    /// The Python side: one handler per `operation`.
    static let script = #"""
import json
import logging
import sys

from smp import header as smpheader
from smp import image_management as img
from smp import os_management as osm
from smp import packet as smppacket

logging.disable(logging.CRITICAL)


def handle(request):
    operation = request["operation"]
    if operation == "header_loads":
        h = smpheader.Header.loads(bytes.fromhex(request["hex"]))
        return {"op": int(h.op), "version": int(h.version), "flags": int(h.flags), "length": h.length,
                "group": int(h.group_id), "sequence": h.sequence, "command": int(h.command_id)}
    if operation == "header_build":
        h = smpheader.Header(op=smpheader.OP(request["op"]), version=smpheader.Version(request["version"]),
                             flags=smpheader.Flag(request["flags"]), length=request["length"],
                             group_id=request["group"], sequence=request["sequence"],
                             command_id=request["command"])
        return {"hex": bytes(h).hex()}
    if operation == "serial_encode":
        frames = smppacket.encode(bytes.fromhex(request["hex"]), line_length=request["lineLength"])
        return {"frames": [frame.hex() for frame in frames]}
    if operation == "serial_decode":
        decoder = smppacket.decode()
        next(decoder)
        for frame in request["frames"]:
            try:
                decoder.send(bytes.fromhex(frame))
            except StopIteration as done:
                return {"hex": bytes(done.value).hex()}
        return {"error": "smp decoder wants more frames"}
    if operation == "echo_request":
        message = osm.EchoWriteRequest(d=request["text"], sequence=request["sequence"],
                                       version=smpheader.Version(request["version"]))
        return {"hex": bytes(message).hex()}
    if operation == "echo_request_loads":
        message = osm.EchoWriteRequest.loads(bytes.fromhex(request["hex"]))
        return {"text": message.d, "sequence": message.header.sequence, "version": int(message.header.version)}
    if operation == "echo_response_loads":
        message = osm.EchoWriteResponse.loads(bytes.fromhex(request["hex"]))
        return {"text": message.r, "sequence": message.header.sequence, "op": int(message.header.op)}
    if operation == "upload_request":
        data = bytes.fromhex(request["hex"])
        message = img.ImageUploadWriteRequest(off=request["offset"], data=data, len=request["length"],
                                              sequence=request["sequence"])
        return {"hex": bytes(message).hex()}
    if operation == "upload_request_loads":
        message = img.ImageUploadWriteRequest.loads(bytes.fromhex(request["hex"]))
        return {"offset": message.off, "data": message.data.hex(), "length": message.len,
                "sequence": message.header.sequence}
    raise ValueError("unknown operation " + operation)


for line in sys.stdin.read().splitlines():
    try:
        reply = handle(json.loads(line))
    except Exception as error:  # reported to the Swift side per request
        reply = {"error": type(error).__name__ + ": " + str(error)}
    sys.stdout.write(json.dumps(reply) + "\n")
"""#
}

extension Array where Element == UInt8 {
    /// Lower-case hex, as Python's `bytes.hex()`.
    var pySMPHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(count * 2)
        for byte in self {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Bytes from hex text; nil when it is not hex.
    init?(pySMPHex hex: String) {
        let characters = Array(hex.utf8)
        guard characters.count % 2 == 0 else { return nil }
        func value(_ character: UInt8) -> UInt8? {
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return character - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count / 2)
        var index = 0
        while index < characters.count {
            guard let high = value(characters[index]), let low = value(characters[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self = bytes
    }
}
