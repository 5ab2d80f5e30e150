/// The client side of Telnet (RFC 854) with the Com Port Control option (RFC 2217), as spoken by
/// ser2net's `telnet(rfc2217)` accepters: no I/O and no clocks, bytes in and bytes out.
///
/// - Outbound: `start()` opens the negotiation (WILL COM-PORT-OPTION, WILL/DO BINARY, WILL/DO
///   SUPPRESS-GO-AHEAD); once the server agrees to the com port option (DO COM-PORT-OPTION) the port
///   settings follow as subnegotiations (SET-BAUDRATE, SET-DATASIZE, SET-PARITY, SET-STOPSIZE,
///   SET-CONTROL). `encode(_:)` escapes data: 0xFF as IAC IAC, and CR as CR NUL while the server has not
///   agreed to binary transmission from us (RFC 854's NVT rule).
/// - Inbound: `decode(_:)` strips Telnet commands (IAC IAC is a data 0xFF; a CR NUL is a CR while the
///   server does not send binary), answers option requests (options other than BINARY, SGA and
///   COM-PORT-OPTION are refused), parses subnegotiations (split across reads as they may be) and
///   reports the server's acknowledgements (command codes + 100), e.g. the baud rate it really set.
///
/// Options follow RFC 1143's rules: a request for a state already in force is not answered, so two
/// peers cannot loop.
public struct RFC2217Codec: Sendable {
    // MARK: Telnet and RFC 2217 constants

    public static let iac: UInt8 = 255
    public static let dont: UInt8 = 254
    public static let `do`: UInt8 = 253
    public static let wont: UInt8 = 252
    public static let will: UInt8 = 251
    public static let sb: UInt8 = 250
    public static let se: UInt8 = 240

    /// Telnet options this codec knows.
    public enum Option {
        public static let binary: UInt8 = 0
        public static let echo: UInt8 = 1
        public static let suppressGoAhead: UInt8 = 3
        public static let comPort: UInt8 = 44
    }

    /// RFC 2217 commands, client to server; the server answers with the code + 100.
    public enum Command: UInt8, Sendable, Hashable, CaseIterable {
        case signature = 0
        case setBaudRate = 1
        case setDataSize = 2
        case setParity = 3
        case setStopSize = 4
        case setControl = 5
        case notifyLineState = 6
        case notifyModemState = 7
        case flowControlSuspend = 8
        case flowControlResume = 9
        case setLineStateMask = 10
        case setModemStateMask = 11
        case purgeData = 12
    }

    /// SET-PARITY values.
    public enum Parity: UInt8, Sendable, Hashable, CaseIterable {
        case none = 1, odd = 2, even = 3, mark = 4, space = 5
    }

    /// SET-STOPSIZE values.
    public enum StopBits: UInt8, Sendable, Hashable, CaseIterable {
        case one = 1, two = 2, onePointFive = 3
    }

    /// The serial settings the server is asked to apply to its port.
    public struct PortSettings: Sendable, Hashable {
        public var baudRate: Int
        /// 5 to 8.
        public var dataBits: Int
        public var parity: Parity
        public var stopBits: StopBits
        /// RTS/CTS hardware flow control (SET-CONTROL 3), else none (SET-CONTROL 1).
        public var hardwareFlowControl: Bool

        public init(
            baudRate: Int = 115_200, dataBits: Int = 8, parity: Parity = .none, stopBits: StopBits = .one,
            hardwareFlowControl: Bool = false
        ) {
            self.baudRate = baudRate
            self.dataBits = dataBits
            self.parity = parity
            self.stopBits = stopBits
            self.hardwareFlowControl = hardwareFlowControl
        }

        /// The subnegotiations that request these settings, in order, with the value each carries.
        var requests: [(Command, [UInt8])] {
            let baud = UInt32(clamping: baudRate)
            return [
                (.setBaudRate, [UInt8(baud >> 24), UInt8(truncatingIfNeeded: baud >> 16), UInt8(truncatingIfNeeded: baud >> 8), UInt8(truncatingIfNeeded: baud)]),
                (.setDataSize, [UInt8(clamping: dataBits)]),
                (.setParity, [parity.rawValue]),
                (.setStopSize, [stopBits.rawValue]),
                (.setControl, [hardwareFlowControl ? 3 : 1]),
            ]
        }
    }

