#!/usr/bin/env python3
"""End-to-end test: labgrid drives two simulated boards through ser2net with SMPDriver.

What it starts (all on loopback, each in its own process group, all stopped at the end):
  - three `smp-sim --pty-link` devices (boards 1, 2 and 3);
  - labgrid-coordinator on a free port;
  - ser2net exporting board 2's pty as raw TCP (our own YAML config);
  - labgrid-exporter exporting board 1's pty as a RawSerialPort (the exporter starts ser2net itself
    when the place is acquired; clients see a NetworkSerialPort with protocol rfc2217) and board 2's
    ser2net port as a NetworkSerialPort with protocol raw.
Then, with labgrid-client, one place per remote board (create, add-match, acquire); through SMPDriver
in a labgrid Environment (board 3 as a local RawSerialPort, boards 1 and 2 as RemotePlaces): os params,
echo, image list, `upgrade` of an imgtool-signed image (board 3 test-and-confirm over serial:, board 1
confirm-only over rfc2217://, board 2 test-only over tcp://), and a check that the device runs the new
image's hash, confirmed or not as the mode implies; the README's pytest examples through labgrid's
pytest plugin (--lg-env examples/env.yaml, the place from $LG_PLACE): test_board.py against board 1,
then test_upgrade.py upgrading boards 1 and 2 at once, each with its JUnit report; release of both
places, and a check that the exporter stops board 1's ser2net.

Every wait is bounded; the whole run stops with a clear message after --budget seconds (default 170).
Run it with the labgrid venv's Python (Scripts/labgrid-e2e.sh does): it needs labgrid and imgtool.
Exit status 0 when everything passed, 1 otherwise.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(INTEGRATION))
sys.path.insert(0, INTEGRATION)


class Failure(Exception):
    pass


def say(message):
    print(f"labgrid-e2e: {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Processes started in their own process groups, with their output in files; stop_all() stops
    each group (SIGTERM, then SIGKILL after 5 s), which includes children such as the exporter's
    ser2net."""

    def __init__(self, directory):
        self.directory = directory
        self.started = []  # (name, Popen, log path)

    def start(self, name, command, env=None, stdout=None):
        log = os.path.join(self.directory, f"{name}.log")
        say(f"start {name}: {' '.join(command)}")
        with open(log, "w") as err:
            # In the temporary directory: the coordinator keeps places.yaml and resources.yaml in its
            # working directory.
            process = subprocess.Popen(command, stdout=stdout or err, stderr=err, stdin=subprocess.DEVNULL,
                                       env=env, start_new_session=True, text=True, cwd=self.directory)
        self.started.append((name, process, log))
        return process

    def check_running(self):
        for name, process, log in self.started:
            if process.poll() is not None:
                raise Failure(f"{name} exited with status {process.returncode}; its log {log}:\n{tail(log)}")

    def stop_all(self):
        # Last started first, each before the next: the exporter (and its ser2net) leaves before the
        # coordinator, which then has no open streams to wait for.
        for name, process, _ in reversed(self.started):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    say(f"{name} still runs 5 s after SIGTERM: killing it")
            # Whatever is left in its group (a process that ignored SIGTERM, the exporter's ser2net).
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if process.poll() is None:
                process.wait(5)

    def tails(self):
        return "\n".join(f"--- {name} ({log})\n{tail(log)}" for name, _, log in self.started)


def tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as error:
        return f"(cannot read: {error})"


