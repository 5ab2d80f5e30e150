#!/usr/bin/env python3
"""Serial conformance of smp-sim to the real firmware (issue 11.2, serial builds).

Starts a shared Zephyr 4.4.0 serial build (native_sim_serial.exe or native_sim_serial_fs.exe, each on its
own pty in its own temporary directory) and `smp-sim --like <build> --pty`, then sends the same console
frames to both: requests compared field by field (as conformance.py does), and line-buffer probes whose
outcome on the real device does not depend on timing (a longest line, a line too long, frames of 2 and 3
lines back to back, two and three one-line frames back to back, a frame right behind a two-line frame,
three whole-buffer frames back to back, a 4-line frame in bursts of 2 lines 30 ms apart, a packet of
buf_size - 4 and one of buf_size - 3 bytes, lines 30 ms apart: three ticks). Each probe is answered or not; the answers must agree. Timing-dependent cases (gaps of 3-12 ms) are not compared: the
real device's host scheduling makes them vary from run to run.

On a loaded machine a device answers late, or (its process descheduled) reads lines sent 30 ms apart at
once. Whether a probe's frame was taken is not decided by a timeout: a frame still unanswered after the
probe's wait is followed by a one-line echo, and a device answers in order, so the frame's answer before
the echo's means taken, the echo's alone dropped (`probe`). A probe on which the devices still disagree
is run again with fresh sequence numbers, up to three times: a real difference shows in every run, the
outcome of one slow run (lines read at once that were sent apart) does not decide (`probe_both`).

usage: conformance_serial.py --sim PATH/smp-sim --build native_sim_serial|native_sim_serial_fs [--firmware DIR]
exit: 0 conforms, 1 differences, 2 could not run, 77 firmware absent.
"""
import argparse
import base64
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import tty

import cbor2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conformance import compare, run_like_hardware  # noqa: E402

BUILDS = {
    "native_sim_serial": dict(line=128, buf=384),
    "native_sim_serial_fs": dict(line=512, buf=1024),
}
EXE = "zephyr_4.4.0_smp_server_0eae053d_%s.exe"


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def lines_of(packet, line):
    """Console frame lines of at most `line` bytes (marker and newline included)."""
    body = struct.pack(">H", len(packet) + 2) + packet + struct.pack(">H", crc16(packet))
    text = base64.b64encode(body)
    per = ((line - 3) // 4) * 4
    out, first = [], True
    while text:
        chunk, text = text[:per], text[per:]
        out.append((b"\x06\x09" if first else b"\x04\x14") + chunk + b"\n")
        first = False
    return out


def header(op, group, seq, cmd, payload, ver=1):
    return struct.pack(">BBHHBB", (ver << 3) | op, 0, len(payload), group, seq, cmd) + payload


def echo(size, seq):
    return header(2, 0, seq, 0, cbor2.dumps({"d": "x" * size}))


def echo_of_packet_size(total, seq):
    """An echo request of exactly `total` bytes, or None."""
    for size in range(total):
        packet = echo(size, seq)
        if len(packet) == total:
            return packet
        if len(packet) > total:
            return None
    return None


class Link:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self.fd)
        self.pending = b""
        # The device's last lines that are not SMP frames (boot banners, logs, fault reports): what a
        # device that stopped answering said last.
        self.console = b""
        # The console lines since `listen()` (at most 400): what a device printed after a request.
        self.since = []

    def write(self, lines, gap=0.0, burst=1):
        """Writes `lines` in bursts of `burst` lines (each one write), `gap` seconds apart."""
        if not gap:
            # Back to back: one write, so that no device tick falls between the lines.
            os.write(self.fd, b"".join(lines))
            return
        for index in range(0, len(lines), burst):
            if index:
                time.sleep(gap)
            os.write(self.fd, b"".join(lines[index:index + burst]))

    def answers(self, wait):
        """Decoded answer packets that arrive within `wait` seconds."""
        deadline = time.time() + wait
        while True:
            ready, _, _ = select.select([self.fd], [], [], max(0, deadline - time.time()))
            if not ready:
                break
            self.pending += os.read(self.fd, 65536)
        found = []
        *complete, self.pending = self.pending.split(b"\n")
        frame = None
        for line in complete:
            if line.startswith(b"\x06\x09"):
                frame = base64.b64decode(line[2:])
            elif line.startswith(b"\x04\x14") and frame is not None:
                frame += base64.b64decode(line[2:])
            else:
                if line.strip():
                    self.console = (self.console + line + b"\n")[-2048:]
                    self.since = (self.since + [line])[-400:]
                continue
            if frame is not None and len(frame) >= 2 and len(frame) - 2 >= struct.unpack(">H", frame[:2])[0]:
                packet = frame[2:-2]
                b0, _, _, group, seq, cmd = struct.unpack(">BBHHBB", packet[:8])
                body = cbor2.loads(packet[8:]) if len(packet) > 8 else None
                found.append({"op": b0 & 7, "ver": (b0 >> 3) & 3, "group": group, "seq": seq, "cmd": cmd, "body": body,
                              "raw": packet[8:]})
                frame = None
        return found

    def listen(self):
        """Starts a new record of console lines (`heard`)."""
        self.since = []

    def heard(self, text):
        """Whether a console line since `listen()` holds `text`."""
        return any(text in line for line in self.since)

    def answer_to(self, seq, limit):
        """The answers with sequence number `seq`, returning as soon as one has arrived (at most `limit` s)."""
        deadline = time.time() + limit
        found = []
        while time.time() < deadline:
            found += [a for a in self.answers(min(0.01, max(0, deadline - time.time()))) if a["seq"] == seq]
            if found:
                break
        return found

    def close(self):
        os.close(self.fd)