    /// Something the server said that is not data.
    public enum Event: Sendable, Hashable {
        /// The server agreed to the com port option (DO COM-PORT-OPTION); the settings were sent.
        case comPortAccepted
        /// The server refused the com port option (DONT or WONT COM-PORT-OPTION): it is no RFC 2217
        /// server, or its port is not serial.
        case comPortRefused
        /// The server refused binary transmission in one direction: CR is sent as CR NUL (`outbound`),
        /// or a received CR NUL is read as CR (inbound).
        case binaryRefused(outbound: Bool)
        /// The server's answer to a request: the command and the value it reports (for SET-BAUDRATE
        /// the baud rate it set, big endian decoded; else the value byte(s) as an integer).
        case acknowledged(Command, value: Int)
        /// NOTIFY-LINESTATE / NOTIFY-MODEMSTATE from the server.
        case lineState(UInt8)
        case modemState(UInt8)
        /// The server asks us to stop (true) or resume (false) sending.
        case flowControl(suspend: Bool)
        /// A subnegotiation this codec does not interpret (option, then its bytes).
        case otherSubnegotiation(option: UInt8, bytes: [UInt8])
    }

    /// What `decode(_:)` found in a chunk of received bytes.
    public struct Decoded: Sendable, Hashable {
        /// The data bytes, Telnet commands removed.
        public var data: [UInt8] = []
        /// Bytes to send back to the server (answers to option requests, the port settings).
        public var reply: [UInt8] = []
        public var events: [Event] = []

        public init(data: [UInt8] = [], reply: [UInt8] = [], events: [Event] = []) {
            self.data = data
            self.reply = reply
            self.events = events
        }
    }

    /// RFC 1143's option states (without the queue bit: this codec never changes its mind).
    enum OptionState: Sendable, Hashable {
        case no, yes, wantYes
    }

    private enum ParseState: Sendable, Hashable {
        case data
        /// A CR arrived while the server sends in NVT mode: a NUL next is dropped.
        case afterCR
        case iac
        /// IAC WILL/WONT/DO/DONT seen; the option byte follows.
        case negotiation(UInt8)
        case subnegotiation
        case subnegotiationIAC
    }

    public let settings: PortSettings
    /// Options we offer to perform (WILL).
    static let localOptions: Set<UInt8> = [Option.binary, Option.suppressGoAhead, Option.comPort]
    /// Options we accept the server performing (DO).
    static let remoteOptions: Set<UInt8> = [Option.binary, Option.suppressGoAhead]

    private(set) var local: [UInt8: OptionState] = [:]
    private(set) var remote: [UInt8: OptionState] = [:]
    private var state = ParseState.data
    private var subnegotiationBytes: [UInt8] = []
    /// Requests sent and not yet acknowledged.
    public private(set) var pendingAcknowledgements: Set<Command> = []
    private var settingsSent = false
    /// The baud rate the server acknowledged, nil before its answer.
    public private(set) var acknowledgedBaudRate: Int?
    /// Whether the server refused the com port option.
    public private(set) var comPortRefused = false

    /// The longest subnegotiation kept; longer ones (a misbehaving server) are cut.
    public static let maximumSubnegotiationLength = 1024

    public init(settings: PortSettings) {
        self.settings = settings
    }

    /// The opening negotiation, to send once connected.
    public mutating func start() -> [UInt8] {
        var out: [UInt8] = []
        for option in [Option.binary, Option.suppressGoAhead, Option.comPort] where local[option, default: .no] == .no {
            local[option] = .wantYes
            out += [Self.iac, Self.will, option]
        }
        for option in [Option.binary, Option.suppressGoAhead] where remote[option, default: .no] == .no {
            remote[option] = .wantYes
            out += [Self.iac, Self.do, option]
        }
        return out
    }

    /// Whether the server agreed to the com port option and acknowledged every setting sent.
    public var isNegotiated: Bool {
        local[Option.comPort] == .yes && settingsSent && pendingAcknowledgements.isEmpty
    }

    /// Whether we send binary (else NVT: CR goes out as CR NUL).
    public var sendsBinary: Bool { local[Option.binary] == .yes }
    /// Whether the server sends binary (else a CR NUL it sends is a CR).
    public var receivesBinary: Bool { remote[Option.binary] == .yes }

    /// Data to send, escaped for Telnet.
    public func encode(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(data.count + data.count / 16 + 2)
        let binary = sendsBinary
        for byte in data {
            out.append(byte)
            if byte == Self.iac {
                out.append(Self.iac)
            } else if byte == 0x0D && !binary {
                out.append(0x00)
            }
        }
        return out
    }

    /// Strips Telnet commands from received bytes, answering the server where needed.
    public mutating func decode(_ bytes: [UInt8]) -> Decoded {
        var result = Decoded()
        for byte in bytes { step(byte, into: &result) }
        return result
    }