def wait_for(what, check, seconds, processes):
    """Polls check() until it returns something truthy, at most `seconds`; fails clearly otherwise."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        processes.check_running()
        try:
            value = check()
        except Exception as error:  # noqa: BLE001 - kept for the failure message
            value, last = None, error
        if value:
            return value
        time.sleep(0.3)
    raise Failure(f"{what}: not after {seconds} s" + (f" (last error: {last})" if last else ""))


def start_sim(processes, name, bin_dir, directory):
    link = os.path.join(directory, f"{name}.tty")
    out = os.path.join(directory, f"{name}.out")
    stdout = open(out, "w")
    processes.start(name, [os.path.join(bin_dir, "smp-sim"), "--pty-link", link, "--swap-time", "0"],
                    stdout=stdout)
    stdout.close()

    def pty_path():
        with open(out) as f:
            for line in f:
                words = line.split()
                if len(words) >= 2 and words[0] == "pty":
                    return words[1]
        return None

    path = wait_for(f"{name} printing its pty", pty_path, 30, processes)
    say(f"{name}: smp-sim on {path}")
    return path


def labgrid_client(env, *args, seconds=30, check=True):
    command = [shutil.which("labgrid-client", path=os.path.dirname(sys.executable)) or "labgrid-client", *args]
    say("run labgrid-client " + " ".join(args))
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=seconds,
                                stdin=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        raise Failure(f"labgrid-client {' '.join(args)} did not finish within {seconds} s")
    if check and result.returncode != 0:
        raise Failure(f"labgrid-client {' '.join(args)} failed ({result.returncode}): "
                      f"{result.stderr.strip() or result.stdout.strip()}")
    return result


def make_image(directory, name, version, size):
    """An MCUboot image signed by imgtool (hash TLV); returns (path, SHA-256 hex)."""
    imgtool = shutil.which("imgtool", path=os.path.dirname(sys.executable)) or shutil.which("imgtool")
    if imgtool is None:
        raise Failure("imgtool is not installed in this venv: run Scripts/setup.sh")
    raw = os.path.join(directory, f"{name}.raw")
    with open(raw, "wb") as f:
        f.write(os.urandom(size))
    path = os.path.join(directory, f"{name}.bin")
    subprocess.run([imgtool, "sign", "--header-size", "0x200", "--pad-header", "--align", "4",
                    "--slot-size", "0x40000", "--version", version, raw, path],
                   check=True, capture_output=True, timeout=60)
    verify = subprocess.run([imgtool, "verify", path], check=True, capture_output=True, text=True, timeout=60)
    digest = next((line.split(":", 1)[1].strip() for line in verify.stdout.splitlines()
                   if line.startswith("Image digest")), None)
    if not digest:
        raise Failure(f"imgtool verify printed no digest: {verify.stdout}")
    return path, digest


def check_runs(images, digest, confirmed, board):
    slot = next((s for s in images if s.get("hash") == digest), None)
    if slot is None:
        raise Failure(f"{board}: no slot holds the new image {digest[:16]}...: {images}")
    if not slot.get("active"):
        raise Failure(f"{board}: the new image is not the active one: {slot}")
    if bool(slot.get("confirmed")) != confirmed:
        raise Failure(f"{board}: the new image is {'not ' if confirmed else ''}confirmed, expected "
                      f"{'confirmed' if confirmed else 'a test boot (not confirmed)'}: {slot}")
    say(f"{board}: runs {digest[:16]}... in slot {slot.get('slot')}, "
        f"{'confirmed' if slot.get('confirmed') else 'not confirmed (test boot)'}")


def run(args, directory, processes):
    bin_dir = os.path.abspath(args.bin)
    for tool in ("smp", "smp-sim"):
        if not os.access(os.path.join(bin_dir, tool), os.X_OK):
            raise Failure(f"{os.path.join(bin_dir, tool)} is missing: run `swift build` first or pass --bin")
    ser2net = shutil.which("ser2net") or ("/usr/sbin/ser2net" if os.path.exists("/usr/sbin/ser2net") else None)
    if ser2net is None:
        raise Failure("ser2net is not installed: run Scripts/setup.sh (apt-get install ser2net)")
    venv_bin = os.path.dirname(sys.executable)
    for tool in ("labgrid-coordinator", "labgrid-exporter", "labgrid-client"):
        if not os.access(os.path.join(venv_bin, tool), os.X_OK):
            raise Failure(f"{tool} is not in {venv_bin}: run this with the labgrid venv's python "
                          "(Scripts/labgrid-e2e.sh), after Scripts/setup.sh")

    # 1. Two simulated boards.
    pty1 = start_sim(processes, "board1-sim", bin_dir, directory)
    pty2 = start_sim(processes, "board2-sim", bin_dir, directory)
    pty3 = start_sim(processes, "board3-sim", bin_dir, directory)

    # 2. The coordinator.
    coordinator = f"127.0.0.1:{free_port()}"
    env = dict(os.environ, LG_COORDINATOR=coordinator, PYTHONUNBUFFERED="1")
    env.pop("LG_PROXY", None)
    env.pop("LG_PLACE", None)
    processes.start("coordinator", [os.path.join(venv_bin, "labgrid-coordinator"), "--listen", coordinator],
                    env=env)

    def accepts():
        host, port = coordinator.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=1):
            return True

    wait_for(f"labgrid-coordinator listening on {coordinator}", accepts, 30, processes)

    # 3. Board 2 behind our own ser2net, as raw TCP.
    raw_port = free_port()
    ser2net_config = os.path.join(directory, "ser2net.yaml")
    with open(ser2net_config, "w") as f:
        f.write(textwrap.dedent(f"""\
            connection: &board2
              accepter: tcp,127.0.0.1,{raw_port}
              connector: serialdev,{pty2},115200n81,local
              options:
                kickolduser: true
            """))
    processes.start("ser2net-board2", [ser2net, "-n", "-d", "-c", ser2net_config])

    def raw_accepts():
        with socket.create_connection(("127.0.0.1", raw_port), timeout=1):
            return True

    wait_for(f"ser2net listening on 127.0.0.1:{raw_port}", raw_accepts, 30, processes)

    # 4. One exporter for this "host": board 1's pty (labgrid starts ser2net with RFC 2217 for it) and
    #    board 2's raw TCP port.
    exporter_config = os.path.join(directory, "exporter.yaml")
    with open(exporter_config, "w") as f:
        f.write(textwrap.dedent(f"""\
            board1:
              RawSerialPort:
                port: {pty1}
                speed: 115200
            board2:
              NetworkSerialPort:
                host: 127.0.0.1
                port: {raw_port}
                speed: 115200
                protocol: raw
            """))
    processes.start("exporter", [os.path.join(venv_bin, "labgrid-exporter"), "--coordinator", coordinator,
                                 "--name", "rig1", "--hostname", "127.0.0.1", exporter_config], env=env)

    def exported():
        out = labgrid_client(env, "resources", seconds=20, check=False).stdout
        return "rig1/board1/NetworkSerialPort" in out and "rig1/board2/NetworkSerialPort" in out

    wait_for("the exporter's resources at the coordinator", exported, 45, processes)

    # 5. One place per board.
    places = {"e2e-board1": "rig1/board1/NetworkSerialPort", "e2e-board2": "rig1/board2/NetworkSerialPort"}
    for place, match in places.items():
        labgrid_client(env, "-p", place, "create")
        labgrid_client(env, "-p", place, "add-match", match)
        labgrid_client(env, "-p", place, "acquire")

    def serving(place):
        def check():
            out = labgrid_client(env, "-p", place, "show", seconds=20, check=False).stdout
            # The exporter publishes ser2net's port once it has started it for the acquired place.
            return "'port': None" not in out and "'port':" in out and out
        return check

    for place in places:
        shown = wait_for(f"place {place} showing its port", serving(place), 30, processes)
        say(f"place {place}:\n" + textwrap.indent(shown.strip(), "    "))

    # 6. The driver, through a labgrid Environment with one RemotePlace target per board.
    env_config = os.path.join(directory, "env.yaml")
    with open(env_config, "w") as f:
        f.write(textwrap.dedent(f"""\
            options:
              coordinator_address: {coordinator}
            imports:
              - {os.path.join(INTEGRATION, 'smp_labgrid.py')}
            targets:
              board3:
                resources:
                  RawSerialPort:
                    port: {pty3}
                    speed: 115200
                drivers:
                  SMPDriver:
                    smp: {os.path.join(bin_dir, 'smp')}
                    timeout: 10
                    deadline: 60
                    upgrade_deadline: 90
              board1:
                resources:
                  RemotePlace:
                    name: e2e-board1
                drivers:
                  SMPDriver:
                    smp: {os.path.join(bin_dir, 'smp')}
                    timeout: 10
                    deadline: 60
                    upgrade_deadline: 90
              board2:
                resources:
                  RemotePlace:
                    name: e2e-board2
                drivers:
                  SMPDriver:
                    smp: {os.path.join(bin_dir, 'smp')}
                    timeout: 10
                    deadline: 60
                    upgrade_deadline: 90
            """))
    os.environ["LG_COORDINATOR"] = coordinator
    from labgrid import Environment

    environment = Environment(env_config)
    board1_port = None
    try:
        plan = [("board3", "serial:", "test-and-confirm", True, "1.3.0"),
                ("board1", "rfc2217://", "confirm-only", True, "1.1.0"),
                ("board2", "tcp://", "test-only", False, "1.2.0")]
        for board, scheme, mode, confirmed, version in plan:
            target = environment.get_target(board)
            smp = target.get_driver("SMPDriver")
            uri = smp.device_uri()
            say(f"{board}: device URI {uri}")
            if board == "board1":
                board1_port = smp.port.port
            if not uri.startswith(scheme):
                raise Failure(f"{board}: expected a {scheme} URI, got {uri}")
            params = smp.params()
            say(f"{board}: os params {params}")
            if not params.get("buf_size") or not params.get("buf_count"):
                raise Failure(f"{board}: os params answered {params}")
            text = f"hello {board} through labgrid"
            echoed = smp.echo(text)
            if echoed != text:
                raise Failure(f"{board}: echo answered {echoed!r}, sent {text!r}")
            say(f"{board}: echo {echoed!r}")
            before = smp.image_list()
            say(f"{board}: image list before: {[(s.get('slot'), s.get('version'), s.get('active')) for s in before]}")
            package, digest = make_image(directory, f"{board}-app", version, args.image_size)
            say(f"{board}: upgrade {os.path.basename(package)} ({os.path.getsize(package)} bytes, "
                f"hash {digest[:16]}...) mode {mode}")
            started = time.monotonic()
            result = smp.upgrade(package, mode=mode, swap_time=0.1, reconnect_timeout=20)
            say(f"{board}: upgrade {result.get('status')} in {time.monotonic() - started:.1f} s "
                f"(upload {result.get('upload_seconds', 0):.1f} s, {result.get('bytes_sent')} bytes)")
            if not any(i.get("hash") == digest and i.get("uploaded") for i in result.get("images", [])):
                raise Failure(f"{board}: the upgrade's result does not show the image uploaded: {result}")
            check_runs(smp.image_list(), digest, confirmed, board)
    finally:
        environment.cleanup()
        # Close this process's session with the coordinator (RemotePlace opened it), so that the
        # coordinator stops at once at the end rather than waiting for the stream.
        from labgrid.resource.remote import RemotePlaceManager
        manager = RemotePlaceManager.get()
        if manager.session is not None:
            manager.loop.run_until_complete(manager.session.stop())
            manager.loop.run_until_complete(manager.session.close())
            manager.session = None

    # 7. The README's pytest examples through labgrid's pytest plugin, with examples/env.yaml (the place
    #    from $LG_PLACE): test_board.py against board 1, then test_upgrade.py on both boards at once,
    #    each writing its JUnit report, as the README's rig recipe runs them.
    examples = os.path.join(INTEGRATION, "examples")
    pytest_env = dict(env, SMP_BINARY=os.path.join(bin_dir, "smp"),
                      PYTHONPATH=INTEGRATION + os.pathsep + env.get("PYTHONPATH", ""))

    def pytest_command(test, *more):
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--lg-env",
                os.path.join(examples, "env.yaml"), os.path.join(examples, test), *more]

    say("run LG_PLACE=e2e-board1 pytest --lg-env examples/env.yaml examples/test_board.py")
    try:
        result = subprocess.run(pytest_command("test_board.py"), env=dict(pytest_env, LG_PLACE="e2e-board1"),
                                capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
                                cwd=directory)
    except subprocess.TimeoutExpired:
        raise Failure("the pytest example test_board.py did not finish within 90 s")
    print(textwrap.indent(result.stdout.strip()[-1500:], "    "), flush=True)
    if result.returncode != 0:
        raise Failure(f"the pytest example failed ({result.returncode}): {result.stderr.strip()[-1500:]}")

    runs = {}
    for index, place in enumerate(places, start=1):
        package, digest = make_image(directory, f"{place}-v2", f"2.0.{index}", args.image_size)
        junit = os.path.join(directory, f"{place}.xml")
        say(f"start LG_PLACE={place} SMP_PACKAGE={os.path.basename(package)} pytest --lg-env examples/env.yaml "
            f"examples/test_upgrade.py --junitxml={os.path.basename(junit)}")
        log = open(os.path.join(directory, f"pytest-{place}.log"), "w")
        process = subprocess.Popen(pytest_command("test_upgrade.py", f"--junitxml={junit}"),
                                   env=dict(pytest_env, LG_PLACE=place, SMP_PACKAGE=package),
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=directory, start_new_session=True)
        runs[place] = (process, log, junit, digest)
    started = time.monotonic()
    for place, (process, log, junit, digest) in runs.items():
        try:
            process.wait(max(1, 120 - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            for other, *_ in runs.values():
                if other.poll() is None:
                    os.killpg(other.pid, signal.SIGKILL)
                    other.wait(5)
            raise Failure(f"test_upgrade.py on {place} did not finish within 120 s")
        finally:
            log.close()
    say(f"both upgrades finished in {time.monotonic() - started:.1f} s")
    for place, (process, log, junit, digest) in runs.items():
        output = tail(log.name, 40)
        if process.returncode != 0:
            raise Failure(f"test_upgrade.py on {place} failed ({process.returncode}):\n{output}")
        try:
            with open(junit) as f:
                report = f.read()
        except OSError as error:
            raise Failure(f"test_upgrade.py on {place} wrote no JUnit report {junit}: {error}")
        if 'tests="1"' not in report or 'failures="0"' not in report or 'errors="0"' not in report:
            raise Failure(f"the JUnit report of {place} does not show one passed test:\n{report}")
        say(f"{place}: test_upgrade passed (JUnit {os.path.basename(junit)}: 1 test, 0 failures)")
    # What the boards run now, asked directly (the places are still acquired, board 1's ser2net runs).
    from smp_labgrid import network_uri, run_smp
    for place, uri in (("e2e-board1", network_uri("rfc2217", "127.0.0.1", board1_port, 115200)),
                       ("e2e-board2", network_uri("raw", "127.0.0.1", raw_port))):
        objects = run_smp([os.path.join(bin_dir, "smp"), "--device", uri, "--json", "image", "list"], 60)
        check_runs(objects[-1].get("images", []) if objects else [], runs[place][3], True, place)

    # 8. Release the places; the exporter stops board 1's ser2net.
    for place in places:
        labgrid_client(env, "-p", place, "release")
    out = labgrid_client(env, "-p", "e2e-board1", "show").stdout
    if "acquired: None" not in out:
        raise Failure(f"place e2e-board1 still acquired after release:\n{out}")

    def closed():
        try:
            with socket.create_connection(("127.0.0.1", board1_port), timeout=1):
                return False
        except OSError:
            return True

    wait_for(f"the exporter stopping board 1's ser2net (port {board1_port})", closed, 15, processes)
    say(f"places released; the exporter stopped board 1's ser2net on port {board1_port}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(REPO, ".build", "debug"),
                        help="directory holding smp and smp-sim (default .build/debug)")
    parser.add_argument("--budget", type=float, default=170, help="seconds for the whole run (default 170)")
    parser.add_argument("--image-size", type=int, default=12 * 1024, help="payload bytes of each image")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs)")
    args = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="smp-labgrid-e2e.")
    processes = Processes(directory)

    def out_of_time(signum, frame):
        raise Failure(f"the run took more than its budget of {args.budget:g} s")

    def terminated(signum, frame):
        raise Failure(f"stopped by signal {signum}")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.signal(signal.SIGTERM, terminated)
    signal.setitimer(signal.ITIMER_REAL, args.budget)
    started = time.monotonic()
    status = 0
    try:
        run(args, directory, processes)
        say(f"PASSED in {time.monotonic() - started:.1f} s")
    except (Failure, Exception) as error:  # noqa: BLE001 - every failure is reported the same way
        signal.setitimer(signal.ITIMER_REAL, 0)
        status = 1
        say(f"FAILED after {time.monotonic() - started:.1f} s: {type(error).__name__}: {error}")
        print(processes.tails(), flush=True)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        processes.stop_all()
        say("stopped every process")
        if args.keep:
            say(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
