#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import McuManager

/// What a failed system call on the serial port at `path` means to the user, with advice.
private func serialPortError(_ failure: SystemCallError, path: String) -> McuMgrError {
    let advice: String
    switch failure.code {
    case ENOENT, ENODEV, ENXIO:
        advice = "no such serial port; check that the board is connected and the path is right (`smp devices` or `ls /dev/ttyACM* /dev/ttyUSB*`)"
    case EACCES, EPERM:
        advice = "permission denied; add your user to the `dialout` group (then log in again) or run with sudo"
    case EBUSY:
        advice = "the port is in use by another program (a terminal, ModemManager?); close it and retry"
    case ENOTTY, EINVAL:
        advice = "\(path) is not a serial port"
    default:
        advice = "check the port and retry"
    }
    return McuMgrError(.transport, "cannot open serial port \(path): \(failure.call) failed: \(failure); \(advice)")
}

/// Serial line settings applied with termios.
enum Termios {
    /// The termios speed constant for a baud rate, nil when the system has none.
    static func speed(for baud: Int) -> speed_t? {
        let table: [Int: speed_t] = [
            1200: speed_t(B1200), 2400: speed_t(B2400), 4800: speed_t(B4800), 9600: speed_t(B9600),
            19200: speed_t(B19200), 38400: speed_t(B38400), 57600: speed_t(B57600),
            115200: speed_t(B115200), 230400: speed_t(B230400), 460800: speed_t(B460800),
            500000: speed_t(B500000), 576000: speed_t(B576000), 921600: speed_t(B921600),
            1000000: speed_t(B1000000), 1152000: speed_t(B1152000), 1500000: speed_t(B1500000),
            2000000: speed_t(B2000000), 2500000: speed_t(B2500000), 3000000: speed_t(B3000000),
            3500000: speed_t(B3500000), 4000000: speed_t(B4000000),
        ]
        return table[baud]
    }

    /// Opens `path` non-blocking and puts it in raw mode at `baud`, with optional RTS/CTS flow control.
    static func openRaw(path: String, baud: Int, flowControl: Bool) throws -> Int32 {
        guard let speed = speed(for: baud) else {
            throw McuMgrError(.usage, "unsupported baud rate \(baud); use a standard rate such as 115200 or 1000000")
        }
        let fd: Int32
        do throws(SystemCallError) {
            fd = try SystemCall.open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        } catch {
            throw serialPortError(error, path: path)
        }
        do throws(SystemCallError) {
            var t = termios()
            _ = try SystemCall.retryingOnInterrupt("tcgetattr") { tcgetattr(fd, &t) }
            cfmakeraw(&t)
            cfsetispeed(&t, speed)
            cfsetospeed(&t, speed)
            t.c_cflag |= tcflag_t(CLOCAL | CREAD)
            if flowControl {
                t.c_cflag |= tcflag_t(CRTSCTS)
            } else {
                t.c_cflag &= ~tcflag_t(CRTSCTS)
            }
            t.c_iflag &= ~tcflag_t(IXON | IXOFF | IXANY)
            withUnsafeMutableBytes(of: &t.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            _ = try SystemCall.retryingOnInterrupt("tcsetattr") { tcsetattr(fd, TCSANOW, &t) }
            _ = tcflush(fd, TCIOFLUSH)
        } catch {
            SystemCall.close(fd)
            throw serialPortError(error, path: path)
        }
        return fd
    }
}
