#!/usr/bin/env python3
"""Conformance of smp-sim to the real firmware (issue 11.2).

Sends the same list of SMP requests over UDP to the shared Zephyr 4.4.0 build native_sim_udp.exe
(../shared/firmware) and to `smp-sim --like native_sim_udp`, and compares the answers field by field:
header (operation, version, group, command, sequence), then the CBOR body: the same keys, the same value
types, the same values for return codes, errors, offsets, lengths and everything else, except where a
case names keys whose values legitimately differ (build strings, thread lists, hashes): those are compared
by type (and byte strings by length). Differences that are known and accepted are listed in ALLOWED with
the reason; any other difference fails.

usage: conformance.py --sim PATH/smp-sim [--firmware DIR] [--verbose] [--list]
exit: 0 all answers conform, 1 differences, 2 could not run (firmware or port), 77 firmware absent.

Needs cbor2 (the project's venv). Starts both devices itself, each in its own temporary directory,
and stops them (by their pid) however it ends. The real build binds UDP port 1337 on all addresses and
only one can run: when the port is busy (another engineer's run) it waits up to 120 s.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import cbor2

UDP_EXE = "zephyr_4.4.0_smp_server_0eae053d_native_sim_udp.exe"

# Accepted differences: case label -> reason.
_BURST = ("which datagrams of a burst find a free buffer depends on when each arrives: native_sim_udp "
          "alternates between its 10 ms tick and answering at once, and a loaded sender spaces the datagrams "
          "out (seen: the build answered [0, 2, 4], smp-sim [0, 1, 3, 5]); printed, not failed")
ALLOWED = {
    "6 echoes back to back": _BURST,
    "6 fs upload chunks back to back": _BURST,
}

R, W = 0, 2  # read, write


def case(label, op, group, cmd, body=None, ver=1, loose=(), raw=None):
    return dict(label=label, op=op, group=group, cmd=cmd, body=body, ver=ver, loose=set(loose), raw=raw)


def upload(label, name, off, data, length=None, ver=1):
    body = {"name": name, "off": off, "data": data}
    if length is not None:
        body["len"] = length
    return case(label, W, 8, 0, body, ver=ver)


def cases():
    """The requests, in order (file-system cases depend on the ones before them)."""
    c = []
    # Header and dispatch.
    c += [
        case("echo", W, 0, 0, {"d": "hello"}),
        case("echo read", R, 0, 0, {"d": "hi"}),
        case("echo empty map", W, 0, 0, {}),
        case("echo no payload", W, 0, 0, None),
        case("echo d not text", W, 0, 0, {"d": 5}),
        case("echo payload not a map", W, 0, 0, [1, 2]),
        case("echo v1", W, 0, 0, {"d": "x"}, ver=0),
        case("version 2 header", W, 0, 0, {"d": "x"}, ver=2),
        case("version 3 header", W, 0, 0, {"d": "x"}, ver=3),
        case("read response sent as request", 1, 0, 0, {"d": "x"}),
        case("write response sent as request", 3, 0, 0, {"d": "x"}),
        case("operation 4", 4, 0, 0, {"d": "x"}),
        case("unknown group 100", R, 100, 0),
        case("unknown group 100 v1", R, 100, 0, ver=0),
        case("image group (absent)", R, 1, 0),
        case("unknown command os 42", R, 0, 42),
        case("header length beyond datagram", W, 0, 0, raw=("len+", {"d": "hi"})),
        case("datagram of 1500 bytes", W, 0, 0, {"d": "x" * 1486}),
        case("datagram over 1500 bytes", W, 0, 0, {"d": "x" * 1600}),
        case("datagram over 1500 bytes v1", W, 0, 0, {"d": "x" * 1600}, ver=0),
    ]
    # OS group.
    c += [
        case("console echo", W, 0, 1, {"echo": False}),
        case("task stats", R, 0, 2, loose={"tasks"}),
        case("mempool stats", R, 0, 3),
        case("datetime get", R, 0, 4),
        case("datetime set", W, 0, 4, {"datetime": "2026-01-02T03:04:05"}),
        case("params", R, 0, 6),
        case("os info no payload", R, 0, 7),
        case("os info s", R, 0, 7, {"format": "s"}, loose={"output"}),
        case("os info a", R, 0, 7, {"format": "a"}, loose={"output"}),
        case("os info bad format", R, 0, 7, {"format": "q"}),
        case("os info bad format v1", R, 0, 7, {"format": "q"}, ver=0),
        case("bootloader info", R, 0, 8),
    ]
    # Statistics.
    c += [
        case("stat list", R, 2, 1, loose={"stat_list"}),
        case("stat read smp_svr_stats", R, 2, 0, {"name": "smp_svr_stats"}, loose={"fields"}),
        case("stat read missing", R, 2, 0, {"name": "nope"}),
        case("stat read missing v1", R, 2, 0, {"name": "nope"}, ver=0),
        case("stat read no name", R, 2, 0, {}),
    ]
    # Settings.
    c += [
        case("settings read missing root", R, 3, 0, {"name": "a/b"}),
        case("settings read missing root v1", R, 3, 0, {"name": "a/b"}, ver=0),
        case("settings write missing root", W, 3, 0, {"name": "a/b", "val": b"xyz"}),
        case("settings delete missing", W, 3, 1, {"name": "a/b"}),
        case("settings read long name", R, 3, 0, {"name": "x" * 100}),
        case("settings read long name v1", R, 3, 0, {"name": "x" * 100}, ver=0),
        case("settings read no name", R, 3, 0, {}),
        case("settings commit", W, 3, 2),
        case("settings load", R, 3, 3),
        case("settings save no payload", W, 3, 3),
        case("settings save", W, 3, 3, {}),
    ]
    # Shell.
    c += [
        case("shell kernel version", W, 9, 0, {"argv": ["kernel", "version"]}, loose={"o"}),
        case("shell unknown command", W, 9, 0, {"argv": ["nonexistent"]}, loose={"o"}),
        case("shell unknown command v1", W, 9, 0, {"argv": ["nonexistent"]}, ver=0, loose={"o"}),
        case("shell empty argv", W, 9, 0, {"argv": []}),
        case("shell empty argv v1", W, 9, 0, {"argv": []}, ver=0),
        case("shell read", R, 9, 0, {"argv": ["help"]}),
    ]
    # Enumeration.
    c += [
        case("enum count", R, 10, 0),
        case("enum list", R, 10, 1),
        case("enum single 0", R, 10, 2, {"index": 0}),
        case("enum single 6", R, 10, 2, {"index": 6}),
        case("enum single 99", R, 10, 2, {"index": 99}),
        case("enum single 99 v1", R, 10, 2, {"index": 99}, ver=0),
        case("enum details no payload", R, 10, 3),
        case("enum details fs os", R, 10, 3, {"groups": [0, 8]}),
        case("enum details all", R, 10, 3, {}),
    ]
    # File system: the measured upload/download rules.
    c += [
        upload("fs upload new off 0", "/lfs1/A", 0, b"ab", 4),
        upload("fs upload off 2 completes", "/lfs1/A", 2, b"cd"),
        upload("fs duplicate after complete", "/lfs1/A", 2, b"cd"),
        case("fs stat", R, 8, 1, {"name": "/lfs1/A"}),
        upload("fs upload C off 0", "/lfs1/C", 0, b"ab", 6),
        upload("fs upload C off 2", "/lfs1/C", 2, b"cd"),
        upload("fs upload C duplicate", "/lfs1/C", 2, b"cd"),
        upload("fs upload C continues after error", "/lfs1/C", 4, b"ef"),
        case("fs download C", R, 8, 0, {"name": "/lfs1/C", "off": 0}),
        upload("fs off 0 rewrites existing", "/lfs1/C", 0, b"xy", 2),
        case("fs download rewritten", R, 8, 0, {"name": "/lfs1/C", "off": 0}),
        upload("fs off 0 empty data keeps file", "/lfs1/C", 0, b"", 0),
        case("fs close", W, 8, 4),
        case("fs download kept", R, 8, 0, {"name": "/lfs1/C", "off": 0}),
        upload("fs empty new file", "/lfs1/E", 0, b"", 0),
        case("fs stat empty", R, 8, 1, {"name": "/lfs1/E"}),
        case("fs hash empty", R, 8, 2, {"name": "/lfs1/E"}),
        case("fs hash empty v1", R, 8, 2, {"name": "/lfs1/E"}, ver=0),
        case("fs download empty", R, 8, 0, {"name": "/lfs1/E", "off": 0}),
        case("fs download past end", R, 8, 0, {"name": "/lfs1/A", "off": 100}),
        case("fs download at end", R, 8, 0, {"name": "/lfs1/A", "off": 4}),
        case("fs download off 1", R, 8, 0, {"name": "/lfs1/A", "off": 1}),
        case("fs download missing", R, 8, 0, {"name": "/lfs1/nope", "off": 0}),
        case("fs download missing v1", R, 8, 0, {"name": "/lfs1/nope", "off": 0}, ver=0),
        case("fs download directory", R, 8, 0, {"name": "/lfs1", "off": 0}),
        case("fs download no off", R, 8, 0, {"name": "/lfs1/A"}),
        upload("fs upload outside mount", "/foo/x", 0, b"a", 1),
        case("fs download outside mount", R, 8, 0, {"name": "/foo/x", "off": 0}),
        case("fs stat outside mount", R, 8, 1, {"name": "/foo/x"}),
        case("fs hash outside mount", R, 8, 2, {"name": "/foo/x"}),
        upload("fs upload no slash", "abc", 0, b"a", 1),
        case("fs stat no slash", R, 8, 1, {"name": "abc"}),
        upload("fs upload root", "/", 0, b"a", 1),
        case("fs stat root", R, 8, 1, {"name": "/"}),
        upload("fs upload missing directory", "/lfs1/d/x", 0, b"a", 1),
        upload("fs upload to directory", "/lfs1", 0, b"a", 1),
        upload("fs upload off > 0 no upload open", "/lfs1/K", 5, b"a"),
        case("fs stat created by it", R, 8, 1, {"name": "/lfs1/K"}),
        upload("fs upload off 0 without len", "/lfs1/L", 0, b"a"),
        upload("fs upload data beyond len", "/lfs1/L", 0, b"abc", 1),
        case("fs stat beyond len", R, 8, 1, {"name": "/lfs1/L"}),
        case("fs upload off 0 without data", W, 8, 0, {"name": "/lfs1/L4", "off": 0, "len": 3}),
        case("fs upload without off", W, 8, 0, {"name": "/lfs1/L5", "data": b"a", "len": 3}),
        case("fs upload without name", W, 8, 0, {"off": 0, "data": b"a", "len": 3}),
        case("fs upload off as text", W, 8, 0, {"name": "/lfs1/L7", "off": "0", "data": b"a", "len": 3}),
        case("fs upload unknown key", W, 8, 0, {"name": "/lfs1/L8", "off": 0, "data": b"a", "len": 1, "zz": 1}),
        upload("fs name of 64 bytes", "/lfs1/" + "x" * 58, 0, b"a", 1),
        upload("fs name of 65 bytes", "/lfs1/" + "x" * 59, 0, b"a", 1),
        case("fs stat name of 65 bytes", R, 8, 1, {"name": "/lfs1/" + "x" * 59}),
        case("fs stat directory", R, 8, 1, {"name": "/lfs1"}),
        case("fs stat directory slash", R, 8, 1, {"name": "/lfs1/"}),
        case("fs stat missing", R, 8, 1, {"name": "/lfs1/missing"}),
        case("fs stat missing v1", R, 8, 1, {"name": "/lfs1/missing"}, ver=0),
        case("fs stat no payload", R, 8, 1),
        case("fs hash off at size", R, 8, 2, {"name": "/lfs1/A", "off": 4}),
        case("fs hash len 0", R, 8, 2, {"name": "/lfs1/A", "len": 0}),
        case("fs hash unknown type", R, 8, 2, {"name": "/lfs1/A", "type": "md5"}),
        case("fs hash unknown type v1", R, 8, 2, {"name": "/lfs1/A", "type": "md5"}, ver=0),
        case("fs hash type name too long", R, 8, 2, {"name": "/lfs1/A", "type": "verylongtype"}),
        case("fs hash off 1 len 2", R, 8, 2, {"name": "/lfs1/A", "off": 1, "len": 2}),
        case("fs hash len beyond", R, 8, 2, {"name": "/lfs1/A", "len": 100}),
        case("fs hash default", R, 8, 2, {"name": "/lfs1/A"}),
        case("fs hash sha256", R, 8, 2, {"name": "/lfs1/A", "type": "sha256"}),
        case("fs hash missing", R, 8, 2, {"name": "/lfs1/missing"}),
        case("fs hash directory", R, 8, 2, {"name": "/lfs1"}),
        case("fs hash types", R, 8, 3),
        case("fs close read", R, 8, 4),
        case("fs unknown command", R, 8, 5),
        upload("fs duplicate v1", "/lfs1/A", 2, b"cd", ver=0),
        # While an upload is open, stat and hash see the committed size.
        upload("fs open upload", "/lfs1/S", 0, b"abc", 10),
        case("fs stat during upload", R, 8, 1, {"name": "/lfs1/S"}),
        case("fs hash during upload", R, 8, 2, {"name": "/lfs1/S"}),
        upload("fs upload S off 3", "/lfs1/S", 3, b"def"),
        upload("fs off 0 again while open appends", "/lfs1/S", 0, b"XY", 10),
        case("fs close S", W, 8, 4),
        case("fs download S", R, 8, 0, {"name": "/lfs1/S", "off": 0}),
    ]
    # File system: the space of four 4 KiB blocks (the files above are inline: 64 bytes or less).
    big = bytes(range(256)) * 40
    c += [upload("fs big off 0", "/lfs1/big", 0, big[:1024], 9000)]
    for off in range(1024, 9000, 1024):
        c += [upload("fs big off %d" % off, "/lfs1/big", off, big[off:off + 1024])]
    c += [case("fs stat big after failure", R, 8, 1, {"name": "/lfs1/big"})]
    c += [upload("fs b4 off 0", "/lfs1/b4", 0, big[:1024], 4096)]
    for off in range(1024, 4096, 1024):
        c += [upload("fs b4 off %d" % off, "/lfs1/b4", off, big[off:off + 1024])]
    c += [upload("fs b5 off 0", "/lfs1/b5", 0, big[:1024], 4096)]
    for off in range(1024, 4096, 1024):
        c += [upload("fs b5 off %d" % off, "/lfs1/b5", off, big[off:off + 1024])]
    c += [
        upload("fs third block-sized file", "/lfs1/b6", 0, big[:100], 100),
        case("fs stat b6", R, 8, 1, {"name": "/lfs1/b6"}),
        upload("fs rewrite when full", "/lfs1/b4", 0, big[:1024], 4096),
        case("fs stat b4 kept", R, 8, 1, {"name": "/lfs1/b4"}),
        case("fs download b4 first chunk", R, 8, 0, {"name": "/lfs1/b4", "off": 0}),
        case("fs download b4 second chunk", R, 8, 0, {"name": "/lfs1/b4", "off": 2004}),
        case("fs download b4 last chunk", R, 8, 0, {"name": "/lfs1/b4", "off": 4008}),
    ]
    # Zephyr basic: erase storage (last: it wipes the settings partition).
    c += [case("zephyr basic erase", W, 63, 0), case("zephyr basic read", R, 63, 0)]
    return c


def bursts():
    """Datagrams sent back to back: which are answered, and how (native_sim_udp takes every other one)."""
    echo = [(W, 0, 0, {"d": "burst %d" % i}) for i in range(6)]
    chunks = [(W, 8, 0, dict({"name": "/lfs1/burst", "off": 10 * i, "data": bytes([i]) * 10}, **({"len": 60} if i == 0 else {})))
              for i in range(6)]
    return [("6 echoes back to back", echo), ("6 fs upload chunks back to back", chunks)]


def crc_header(op, ver, group, seq, cmd, payload, length=None):
    return struct.pack(">BBHHBB", (ver << 3) | op, 0, len(payload) if length is None else length, group, seq, cmd) + payload


def packet(c, seq):
    if c["raw"]:
        kind, body = c["raw"]
        payload = cbor2.dumps(body)
        if kind == "len+":
            return crc_header(c["op"], c["ver"], c["group"], seq, c["cmd"], payload, len(payload) + 5)
    payload = b"" if c["body"] is None else cbor2.dumps(c["body"])
    return crc_header(c["op"], c["ver"], c["group"], seq, c["cmd"], payload)


def parse(data):
    if len(data) < 8:
        return {"short": data.hex()}
    b0, flags, length, group, seq, cmd = struct.unpack(">BBHHBB", data[:8])
    try:
        body = cbor2.loads(data[8:]) if len(data) > 8 else None
    except Exception as error:  # noqa: BLE001 - report what did not decode
        body = ("undecodable", data[8:].hex(), str(error))
    return {"op": b0 & 7, "ver": (b0 >> 3) & 3, "group": group, "seq": seq, "cmd": cmd, "body": body}


# Sequence numbers of the echoes sent behind unanswered cases (the cases use 1-199, the bursts 200-219).
FOLLOWER_SEQS = range(224, 250)
# How long a case waits at most for the echo behind it: a hang catcher (it returns at the first answer).
FOLLOWER_BOUND = 60.0
_followers = iter(())


def next_follower():
    global _followers
    for seq in _followers:
        return seq
    _followers = iter(FOLLOWER_SEQS)
    return next(_followers)


def exchange(sock, address, c, seq, timeout=0.5, follow=True):
    """The answers with this sequence number (late answers to earlier cases are skipped). An answer within
    `timeout` s returns at once. Whether a case has no answer is not decided by a timeout: after it, an
    echo goes behind the case (again every 2 s: native_sim_udp drops a datagram while a request holds its
    buffers), and a device answers in order, so the case's answer counts however late, and the echo's
    answer without it means the device does not answer the case. Without `follow`, no answer within
    `timeout` is none (a device that is starting)."""
    sock.sendto(packet(c, seq), address)
    answers, followers, echoed = [], [], False
    started = time.time()
    resend_at = started + timeout
    while not answers and not echoed and time.time() - started < (FOLLOWER_BOUND if follow else timeout):
        if follow and time.time() >= resend_at:
            followers.append(next_follower())
            sock.sendto(packet(case("behind", W, 0, 0, {"d": "behind"}), followers[-1]), address)
            resend_at = time.time() + 2.0
        sock.settimeout(max(0.001, min(0.05, resend_at - time.time())))
        try:
            data, _ = sock.recvfrom(65536)
        except socket.timeout:
            continue
        answer = parse(data)
        if answer.get("seq") == seq:
            answers.append(answer)
        echoed = answer.get("seq") in followers
    # An echo on its way holds the device's buffers: its answer comes before the next case goes.
    drain = time.time() + (2.0 if followers and not echoed else 0)
    while time.time() < drain:
        sock.settimeout(max(0.001, drain - time.time()))
        try:
            if parse(sock.recvfrom(65536)[0]).get("seq") in followers:
                break
        except socket.timeout:
            break
    return answers


def kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    return type(value).__name__


def compare(real, sim, loose, path="body"):
    """Differences between two decoded values, as text lines."""
    if kind(real) != kind(sim):
        return ["%s: %s %r vs %s %r" % (path, kind(real), real, kind(sim), sim)]
    key = path.rsplit(".", 1)[-1]
    if key in loose:
        if isinstance(real, bytes) and len(real) != len(sim):
            return ["%s: %d bytes vs %d bytes" % (path, len(real), len(sim))]
        return []
    if isinstance(real, dict):
        diffs = []
        if set(real) != set(sim):
            diffs.append("%s: keys %s vs %s" % (path, sorted(map(str, real)), sorted(map(str, sim))))
        for k in real:
            if k in sim:
                diffs += compare(real[k], sim[k], loose, "%s.%s" % (path, k))
        return diffs
    if isinstance(real, list):
        if len(real) != len(sim):
            return ["%s: %d items vs %d items" % (path, len(real), len(sim))]
        diffs = []
        for i, (a, b) in enumerate(zip(real, sim)):
            diffs += compare(a, b, loose, "%s[%d]" % (path, i))
        return diffs
    if real != sim:
        shown = lambda v: ("<%d bytes>" % len(v)) if isinstance(v, bytes) and len(v) > 16 else repr(v)
        return ["%s: %s vs %s" % (path, shown(real), shown(sim))]
    return []


def run_like_hardware():
    """Raises this process's scheduling priority (nice -10; root only, else nothing changes), which the
    devices it starts inherit: the real build, smp-sim and, for QEMU, the emulator and its pty bridge. A
    board's timing does not depend on the host's load, and what these scripts compare (frames answered or
    dropped at given gaps, how soon a reset happens) depends on it. Beside the test command's load (stress-ng
    on every core, three real-BlueZ guests) smp-sim (a debug build) at the same priority dropped a packet
    whose lines were sent 30 ms apart, where the real build took it: what it does, as the device it
    models would, when it is starved long enough to find three of those lines in one read. The script
    that sends the lines gets the priority too, so that its gaps are the ones it asks for."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass


def compare_answers(real, sim, loose):
    if len(real) != len(sim):
        return ["answers: %d vs %d" % (len(real), len(sim))]
    diffs = []
    for a, b in zip(real, sim):
        for field in ("op", "ver", "group", "seq", "cmd"):
            if a.get(field) != b.get(field):
                diffs.append("header %s: %s vs %s" % (field, a.get(field), b.get(field)))
        diffs += compare(a.get("body"), b.get("body"), loose)
    return diffs


def wait_port_free(port, limit):
    deadline = time.time() + limit
    while True:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.bind(("0.0.0.0", port))
            return True
        except OSError:
            if time.time() > deadline:
                return False
            time.sleep(1)
        finally:
            probe.close()


def wait_echo(sock, address, limit):
    deadline = time.time() + limit
    while time.time() < deadline:
        if exchange(sock, address, case("ready", W, 0, 0, {"d": "ready"}), 0, timeout=0.3, follow=False):
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--sim", required=True, help="the smp-sim executable")
    parser.add_argument("--firmware", default=None, help="the shared firmware directory (default ../shared/firmware from the repository)")
    parser.add_argument("--verbose", action="store_true", help="print every answer")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args()

    if args.list:
        for c in cases():
            print(c["label"])
        return 0
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    firmware = args.firmware or os.path.join(repo, "..", "shared", "firmware")
    exe = os.path.join(firmware, UDP_EXE)
    if not os.path.exists(exe):
        print("conformance: %s is absent; nothing to compare against" % exe)
        return 77
    run_like_hardware()

    processes = []
    directories = []

    def stop_all(*_):
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for directory in directories:
            shutil.rmtree(directory, ignore_errors=True)

    def on_signal(number, _frame):
        stop_all()
        sys.exit(128 + number)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # A watchdog: whatever hangs, both devices are stopped within 3 minutes.
    signal.signal(signal.SIGALRM, on_signal)
    signal.alarm(180)
    try:
        if not wait_port_free(1337, 120):
            print("conformance: UDP port 1337 stayed busy for 120 s (another native_sim_udp run?)")
            return 2
        real_dir = tempfile.mkdtemp(prefix="conformance-real-")
        directories.append(real_dir)
        real = subprocess.Popen([exe], cwd=real_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        processes.append(real)
        sim = subprocess.Popen([args.sim, "--like", "native_sim_udp", "--udp", "127.0.0.1:0"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               start_new_session=True)
        processes.append(sim)
        line = sim.stdout.readline().decode()
        match = re.match(r"udp 127\.0\.0\.1:(\d+)", line)
        if not match:
            print("conformance: smp-sim did not start: %r" % line)
            return 2
        real_address = ("127.0.0.1", 1337)
        sim_address = ("127.0.0.1", int(match.group(1)))
        real_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sim_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if not wait_echo(real_sock, real_address, 10):
            print("conformance: native_sim_udp did not answer an echo within 10 s")
            return 2
        if not wait_echo(sim_sock, sim_address, 10):
            print("conformance: smp-sim did not answer an echo within 10 s")
            return 2

        failures, allowed, total = [], [], 0
        for index, (label, requests) in enumerate(bursts()):
            base = 200 + index * 10
            got = {}
            for name, sock, address in (("real", real_sock, real_address), ("sim", sim_sock, sim_address)):
                for offset, (op, group, cmd, body) in enumerate(requests):
                    sock.sendto(crc_header(op, 1, group, base + offset, cmd, cbor2.dumps(body)), address)
                answers = []
                deadline = time.time() + 0.4
                while time.time() < deadline:
                    sock.settimeout(max(0.001, deadline - time.time()))
                    try:
                        data, _ = sock.recvfrom(65536)
                    except socket.timeout:
                        break
                    answers.append(parse(data))
                got[name] = sorted(answers, key=lambda a: a["seq"])
            total += 1
            diffs = []
            real_seqs = [a["seq"] - base for a in got["real"]]
            sim_seqs = [a["seq"] - base for a in got["sim"]]
            if real_seqs != sim_seqs:
                diffs.append("answered %s vs %s" % (real_seqs, sim_seqs))
            else:
                diffs += compare_answers(got["real"], got["sim"], set())
            if args.verbose:
                print("%-40s real %s" % (label, [(a["seq"] - base, a["body"]) for a in got["real"]]))
                print("%-40s sim  %s" % ("", [(a["seq"] - base, a["body"]) for a in got["sim"]]))
            if diffs:
                (allowed if label in ALLOWED else failures).append((label, diffs))
        for index, c in enumerate(cases()):
            seq = (index + 1) & 0xFF
            a = exchange(real_sock, real_address, c, seq)
            b = exchange(sim_sock, sim_address, c, seq)
            diffs = compare_answers(a, b, c["loose"])
            total += 1
            if args.verbose:
                print("%-40s real %s" % (c["label"], [x.get("body") for x in a]))
                print("%-40s sim  %s" % ("", [x.get("body") for x in b]))
            if diffs:
                entry = (c["label"], diffs)
                (allowed if c["label"] in ALLOWED else failures).append(entry)
        for label, diffs in allowed:
            print("allowed  %s: %s (%s)" % (label, "; ".join(diffs), ALLOWED[label]))
        for label, diffs in failures:
            print("DIFFERS  %s: %s" % (label, "; ".join(diffs)))
        print("conformance: %d cases, %d conform, %d allowed differences, %d differences"
              % (total, total - len(failures) - len(allowed), len(allowed), len(failures)))
        return 1 if failures else 0
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
