#!/usr/bin/env python3
"""The device's floor for Scripts/bench-firmware.sh's native_sim rows: the least time any client needs on
the build, from the build's own limits, with its arithmetic. Independent of every client: no trace, no
measured round trip.

The limits (Zephyr 4.4.0 source, checked against the shipped executables' CONFIG_ symbols; see the
Benchmarks article):
- serial builds: uart_native_pty reads the pty from one thread that sleeps 1 tick (10 ms) between reads,
  and the kernel adds a tick to a relative timeout, so the device reads every 20 ms, on a fixed grid. A
  read takes at most CONFIG_UART_MCUMGR_RX_BUF_COUNT lines (2 x 128 B; serial-fs 32 x 512 B: more are
  dropped) and at most NETBUF_COUNT - 1 frames (4 buffers: 3; a 4th gets ENOMEM); requests are answered
  at the read that completes them, at once. A frame longer than the lines one read takes spans reads.
- udp: answers on its 10 ms tick; 2 buffers of 2048 B, a request holds one until answered and its answer
  takes the other: one request per tick.
A transfer then costs reads (ticks): the fewest over every frame shape the buffers allow (chunks as large
as fit a given number of lines, frames in flight as the buffers take them), its chunks packed as tightly as
the device takes them, plus one read for the hash that verifies it. The first request meets a read after
half a period on average, every later one a whole period: (reads - 0.5) x period.

Usage: bench_device_floor.py BUILD {upload|download|echo} [--size N] [--name PATH]
Prints one JSON line: {"seconds": S, "reads": R, "period": P, "shape": "...", "arithmetic": "..."}.
"""
import argparse
import base64
import json
import math

import cbor2

BUILDS = {
    "serial": dict(period=0.020, lines=2, line=128, buf=384, bufs=4, link="serial"),
    "serial-fs": dict(period=0.020, lines=32, line=512, buf=1024, bufs=4, link="serial"),
    "udp": dict(period=0.010, lines=None, line=None, buf=2048, bufs=2, link="udp"),
}
HEADER = 8


def bstr_head(n):
    return 1 if n < 24 else 2 if n < 256 else 3 if n < 65536 else 5


def most_data(room, body):
    """The most data bytes a request or answer with CBOR map `body` (its data empty) carries in `room` bytes."""
    empty = len(cbor2.dumps(body))
    n = max(0, room - empty)
    while n > 0 and empty - 1 + bstr_head(n) + n > room:
        n -= 1
    return n


def lines_for(packet, line):
    """Console lines of a packet's frame (length, packet, CRC in Base64; 3 bytes of markers per line)."""
    chars = len(base64.b64encode(bytes(packet + 4)))
    per_line = (line - 1 - 3) // 4 * 4
    return math.ceil(chars / per_line)


def largest_packet(lines, line):
    per_line = (line - 1 - 3) // 4 * 4
    return lines * per_line // 4 * 3 - 4


def floor(build, op, size, name):
    b = BUILDS[build]
    if op == "echo":
        return 1, "one request"
    frames_per_read = b["bufs"] - 1 if b["link"] == "serial" else b["bufs"] // 2
    if op == "download":
        # One-line requests; answers as large as the device's buffer takes.
        data = most_data(b["buf"] - HEADER, {"off": size, "data": b"", "len": size})
        requests = math.ceil(size / data)
        per_read = min(frames_per_read, b["lines"]) if b["lines"] else frames_per_read
        reads = math.ceil(requests / per_read)
        return reads + 1, f"{requests} requests of {data} B answers, {per_read} per read, + 1 hash"
    # Upload: every frame shape (lines per frame) the buffer allows; the fewest reads.
    body = {"off": size, "data": b"", "name": name}
    if b["link"] == "udp":
        data = most_data(b["buf"] - HEADER, body)
        requests = math.ceil(size / data)
        return math.ceil(requests / frames_per_read) + 1, f"{requests} chunks of {data} B, {frames_per_read} per tick, + 1 hash"
    best = None
    for lines in range(1, lines_for(b["buf"] - 4, b["line"]) + 1):
        packet = min(b["buf"] - 4, largest_packet(lines, b["line"]))
        data = most_data(packet - HEADER, body)
        if data <= 0:
            continue
        requests = math.ceil(size / data)
        if lines <= b["lines"]:
            per_read = min(frames_per_read, b["lines"] // lines)
            reads = math.ceil(requests / per_read)
            shape = f"{requests} chunks of {data} B in {lines}-line frames, {per_read} per read"
        else:
            per_frame = math.ceil(lines / b["lines"])
            reads = requests * per_frame
            shape = f"{requests} chunks of {data} B in {lines}-line frames over {per_frame} reads each"
        if best is None or reads < best[0]:
            best = (reads, shape)
    return best[0] + 1, best[1] + ", + 1 hash"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build", choices=sorted(BUILDS))
    p.add_argument("op", choices=["upload", "download", "echo"])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--name", default="/lfs1/bench.bin")
    a = p.parse_args()
    reads, shape = floor(a.build, a.op, a.size, a.name)
    period = BUILDS[a.build]["period"]
    seconds = (reads - 0.5) * period
    print(json.dumps({"seconds": seconds, "reads": reads, "period": period, "shape": shape,
                      "arithmetic": f"({reads} reads - 0.5) x {period * 1000:.0f} ms = {seconds * 1000:.0f} ms ({shape})"}))


main()