def probes(build, line=None, buf=None):
    """Line-buffer probes for a build (or for explicit line and buffer sizes: the QEMU builds)."""
    line, buf = line or BUILDS[build]["line"], buf or BUILDS[build]["buf"]
    longest = line - 1  # whole Base64 quads: 127 of 128, 511 of 512
    out = []

    def frame_with_lines(count, seq, line_length=longest):
        """The fullest frame of `count` lines of at most `line_length` bytes (its first lines exactly that)."""
        found = None
        for size in range(3000):
            lines = lines_of(echo(size, seq), line_length)
            if len(lines) > count:
                break
            if len(lines) == count:
                found = lines
        return found

    out.append(("longest line (%d bytes)" % longest, lambda s: [(s[0], frame_with_lines(1, s[0]), 0)]))
    out.append(("line of %d bytes" % (longest + 4), lambda s: [(s[0], frame_with_lines(1, s[0], longest + 4), 0)]))
    out.append(("2 lines back to back", lambda s: [(s[0], frame_with_lines(2, s[0]), 0)]))
    out.append(("3 lines back to back", lambda s: [(s[0], frame_with_lines(3, s[0], min(longest, 127)), 0)]))
    out.append(("2 one-line frames back to back", lambda s: [(s[0], lines_of(echo(10, s[0]), longest), 0), (s[1], lines_of(echo(10, s[1]), longest), 0)]))
    out.append(("3 one-line frames back to back", lambda s: [(x, lines_of(echo(10, x), longest), 0) for x in s[:3]]))
    out.append(("frame right behind a 2-line frame", lambda s: [(s[0], frame_with_lines(2, s[0]), 0), (s[1], lines_of(echo(10, s[1]), longest), 0)]))
    # What smp's link probe sends to learn how many frames the device takes at once: buf_count - 1 = 3
    # frames of a whole SMP buffer, back to back, in the longest lines.
    whole = lambda s: (echo_of_packet_size(buf - 4, s) or echo_of_packet_size(buf - 5, s))
    out.append(("3 whole-buffer frames back to back", lambda s: [(x, lines_of(whole(x), longest), 0) for x in s[:3]]))
    # What smp sends where the device takes only its 2 starting lines and frames of two bursts carry
    # more (the link probe measures them): 4 lines in bursts of 2, 30 ms apart.
    out.append(("4-line frame in bursts of 2 lines 30 ms apart", lambda s: [(s[0], frame_with_lines(4, s[0], min(longest, 127)), 0.03, 2)]))
    out.append(("packet of buf_size - 4 bytes, lines 30 ms apart", lambda s: [(s[0], lines_of(echo_of_packet_size(buf - 4, s[0]), min(longest, 127)), 0.03)]))
    out.append(("packet of buf_size - 3 bytes, lines 30 ms apart", lambda s: [(s[0], lines_of(echo_of_packet_size(buf - 3, s[0]), min(longest, 127)), 0.03)]))
    return out


