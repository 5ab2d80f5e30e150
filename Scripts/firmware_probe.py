#!/usr/bin/env python3
"""Asks a device for one SMP echo and exits 0 when it answers, whatever its return code (MCUboot's serial
recovery answers ENOTSUP): the firmware rig's readiness check.

Standard library only, and independent of `smp`: the rig must tell "the firmware runs" apart from
"our client works". One request of one short console line (serial) or one datagram (UDP), so it fits
every build's buffers.

Usage:
  firmware_probe.py --serial PATH [--timeout S]
  firmware_probe.py --udp HOST:PORT [--timeout S]
  firmware_probe.py --serial PATH --await TEXT [--timeout S]
      Sends nothing: reads the console until TEXT appears in it (e.g. the application's boot banner,
      for a device that must get no input while it boots), keeping what was there before it opened.
Exit: 0 answered (or TEXT seen), 1 no answer (no TEXT) within the timeout, 2 could not open the device.
"""

import argparse
import base64
import os
import select
import socket
import struct
import sys
import termios
import time
import tty


def crc16_xmodem(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def echo_request(sequence: int) -> bytes:
    # CBOR {"d": "rig"}; SMP v1 header: op 2 (write), flags 0, length, group 0 (os), sequence, id 0 (echo).
    body = bytes([0xA1, 0x61, 0x64, 0x63]) + b"rig"
    return struct.pack(">BBHHBB", 2, 0, len(body), 0, sequence, 0) + body


def is_echo_answer(packet: bytes, sequence: int) -> bool:
    if len(packet) < 8:
        return False
    op, _, length, group, seq, command = struct.unpack(">BBHHBB", packet[:8])
    return (op & 0x07) == 3 and group == 0 and seq == sequence and command == 0 and len(packet) >= 8 + length


def chunks(fd: int, deadline: float):
    """What the serial device sends until `deadline` (monotonic), as it comes."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            continue
        try:
            yield os.read(fd, 4096)
        except BlockingIOError:
            continue
        except OSError:
            time.sleep(0.05)  # EIO while the other side of a pty is not there yet


def probe_serial(path: str, timeout: float) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as error:
        print(f"firmware_probe: cannot open {path}: {error}", file=sys.stderr)
        return 2
    try:
        try:
            tty.setraw(fd)
            termios.tcflush(fd, termios.TCIOFLUSH)
        except termios.error:
            pass  # not a tty (a test double): raw already
        sequence = int(time.monotonic() * 1000) & 0xFF
        packet = echo_request(sequence)
        frame = struct.pack(">H", len(packet) + 2) + packet + struct.pack(">H", crc16_xmodem(packet))
        os.write(fd, b"\x06\x09" + base64.b64encode(frame) + b"\n")
        pending = b""
        for chunk in chunks(fd, time.monotonic() + timeout):
            pending += chunk
            # Answers are single-line frames here (a short echo); look at every complete line.
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                start = line.find(b"\x06\x09")
                if start < 0:
                    continue
                try:
                    decoded = base64.b64decode(line[start + 2 :].strip(), validate=False)
                except ValueError:
                    continue
                if len(decoded) >= 4 and is_echo_answer(decoded[2:-2], sequence):
                    return 0
        return 1
    finally:
        os.close(fd)


def await_text(path: str, text: bytes, timeout: float) -> int:
    # No flush and no termios change (tcsetattr's flush would drop what the device printed before).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as error:
        print(f"firmware_probe: cannot open {path}: {error}", file=sys.stderr)
        return 2
    seen = b""
    try:
        for chunk in chunks(fd, time.monotonic() + timeout):
            seen = (seen + chunk)[-4096:]
            if text in seen:
                return 0
        shown = seen[-400:].decode("latin-1").replace("\r", "")
        print(f"firmware_probe: {text.decode()!r} not seen on {path} within {timeout:g} s; the console showed"
              + (f":\n{shown}" if shown else " nothing"), file=sys.stderr)
        return 1
    finally:
        os.close(fd)


def probe_udp(address: str, timeout: float) -> int:
    host, _, port = address.rpartition(":")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sequence = int(time.monotonic() * 1000) & 0xFF
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                sock.sendto(echo_request(sequence), (host.strip("[]"), int(port)))
            except OSError:
                pass
            ready, _, _ = select.select([sock], [], [], min(0.5, max(0.0, deadline - time.monotonic())))
            if ready:
                try:
                    data = sock.recv(4096)
                except OSError:
                    time.sleep(0.05)  # ICMP port unreachable: not bound yet
                    continue
                if is_echo_answer(data, sequence):
                    return 0
        return 1
    finally:
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    link = parser.add_mutually_exclusive_group(required=True)
    link.add_argument("--serial", metavar="PATH")
    link.add_argument("--udp", metavar="HOST:PORT")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--await", dest="wait_for", metavar="TEXT")
    args = parser.parse_args()
    if args.wait_for is not None:
        if not args.serial:
            parser.error("--await reads a serial console (--serial PATH)")
        return await_text(args.serial, args.wait_for.encode(), args.timeout)
    if args.serial:
        return probe_serial(args.serial, args.timeout)
    return probe_udp(args.udp, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
