"""A labgrid driver that manages a board over SMP (mcumgr) with the `smp` tool.

`SMPDriver` binds to a target's serial port (a local `SerialPort` such as `RawSerialPort` or
`USBSerialPort`, or a `NetworkSerialPort` that a labgrid exporter publishes through ser2net), turns it
into an `smp` device URI and runs `smp --json ...` for each call:

    SerialPort                          -> serial:PATH?baud=SPEED
    NetworkSerialPort protocol rfc2217  -> rfc2217://HOST:PORT?baud=SPEED
    NetworkSerialPort protocol raw      -> tcp://HOST:PORT

Importing this module registers the driver with labgrid (`imports: [smp_labgrid]` in an environment
file, or `import smp_labgrid` in Python). See README.md beside this file.
"""

import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import time
from urllib.parse import quote

__all__ = ["SMPDriver", "SMPError", "serial_uri", "network_uri", "add_options"]

# Exit codes of `smp` (README, "Exit codes").
EXIT_CODES = {
    0: "success",
    1: "the device answered with an error",
    64: "usage error",
    66: "a local file is missing or unusable",
    69: "transport failure",
    75: "timeout: the device did not answer",
    76: "protocol error",
    130: "interrupted",
}

UPGRADE_MODES = ("confirm-only", "test-and-confirm", "test-only", "upload-only")


class SMPError(Exception):
    """`smp` failed: the device answered an error, the link failed, or the process did not finish.

    Attributes: `command` (the argument list run), `exit_code` (None when the process was killed at its
    deadline), `kind` (smp's error kind: device, transport, timeout, protocol, usage, file, ... or
    "deadline"), `message` (smp's own message, which says what to do), `error` (smp's whole error
    object, e.g. with `group`, `group_rc` and `name` for a device error), `stderr`, and `result` (for
    an upgrade, smp's final result event).
    """

    def __init__(self, command, exit_code, kind, message, error=None, stderr="", result=None):
        self.command = list(command)
        self.exit_code = exit_code
        self.kind = kind
        self.message = message
        self.error = error or {}
        self.stderr = stderr
        self.result = result
        code = "killed at its deadline" if exit_code is None else f"exit {exit_code}"
        super().__init__(f"`{shlex.join(self.command)}` failed ({code}, {kind}): {message}")


def add_options(uri, options):
    """Appends query options (a dict, or a string such as "framing=raw&line=256") to a device URI."""
    if not options:
        return uri
    if isinstance(options, dict):
        parts = []
        for key, value in options.items():
            if value is None or value is True:
                parts.append(quote(str(key), safe=""))
            else:
                parts.append(f"{quote(str(key), safe='')}={quote(str(value), safe=':/,')}")
        query = "&".join(parts)
    else:
        query = str(options).lstrip("?&")
    if not query:
        return uri
    return f"{uri}{'&' if '?' in uri else '?'}{query}"


def serial_uri(path, speed=None, options=None):
    """The smp URI of a local serial port: serial:PATH?baud=SPEED."""
    if not path:
        raise ValueError("the serial port has no path (is the USB serial port plugged in and matched?)")
    uri = f"serial:{path}"
    if speed:
        uri += f"?baud={int(speed)}"
    return add_options(uri, options)


def _host_for_uri(host):
    # An IPv6 literal goes in brackets; a name or IPv4 address as it is.
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


def network_uri(protocol, host, port, speed=None, options=None):
    """The smp URI of a network serial port: rfc2217://HOST:PORT?baud=SPEED (RFC 2217, e.g. ser2net's
    telnet(rfc2217) accepter, which labgrid's exporter starts) or tcp://HOST:PORT (raw TCP: the baud
    rate is the server's to set)."""
    if not host or not port:
        raise ValueError(f"the network serial port has no host or port ({host!r}:{port!r}); "
                         "is the place acquired and its exporter running?")
    authority = f"{_host_for_uri(host)}:{int(port)}"
    if protocol == "rfc2217":
        uri = f"rfc2217://{authority}"
        if speed:
            uri += f"?baud={int(speed)}"
    elif protocol == "raw":
        uri = f"tcp://{authority}"
    else:
        raise ValueError(f"unknown NetworkSerialPort protocol {protocol!r}: use rfc2217 or raw")
    return add_options(uri, options)


