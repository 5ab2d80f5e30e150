import ArgumentParser

/// `smp`: manage microcontrollers over SMP (mcumgr) from the command line.
@main
struct SMP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "smp",
        abstract: "Manage microcontrollers over SMP (mcumgr): Zephyr, nRF Connect SDK, MCUboot, Mynewt.",
        discussion: """
            Devices: serial:/dev/ttyACM0?baud=115200 (options framing=console|raw, line=127, mtu=N, flow=rtscts),
            udp:HOST[:PORT] or udp:[IPv6][:PORT] (default port 1337), sim: (a built-in simulated device).
            $SMP_DEVICE sets the default device.

            Exit codes: 0 success, 1 the device answered with an error, 64 usage error, 66 local file
            error, 69 transport failure, 75 timeout, 76 protocol error, 130 interrupted.
            """,
        version: "0.1.0",
        subcommands: [
            OSCommand.self, ImageCommand.self, StatCommand.self, SettingsCommand.self, FSCommand.self,
            ShellCommand.self, EnumCommand.self, BasicCommand.self, LogCommand.self, CrashCommand.self,
            RunCommand.self,
        ]
    )
}