# How long a probe waits at most for the echo sent behind its frames: a hang catcher (it returns as soon
# as the echo is answered); a device starved for that long has stopped.
FOLLOWER_BOUND = 120.0


def probe(link, make, seqs, wait=0.2, follower=None):
    """Sends one probe's frames; for each, whether the device took it (answered it). Returns as soon as
    every frame is answered. A frame still unanswered after `wait` s is settled by a one-line echo sent
    behind the frames (sequence numbers from `follower()`; without it, by the wait alone): a device
    answers in order, so a frame answered before the echo was taken, however late, and one unanswered
    when the echo is answered was dropped. An echo sent while the device's line buffers are still held
    is itself dropped: another goes every 5 s until one is answered (at most `FOLLOWER_BOUND` s)."""
    # Each send: (sequence number, lines, gap between bursts[, lines per burst, 1 if not given]).
    sends = make(seqs)
    if all(send[2] == 0 for send in sends):
        link.write([line for send in sends for line in send[1]])
    else:
        for send in sends:
            link.write(send[1], send[2], send[3] if len(send) > 3 else 1)
    expected = {send[0] for send in sends}
    answered = set()
    deadline = time.time() + wait
    while time.time() < deadline and not expected <= answered:
        answered |= {a["seq"] for a in link.answers(min(0.01, max(0, deadline - time.time())))}
    if follower is not None and not expected <= answered:
        answered |= {a["seq"] for a in settle(link, expected - answered, follower)}
    time.sleep(0.05)
    return [send[0] in answered for send in sends]


def settle(link, pending, follower):
    """The answers to the sequence numbers `pending` that come before the answer to a one-line echo sent
    behind them (sequence numbers from `follower()`): a device answers in order, so these are all it will
    send, however late. An echo sent while the device's line buffers are still held is dropped: another
    goes every 5 s until one is answered (at most `FOLLOWER_BOUND` s)."""
    found, sent, heard, resend_at = [], [], set(), 0.0

    def take(answers):
        for a in answers:
            if a["seq"] in sent:
                heard.add(a["seq"])
            elif a["seq"] in pending and a["seq"] not in {f["seq"] for f in found}:
                found.append(a)

    bound = time.time() + FOLLOWER_BOUND
    while time.time() < bound and not heard and not pending <= {a["seq"] for a in found}:
        if time.time() >= resend_at:
            sent.append(follower())
            link.write(lines_of(echo(1, sent[-1]), 127))
            resend_at = time.time() + 5.0
        take(link.answers(0.01))
    # Echoes still queued behind the frames are let through before the next frames take the line
    # buffers: until each is answered, or nothing came for 1 s (a dropped one never is).
    quiet = time.time() + 1.0
    while set(sent) - heard and time.time() < quiet:
        before = len(heard) + len(found)
        take(link.answers(0.01))
        if len(heard) + len(found) > before:
            quiet = time.time() + 1.0
    return found


def probe_both(links, make, next_seqs, wait=0.2, late=3.0, attempts=3):
    """A probe on every link: {name: [answered, ...]}, each frame settled by the echo behind it (`probe`,
    with sequence numbers from `next_seqs()`). When the outcomes differ, answers that arrive up to `late`
    seconds later count too, and a probe whose outcomes still differ is run again with the sequence
    numbers `next_seqs()` gives, up to `attempts` runs in all: the outcome is the first on which the links
    agree, else the last. Whether a frame is answered does not depend on time on an idle machine, so a
    device that differs differs in every run."""
    for _ in range(attempts):
        seqs = next_seqs()
        outcome = {name: probe(link, make, seqs, wait, follower=lambda: next_seqs()[0]) for name, link in links.items()}
        if len({tuple(o) for o in outcome.values()}) == 1:
            return outcome
        for name, link in links.items():
            arrived = {a["seq"] for a in link.answers(late)}
            outcome[name] = [was or s in arrived for was, s in zip(outcome[name], seqs)]
        if len({tuple(o) for o in outcome.values()}) == 1:
            return outcome
    return outcome