def _stop(process):
    """Stops smp: SIGTERM first (it stops cleanly; an interrupted upload resumes when run again), SIGKILL
    after 5 s. Returns what it printed."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        return process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.communicate()
    except ProcessLookupError:
        return process.communicate()


def run_smp(command, deadline, logger=None):
    """Runs one `smp --json ...` command (a list) with a hard deadline in seconds.

    Returns the list of JSON objects it printed (one per line). Raises SMPError with smp's error
    message when it exits non-zero, and when it outlives the deadline (it is then killed)."""
    logger = logger or logging.getLogger("smp")
    logger.info("running %s", shlex.join(command))
    started = time.monotonic()
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as error:
        raise SMPError(command, None, "file", f"cannot run {command[0]}: {error.strerror}; install smp "
                       "or set the driver's `smp` option to its path") from error
    try:
        out, err = process.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        out, err = _stop(process)
        raise SMPError(command, None, "deadline",
                       f"smp did not finish within {deadline:g} s and was stopped; check the link to the "
                       f"board, or raise the driver's `deadline`. Its last output: "
                       f"{(out or err or '').strip()[-300:]!r}", stderr=err)
    finally:
        # Interrupted here (Ctrl-C, a test's timeout): smp runs in its own session, so stop it too.
        if process.poll() is None:
            _stop(process)
    seconds = time.monotonic() - started
    objects = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                objects.append(value)
    logger.debug("exit %d after %.2f s: %s", process.returncode, seconds, out.strip()[-500:])
    if process.returncode != 0:
        error = next((o["error"] for o in reversed(objects) if isinstance(o.get("error"), dict)), None)
        result = next((o for o in reversed(objects) if o.get("event") == "result"), None)
        if error is not None:
            kind, message = error.get("kind", "unknown"), error.get("message", "")
        else:
            kind = "unknown"
            meaning = EXIT_CODES.get(process.returncode, "unknown exit code")
            message = f"{meaning}; stderr: {err.strip()[-500:] or '(empty)'}"
        raise SMPError(command, process.returncode, kind, message, error=error, stderr=err, result=result)
    return objects


def _register():
    """Defines and registers SMPDriver with labgrid (done on import when labgrid is installed)."""
    import attr
    from labgrid.driver.common import Driver
    from labgrid.factory import target_factory
    from labgrid.resource import SerialPort
    from labgrid.step import step
    from labgrid.util.proxy import proxymanager

    optional_float = attr.validators.optional(attr.validators.instance_of((int, float)))

    @target_factory.reg_driver
    @attr.s(eq=False)
    class SMPDriver(Driver):
        """Manages a board over SMP by running the `smp` tool against the target's serial port.

        Options (environment YAML, under `drivers: SMPDriver:`):
          smp: the smp executable (default: `smp` on PATH, or $SMP_BINARY)
          timeout: smp's --timeout, the longest wait in seconds for each answer (default: smp's own)
          deadline: hard limit in seconds for each smp process except upgrades (default 120)
          upgrade_deadline: hard limit in seconds for an upgrade (default 1800)
          uri_options: extra device URI options, a dict or "key=value&..." (e.g. framing: raw)
          extra_args: arguments put before every command (e.g. ["-v"])
        """

        bindings = {"port": {"SerialPort", "NetworkSerialPort"}}

        smp = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
        timeout = attr.ib(default=None, validator=optional_float)
        deadline = attr.ib(default=120.0, validator=attr.validators.instance_of((int, float)))
        upgrade_deadline = attr.ib(default=1800.0, validator=attr.validators.instance_of((int, float)))
        uri_options = attr.ib(default=None,
                              validator=attr.validators.optional(attr.validators.instance_of((dict, str))))
        extra_args = attr.ib(default=attr.Factory(list), validator=attr.validators.instance_of(list))

        def __attrs_post_init__(self):
            super().__attrs_post_init__()
            self._binary = None

        def on_activate(self):
            wanted = self.smp or os.environ.get("SMP_BINARY") or "smp"
            found = shutil.which(wanted)
            if found is None:
                raise SMPError([wanted], None, "file",
                               f"the smp tool {wanted!r} is not found; install it (README: Installing smp) "
                               "or set the SMPDriver option `smp` (or $SMP_BINARY) to its path")
            self._binary = found

        def on_deactivate(self):
            self._binary = None

        @Driver.check_active
        def device_uri(self):
            """The smp device URI of the bound port (for a NetworkSerialPort through LG_PROXY or the
            exporter's proxy when one is required)."""
            if isinstance(self.port, SerialPort):
                return serial_uri(self.port.port, self.port.speed, self.uri_options)
            host, port = proxymanager.get_host_and_port(self.port)
            return network_uri(self.port.protocol, host, port, self.port.speed, self.uri_options)

        def _command(self, args):
            command = [self._binary, "--device", self.device_uri(), "--json"]
            if self.timeout is not None:
                command += ["--timeout", f"{self.timeout:g}"]
            return command + [str(a) for a in self.extra_args] + [str(a) for a in args]

        @Driver.check_active
        @step(args=["args"])
        def run(self, *args, deadline=None):
            """Runs `smp --device URI --json ARGS...` and returns its JSON answer (the last object it
            printed; {} when it printed none). Raises SMPError with smp's message on failure."""
            objects = run_smp(self._command(args), deadline or self.deadline, self.logger)
            return objects[-1] if objects else {}

        @Driver.check_active
        @step(args=["text"], result=True)
        def echo(self, text):
            """Sends text with `os echo`; returns what the device echoed."""
            return self.run("os", "echo", text).get("r")

        @Driver.check_active
        @step(result=True)
        def params(self):
            """The device's SMP buffers: {"buf_size": ..., "buf_count": ...}."""
            return self.run("os", "params")

        @Driver.check_active
        @step(result=True)
        def image_list(self):
            """The device's image slots (dicts with image, slot, version, hash, active, confirmed, ...)."""
            return self.run("image", "list").get("images", [])

        @Driver.check_active
        @step()
        def reset(self):
            """Resets (reboots) the device."""
            self.run("os", "reset")

        @Driver.check_active
        @step(args=["package", "mode"], result=True)
        def upgrade(self, package, mode="confirm-only", swap_time=None, reconnect_timeout=None,
                    extra=(), deadline=None):
            """Upgrades the board with `smp dfu PACKAGE --mode MODE` (a signed MCUboot .bin, an nRF
            Connect SDK dfu_application.zip or a SUIT envelope) and returns smp's result event (status,
            images with their hashes, final_images as the device lists them, seconds, ...).

            mode: confirm-only (default), test-and-confirm, test-only or upload-only; swap_time: seconds
            the device needs to swap after the reset; reconnect_timeout: how long to try to reach it
            again; extra: more `smp dfu` arguments."""
            if mode not in UPGRADE_MODES:
                raise ValueError(f"unknown upgrade mode {mode!r}: use one of {', '.join(UPGRADE_MODES)}")
            path = os.fspath(package)
            if not os.path.isfile(path):
                raise SMPError([path], None, "file", f"no such package: {path}")
            args = ["dfu", path, "--mode", mode]
            if swap_time is not None:
                args += ["--swap-time", f"{swap_time:g}"]
            if reconnect_timeout is not None:
                args += ["--reconnect-timeout", f"{reconnect_timeout:g}"]
            args += [str(a) for a in extra]
            command = self._command(args)
            events = run_smp(command, deadline or self.upgrade_deadline, self.logger)
            result = next((e for e in reversed(events) if e.get("event") == "result"), None)
            if result is None:
                raise SMPError(command, 0, "protocol", "smp dfu printed no result event")
            if result.get("status") != "success":
                raise SMPError(command, 0, result.get("kind", "unknown"),
                               result.get("message", f"upgrade ended {result.get('status')}"), result=result)
            for image in result.get("images", []):
                self.logger.info("image %s: %s %s", image.get("image"),
                                 "uploaded" if image.get("uploaded") else "already on the device",
                                 image.get("hash"))
            return result

    return SMPDriver


try:
    import labgrid  # noqa: F401
except ImportError:  # the URI helpers work without labgrid
    SMPDriver = None
else:
    SMPDriver = _register()
