import Testing

extension FramingCodecVerifier {
    /// What a Telnet (RFC 854) byte stream carries, read independently of the package's own codec.
    public struct TelnetStream: Equatable, Sendable {
        /// The data bytes: IAC IAC read as one 0xFF, and (in NVT mode) CR NUL as CR.
        public var data: [UInt8] = []
        /// The commands in order, each whole: IAC WILL/WONT/DO/DONT option, IAC SB … IAC SE (as sent,
        /// doubled IACs included), or IAC and a one-byte command (NOP, GA, …).
        public var commands: [[UInt8]] = []
        /// What breaks RFC 854: an IAC followed by a byte that is no command (a data 0xFF not doubled),
        /// a subnegotiation cut by another command or never ended, a CR not followed by NUL or LF in NVT
        /// mode, a stream that ends inside a command.
        public var problems: [String] = []

        public init(data: [UInt8] = [], commands: [[UInt8]] = [], problems: [String] = []) {
            self.data = data
            self.commands = commands
            self.problems = problems
        }
    }

    /// Reads `wire` as one direction of a Telnet connection. `binary`: the receiver agreed to binary
    /// transmission in this direction (then CR is plain data; otherwise RFC 854's NVT rule applies).
    public static func telnet(_ wire: [UInt8], binary: Bool) -> TelnetStream {
        let iac: UInt8 = 255, sb: UInt8 = 250, se: UInt8 = 240, cr: UInt8 = 0x0D
        var stream = TelnetStream()
        var index = 0
        while index < wire.count {
            let byte = wire[index]
            if byte == cr && !binary {
                guard index + 1 < wire.count else {
                    stream.problems.append("the stream ends after a CR (NVT mode sends CR NUL or CR LF)")
                    stream.data.append(cr)
                    break
                }
                switch wire[index + 1] {
                case 0x00:
                    stream.data.append(cr)
                    index += 2
                case 0x0A:
                    stream.data.append(cr)
                    index += 1
                default:
                    stream.problems.append("a CR at \(index) is followed by \(wire[index + 1]), not NUL or LF (NVT mode)")
                    stream.data.append(cr)
                    index += 1
                }
                continue
            }
            guard byte == iac else {
                stream.data.append(byte)
                index += 1
                continue
            }
            guard index + 1 < wire.count else {
                stream.problems.append("the stream ends after an IAC at \(index)")
                break
            }
            let command = wire[index + 1]
            switch command {
            case iac:
                stream.data.append(iac)
                index += 2
            case 251...254:
                guard index + 2 < wire.count else {
                    stream.problems.append("the stream ends inside IAC \(command) at \(index)")
                    index = wire.count
                    break
                }
                stream.commands.append(Array(wire[index..<index + 3]))
                index += 3
            case sb:
                var end = index + 2
                var closed = false
                while end < wire.count {
                    if wire[end] == iac, end + 1 < wire.count {
                        if wire[end + 1] == iac {
                            end += 2
                            continue
                        }
                        if wire[end + 1] == se { closed = true }
                        break
                    }
                    if wire[end] == iac { break }
                    end += 1
                }
                if closed {
                    stream.commands.append(Array(wire[index..<end + 2]))
                    index = end + 2
                } else {
                    stream.problems.append("the subnegotiation at \(index) is not ended by IAC SE")
                    stream.commands.append(Array(wire[index..<end]))
                    index = end
                }
            case se...249:
                stream.commands.append([iac, command])
                index += 2
            default:
                stream.problems.append(
                    "IAC at \(index) is followed by \(command), which is no Telnet command (a data 0xFF must be doubled)")
                index += 1
            }
        }
        return stream
    }

    /// Records an issue unless `wire` is well-formed Telnet whose data is exactly `data` (so every data
    /// 0xFF was doubled and, unless `binary`, every CR sent as CR NUL or CR LF), and whose commands are
    /// `commands`, if given. Returns what it read.
    @discardableResult
    public static func verifyTelnet(
        _ wire: [UInt8], carrying data: [UInt8], binary: Bool, commands: [[UInt8]]? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> TelnetStream {
        let stream = telnet(wire, binary: binary)
        for problem in stream.problems.prefix(10) {
            Issue.record("Telnet (\(binary ? "binary" : "NVT")): \(problem)", sourceLocation: sourceLocation)
        }
        if stream.data != data {
            let at = zip(stream.data, data).prefix { $0 == $1 }.count
            Issue.record(
                "Telnet data: \(stream.data.count) bytes instead of \(data.count), first difference at \(at)",
                sourceLocation: sourceLocation)
        }
        if let commands, stream.commands != commands {
            Issue.record("Telnet commands: \(stream.commands) instead of \(commands)", sourceLocation: sourceLocation)
        }
        return stream
    }
}
