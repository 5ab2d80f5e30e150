import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A serial line with faults, between `smp` and a device's pty: a new pty whose slave `smp` opens, relayed
/// to the device's pty, flipping one bit of a byte at random (`corruption` per byte) and losing whole lines
/// on their way to the device (`lineLoss` per line), seeded so that a failure replays. A noisy UART.
final class SerialFaultRelay: @unchecked Sendable {
    /// The path `smp` opens.
    let path: String
    private let master: Int32
    private let slave: Int32
    private let device: Int32
    private let corruption: Double
    private let lineLoss: Double
    private let life = RelayLife()
    private var dice: SeededBytes
    private(set) var corrupted = 0
    private(set) var linesLost = 0

    init(devicePath: String, corruption: Double = 0, lineLoss: Double = 0, seed: UInt64 = 11) throws {
        var master: Int32 = -1
        var slave: Int32 = -1
        guard openpty(&master, &slave, nil, nil, nil) == 0 else { throw E2EError("openpty: errno \(errno)") }
        for fd in [master, slave] {
            var t = termios()
            tcgetattr(fd, &t)
            cfmakeraw(&t)
            tcsetattr(fd, TCSANOW, &t)
        }
        let device = open(devicePath, O_RDWR | O_NOCTTY)
        guard device >= 0 else { throw E2EError("cannot open \(devicePath): errno \(errno)") }
        var t = termios()
        tcgetattr(device, &t)
        cfmakeraw(&t)
        tcsetattr(device, TCSANOW, &t)
        self.master = master
        self.slave = slave  // kept open: a pty master reads EIO while no slave is open
        self.device = device
        // The slave's name, as the kernel shows it for the open descriptor.
        guard let name = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(slave)") else {
            throw E2EError("cannot name the relay's pty")
        }
        self.path = name
        self.corruption = corruption
        self.lineLoss = lineLoss
        self.dice = SeededBytes(seed: seed)
        Thread { [self] in self.relay() }.start()
    }

    func stop() { life.stop() }

    /// Flips a bit of some bytes.
    private func corrupt(_ bytes: inout [UInt8]) {
        guard corruption > 0 else { return }
        for i in bytes.indices where dice.chance(corruption) {
            bytes[i] ^= UInt8(1) << (dice.next() & 7)
            corrupted += 1
        }
    }

    private func relay() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var towardDevice: [UInt8] = []  // the line being relayed to the device
        var fds = [pollfd(fd: master, events: Int16(POLLIN), revents: 0), pollfd(fd: device, events: Int16(POLLIN), revents: 0)]
        while life.isRunning {
            guard poll(&fds, 2, 50) > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                let n = read(master, &buffer, buffer.count)
                if n > 0 {
                    for byte in buffer[0..<n] {
                        towardDevice.append(byte)
                        guard byte == 0x0A else { continue }
                        if dice.chance(lineLoss) {
                            linesLost += 1
                        } else {
                            corrupt(&towardDevice)
                            _ = towardDevice.withUnsafeBytes { write(device, $0.baseAddress, $0.count) }
                        }
                        towardDevice.removeAll(keepingCapacity: true)
                    }
                }
            }
            if fds[1].revents & Int16(POLLIN) != 0 {
                let n = read(device, &buffer, buffer.count)
                if n > 0 {
                    var bytes = Array(buffer[0..<n])
                    corrupt(&bytes)
                    _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
                }
            }
        }
        close(device)
        close(master)
        close(slave)
        life.threadEnded()
    }
}