    private mutating func step(_ byte: UInt8, into result: inout Decoded) {
        switch state {
        case .data, .afterCR:
            if state == .afterCR {
                state = .data
                if byte == 0x00 { return }
            }
            if byte == Self.iac {
                state = .iac
            } else {
                result.data.append(byte)
                if byte == 0x0D && !receivesBinary { state = .afterCR }
            }
        case .iac:
            switch byte {
            case Self.iac:
                result.data.append(Self.iac)
                state = .data
            case Self.will, Self.wont, Self.do, Self.dont:
                state = .negotiation(byte)
            case Self.sb:
                subnegotiationBytes = []
                state = .subnegotiation
            default:
                // NOP, DM, BRK, IP, AO, AYT, EC, EL, GA, a stray SE: nothing for a serial link to do.
                state = .data
            }
        case .negotiation(let verb):
            state = .data
            negotiate(verb, byte, into: &result)
        case .subnegotiation:
            if byte == Self.iac {
                state = .subnegotiationIAC
            } else if subnegotiationBytes.count < Self.maximumSubnegotiationLength {
                subnegotiationBytes.append(byte)
            }
        case .subnegotiationIAC:
            switch byte {
            case Self.iac:
                if subnegotiationBytes.count < Self.maximumSubnegotiationLength { subnegotiationBytes.append(Self.iac) }
                state = .subnegotiation
            case Self.se:
                state = .data
                subnegotiation(subnegotiationBytes, into: &result)
            default:
                // RFC 854 allows no other command inside SB: end the subnegotiation and read the
                // byte as the command it is.
                state = .data
                subnegotiation(subnegotiationBytes, into: &result)
                state = .iac
                step(byte, into: &result)
            }
        }
    }

    private mutating func negotiate(_ verb: UInt8, _ option: UInt8, into result: inout Decoded) {
        switch verb {
        case Self.will:
            // The server offers to perform `option`.
            switch remote[option, default: .no] {
            case .no:
                if Self.remoteOptions.contains(option) {
                    remote[option] = .yes
                    result.reply += [Self.iac, Self.do, option]
                } else {
                    result.reply += [Self.iac, Self.dont, option]
                }
            case .wantYes: remote[option] = .yes
            case .yes: break
            }
        case Self.wont:
            switch remote[option, default: .no] {
            case .yes:
                remote[option] = .no
                result.reply += [Self.iac, Self.dont, option]
                if option == Option.binary { result.events.append(.binaryRefused(outbound: false)) }
            case .wantYes:
                remote[option] = .no
                if option == Option.binary { result.events.append(.binaryRefused(outbound: false)) }
            case .no: break
            }
        case Self.do:
            // The server asks us to perform `option`.
            switch local[option, default: .no] {
            case .no:
                if Self.localOptions.contains(option) {
                    local[option] = .yes
                    result.reply += [Self.iac, Self.will, option]
                    enabled(option, into: &result)
                } else {
                    result.reply += [Self.iac, Self.wont, option]
                }
            case .wantYes:
                local[option] = .yes
                enabled(option, into: &result)
            case .yes: break
            }
        case Self.dont:
            let before = local[option, default: .no]
            guard before != .no else { return }
            local[option] = .no
            if before == .yes { result.reply += [Self.iac, Self.wont, option] }
            if option == Option.comPort {
                comPortRefused = true
                result.events.append(.comPortRefused)
            } else if option == Option.binary {
                result.events.append(.binaryRefused(outbound: true))
            }
        default: break
        }
    }

    /// We now perform `option`: for the com port option, send the port settings.
    private mutating func enabled(_ option: UInt8, into result: inout Decoded) {
        guard option == Option.comPort, !settingsSent else { return }
        settingsSent = true
        result.events.append(.comPortAccepted)
        for (command, value) in settings.requests {
            result.reply += Self.subnegotiation(command, value)
            pendingAcknowledgements.insert(command)
        }
    }

    /// IAC SB COM-PORT-OPTION command value IAC SE, with 0xFF in the value doubled.
    public static func subnegotiation(_ command: Command, _ value: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [iac, sb, Option.comPort, command.rawValue]
        for byte in value {
            out.append(byte)
            if byte == iac { out.append(iac) }
        }
        return out + [iac, se]
    }

    private mutating func subnegotiation(_ bytes: [UInt8], into result: inout Decoded) {
        guard let option = bytes.first else { return }
        guard option == Option.comPort, bytes.count >= 2, bytes[1] >= 100,
            let command = Command(rawValue: bytes[1] - 100)
        else {
            result.events.append(.otherSubnegotiation(option: option, bytes: Array(bytes.dropFirst())))
            return
        }
        let value = bytes.dropFirst(2)
        switch command {
        case .notifyLineState:
            result.events.append(.lineState(value.first ?? 0))
        case .notifyModemState:
            result.events.append(.modemState(value.first ?? 0))
        case .flowControlSuspend:
            result.events.append(.flowControl(suspend: true))
        case .flowControlResume:
            result.events.append(.flowControl(suspend: false))
        default:
            let number = value.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            if command == .setBaudRate { acknowledgedBaudRate = number }
            pendingAcknowledgements.remove(command)
            result.events.append(.acknowledged(command, value: number))
        }
    }
}
