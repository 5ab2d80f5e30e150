import McuMgrCore
import Testing

@testable import McuMgrSimulator

@Suite("Simulated device: fuzzing")
struct SimulatedDeviceFuzzTests {
    /// Valid-looking requests for every group, to mutate.
    static let seeds: [[UInt8]] = {
        var seeds: [[UInt8]] = []
        let image = SimulatedMCUbootImage.build(version: McuMgrImageVersion(major: 2, minor: 0, revision: 0), body: pseudoRandomBytes(300, seed: 5))
        let requests: [(SMPOperation, McuMgrGroup, UInt8, CBOR)] = [
            (.write, .os, 0, ["d": "hello"]),
            (.read, .os, 2, [:]), (.read, .os, 4, [:]), (.write, .os, 4, ["datetime": "2024-01-01T00:00:00"]),
            (.write, .os, 5, ["force": true]), (.read, .os, 7, ["format": "a"]), (.read, .os, 8, ["query": "mode"]),
            (.read, .image, 0, [:]), (.write, .image, 0, ["confirm": true]),
            (.write, .image, 1, ["off": 0, "len": .unsigned(UInt64(image.count)), "data": .bytes(image), "sha": .bytes(Array(SHA256.hash(data: image)))]),
            (.write, .image, 5, ["slot": 1]), (.read, .image, 6, [:]),
            (.read, .stats, 0, ["name": "ble"]), (.read, .stats, 1, [:]),
            (.read, .settings, 0, ["name": "app/name", "max_size": 10]), (.write, .settings, 0, ["name": "a/b", "val": .bytes([1])]),
            (.write, .settings, 3, [:]), (.read, .log, 0, [:]), (.write, .crash, 0, ["t": "assert"]),
            (.write, .run, 0, ["testname": "all"]),
            (.write, .fileSystem, 0, ["name": "/lfs1/f", "off": 0, "len": 10, "data": .bytes([1, 2, 3])]),
            (.read, .fileSystem, 0, ["name": "/lfs1/hello.txt", "off": 0]),
            (.read, .fileSystem, 2, ["name": "/lfs1/hello.txt", "type": "sha256", "off": 1, "len": 4]),
            (.write, .shell, 0, ["argv": ["fs", "ls"]]), (.read, .enumeration, 3, ["groups": [0, 1]]),
            (.write, .zephyrBasic, 0, [:]),
        ]
        for (operation, group, command, body) in requests {
            seeds.append(smpRequest(operation, group: group, command: command, body: body))
        }
        return seeds
    }()

    static func mutate(_ packet: [UInt8], using rng: inout SeededGenerator) -> [UInt8] {
        var p = packet
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            switch Int.random(in: 0..<6, using: &rng) {
            case 0 where !p.isEmpty:
                p[Int.random(in: 0..<p.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 1 where !p.isEmpty:
                let i = Int.random(in: 0..<p.count, using: &rng)
                p[i] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            case 2 where p.count > 1:
                p.removeLast(Int.random(in: 1..<p.count, using: &rng))
            case 3:
                p.append(contentsOf: (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            case 4 where p.count > 8:
                // Keep the header consistent with a mutated body so the payload is decoded.
                let i = Int.random(in: 8..<p.count, using: &rng)
                p[i] = UInt8.random(in: 0...255, using: &rng)
            default:
                if p.count >= 8 {
                    let n = p.count - 8
                    p[2] = UInt8(truncatingIfNeeded: n >> 8)
                    p[3] = UInt8(truncatingIfNeeded: n)
                }
            }
        }
        return p
    }

    @Test(arguments: [false, true])
    func randomAndMutatedPacketsNeverCrash(indefinite: Bool) throws {
        var configuration = SimulatorConfiguration()
        configuration.indefiniteLengthMaps = indefinite
        configuration.bufferSize = 512
        let device = SimulatedDevice(configuration: configuration)
        var rng = SeededGenerator(seed: indefinite ? 99 : 7)
        var answered = 0
        for iteration in 0..<6000 {
            let packet: [UInt8]
            if iteration % 5 == 0 {
                packet = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            } else {
                packet = Self.mutate(Self.seeds[Int.random(in: 0..<Self.seeds.count, using: &rng)], using: &rng)
            }
            let instant = SMPInstant(nanoseconds: UInt64(iteration) * 10_000_000)
            guard let response = device.handle(packet, now: instant) else { continue }
            answered += 1
            // Every answer is within the buffer and made of whole, decodable response packets.
            #expect(response.count <= configuration.bufferSize || packet.count >= 16)
            var rest = response[...]
            while !rest.isEmpty {
                let header = try SMPHeader(decoding: rest)
                #expect(header.operation.isResponse)
                let end = rest.startIndex + 8 + Int(header.length)
                try #require(end <= rest.endIndex)
                _ = try CBOR(decoding: rest[(rest.startIndex + 8)..<end])
                #expect(end - rest.startIndex <= configuration.bufferSize)
                rest = rest[end...]
            }
        }
        #expect(answered > 1000)
    }

    @Test(arguments: [96, 128, 256, 384])
    func everyResponseFitsSmallBuffers(bufferSize: Int) throws {
        var configuration = SimulatorConfiguration()
        configuration.bufferSize = bufferSize
        configuration.imageCount = 2
        let device = SimulatedDevice(configuration: configuration)
        var answered = 0
        for seed in Self.seeds {
            guard let response = device.handle(seed, now: .zero) else {
                // Too long for the buffer, or Mynewt's crash test, which the device never answers.
                #expect(seed.count > bufferSize || (seed[4] == 0 && seed[5] == McuMgrGroup.crash.rawValue))
                continue
            }
            answered += 1
            #expect(response.count <= bufferSize, "group \(response[5]) command \(response[7])")
            _ = try decodeResponse(response, bufferSize: bufferSize)
        }
        #expect(answered > Self.seeds.count / 2)
    }
}