def answers_to_both(links, seq, send, wait=1.0, late=5.0):
    """Sends a request to every link (`send(link)`) and returns {name: answers with sequence number
    `seq`}, each returned as soon as it arrives, then 50 ms for the device to give its line buffers back
    (five ticks). When one device answered and the other not within `wait` s, the other gets `late` s
    more, and then the request once more: a loaded machine delays an answer, or (a device process that
    ran late, its line buffers still taken) drops the request, but does not change an answer."""
    got = {}
    for name, link in links.items():
        send(link)
        got[name] = link.answer_to(seq, wait)
        time.sleep(0.05)
    if any(got.values()):
        for name, link in links.items():
            if not got[name]:
                got[name] = link.answer_to(seq, late)
            if not got[name]:
                send(link)
                got[name] = link.answer_to(seq, late)
    return got


def requests(build):
    c = [
        ("params", 0, 0, 6, None),
        ("enum list", 0, 10, 1, None),
        ("enum details", 0, 10, 3, {}),
        ("stat list", 0, 2, 1, None),
        ("echo", 2, 0, 0, {"d": "hello"}),
        ("fs stat missing", 0, 8, 1, {"name": "/lfs1/none"}),
        ("fs upload", 2, 8, 0, {"name": "/lfs1/a", "off": 0, "len": 3, "data": b"abc"}),
        ("fs download", 0, 8, 0, {"name": "/lfs1/a", "off": 0}),
        ("image list (absent)", 0, 1, 0, None),
        ("settings read (absent or no root)", 0, 3, 0, {"name": "a/b"}),
    ]
    return c


def run(build, exe, sim_path):
    processes, directories = [], []

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

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
        signal.signal(number, on_signal)
    signal.alarm(180)
    try:
        directory = tempfile.mkdtemp(prefix="conformance-serial-")
        directories.append(directory)
        real = subprocess.Popen([exe], cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        processes.append(real)
        real_path = None
        for _ in range(20):
            text = real.stdout.readline().decode()
            match = re.search(r"(/dev/pts/\d+)", text)
            if match:
                real_path = match.group(1)
                break
        sim = subprocess.Popen([sim_path, "--like", build, "--pty"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, start_new_session=True)
        processes.append(sim)
        match = re.match(r"pty (\S+)", sim.stdout.readline().decode())
        if not real_path or not match:
            print("conformance_serial: a device did not start")
            return 2
        links = {"real": Link(real_path), "sim": Link(match.group(1))}
        time.sleep(0.5)
        for link in links.values():
            link.answers(0.3)
        longest = BUILDS[build]["line"] - 1
        failures, total, seq = [], 0, 0
        for label, op, group, cmd, body in requests(build):
            seq += 1
            payload = b"" if body is None else cbor2.dumps(body)
            lines = lines_of(header(op, group, seq, cmd, payload), longest)
            got = answers_to_both(links, seq, lambda link: link.write(lines, 0.012))
            total += 1
            loose = {"stat_list", "output"}
            diffs = []
            if len(got["real"]) != len(got["sim"]):
                diffs.append("answers: %d vs %d" % (len(got["real"]), len(got["sim"])))
            else:
                for a, b in zip(got["real"], got["sim"]):
                    diffs += compare(a["body"], b["body"], loose)
            if diffs:
                failures.append((label, diffs))
        for label, make in probes(build):
            def next_seqs():
                nonlocal seq
                seq += 3
                return [(seq - 2) % 256, (seq - 1) % 256, seq % 256]
            outcome = probe_both(links, make, next_seqs)
            total += 1
            if outcome["real"] != outcome["sim"]:
                failures.append((label, ["answered %s vs %s" % (outcome["real"], outcome["sim"])]))
        for label, diffs in failures:
            print("DIFFERS  %s: %s" % (label, "; ".join(diffs)))
        print("conformance_serial %s: %d cases, %d differences" % (build, total, len(failures)))
        for link in links.values():
            link.close()
        return 1 if failures else 0
    finally:
        stop_all()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--sim", required=True)
    parser.add_argument("--build", required=True, choices=sorted(BUILDS))
    parser.add_argument("--firmware", default=None)
    args = parser.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    firmware = args.firmware or os.path.join(repo, "..", "shared", "firmware")
    exe = os.path.join(firmware, EXE % args.build)
    if not os.path.exists(exe):
        print("conformance_serial: %s is absent; nothing to compare against" % exe)
        return 77
    run_like_hardware()
    return run(args.build, exe, args.sim)


if __name__ == "__main__":
    sys.exit(main())
