#!/usr/bin/env python3
"""The device's own turnaround for one console frame: the median round trip of SMP requests of a given
packet size, written raw to a serial port (no client library in between). With the data one upload
frame of that size carries, it gives the link ceiling a client can reach on that device: data per
frame / round trip.

Requests: `echo` (answered with as many bytes again) or `params` (an `os params` read padded to the
size with a key the device ignores, answered in a few bytes: as an upload chunk is).

Usage: bench_link_ceiling.py TTY PACKET_SIZE [--request echo|params] [--count N] [--line 127] [--lines 2]
       [--gap-ms 20]
Prints JSON: {"packet": N, "lines": N, "median_seconds": S, "answered": N, "count": N}."""
import argparse, base64, json, os, select, statistics, struct, termios, time, tty

import cbor2


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def frame_lines(packet, line_length):
    body = struct.pack(">H", len(packet) + 2) + packet + struct.pack(">H", crc16(packet))
    text = base64.b64encode(body)
    per = (line_length - 3) // 4 * 4
    return [(b"\x06\x09" if i == 0 else b"\x04\x14") + text[i:i + per] + b"\n" for i in range(0, len(text), per)]


def params_packet(size, sequence):
    # header 8, map 1, "pad" 4, then the byte string head and the bytes
    budget = size - 8 - 5
    n = budget - 1
    while n > 0 and len(cbor2.dumps(b"\0" * n)) > budget:
        n -= 1
    payload = cbor2.dumps({"pad": b"\0" * n})
    header = struct.pack(">BBHHBB", (1 << 3) | 0, 0, len(payload), 0, sequence & 0xFF, 6)
    return header + payload


def echo_packet(size, sequence):
    # header 8, map 1, "d" 2, then the text head and the text
    budget = size - 8 - 3
    n = budget - 1
    while n > 0 and len(cbor2.dumps("a" * n)) > budget:
        n -= 1
    payload = cbor2.dumps({"d": "a" * n})
    header = struct.pack(">BBHHBB", (1 << 3) | 2, 0, len(payload), 0, sequence & 0xFF, 0)
    return header + payload


def frame_complete(received):
    """Whether `received` holds a whole console frame: its length prefix counts all the bytes decoded."""
    text = b""
    for line in received.split(b"\n")[:-1]:
        if line.startswith(b"\x06\x09"):
            text = line[2:]
        elif line.startswith(b"\x04\x14") and text:
            text += line[2:]
    usable = len(text) // 4 * 4
    try:
        body = base64.b64decode(text[:usable])
    except ValueError:
        return False
    return len(body) >= 2 and len(body) >= 2 + struct.unpack(">H", body[:2])[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("tty")
    parser.add_argument("packet", type=int)
    parser.add_argument("--request", choices=["echo", "params"], default="echo")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--line", type=int, default=127)
    parser.add_argument("--lines", type=int, default=2)
    parser.add_argument("--gap-ms", type=float, default=20)
    parser.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    fd = os.open(args.tty, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    termios.tcflush(fd, termios.TCIOFLUSH)
    rtts = []
    for i in range(args.count):
        make = params_packet if args.request == "params" else echo_packet
        lines = frame_lines(make(args.packet, i), args.line)
        start = time.monotonic()
        for b in range(0, len(lines), args.lines):
            if b:
                time.sleep(args.gap_ms / 1000)
            os.write(fd, b"".join(lines[b:b + args.lines]))
        received = b""
        deadline = start + args.timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
            if not ready:
                break
            received += os.read(fd, 65536)
            if frame_complete(received):
                rtts.append(time.monotonic() - start)
                break
    os.close(fd)
    print(json.dumps({"packet": args.packet, "lines": len(frame_lines(echo_packet(args.packet, 0), args.line)),
                      "median_seconds": statistics.median(rtts) if rtts else None,
                      "answered": len(rtts), "count": args.count}))


if __name__ == "__main__":
    main()
