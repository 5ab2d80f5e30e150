#!/usr/bin/env python3
"""The Bluetooth LE stack's own round trip, for Scripts/bench-ble.sh: the floor any SMP client on this
BlueZ meets. Not an SMP client: it connects through BlueZ (D-Bus), takes the SMP characteristic's
AcquireWrite and AcquireNotify sockets (the fastest path BlueZ offers a client: one write() out, one
read() in, no D-Bus per packet) and times a fixed SMP echo request ("hi") written to one socket until
its answer is read from the other. Everything an SMP client adds (encoding, sessions, D-Bus per
packet) is left out, so a client's echo can approach this figure but not beat it.

Usage: bench_ble_floor.py --ble ADDRESS [--adapter hciN] [--count N]
Prints one JSON line: {"op": "floor-echo", "seconds": MEDIAN, "runs": N, "att_mtu": M}; exit 1 on failure.
"""

import argparse
import asyncio
import json
import os
import select
import socket
import statistics
import sys
import time

from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

SMP_CHARACTERISTIC = "da2e7828-fbce-4e01-ae9e-261174997c48"
# SMP v2 header (write, os group 0, command 0 echo, sequence 1) and CBOR {"d": "hi"}.
ECHO = bytes([0x0A, 0x00, 0x00, 0x06, 0x00, 0x00, 0x01, 0x00]) + bytes([0xA1, 0x61, 0x64, 0x62, 0x68, 0x69])


async def call(bus, path, interface, member, signature="", body=(), destination="org.bluez"):
    reply = await bus.call(
        Message(destination=destination, path=path, interface=interface, member=member, signature=signature, body=list(body))
    )
    if reply.message_type == MessageType.ERROR:
        raise RuntimeError(f"{member}: {reply.error_name}: {reply.body}")
    return reply


async def objects(bus):
    reply = await call(bus, "/", "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
    return reply.body[0]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ble", required=True, metavar="ADDRESS")
    parser.add_argument("--adapter", default="hci0")
    parser.add_argument("--count", type=int, default=5)
    args = parser.parse_args()
    bus = await MessageBus(bus_type=BusType.SYSTEM, negotiate_unix_fd=True).connect()
    device = f"/org/bluez/{args.adapter}/dev_" + args.ble.upper().replace(":", "_")
    deadline = time.monotonic() + 60
    while True:
        try:
            await call(bus, device, "org.bluez.Device1", "Connect")
            break
        except RuntimeError as error:
            if time.monotonic() > deadline:
                raise
            print(f"connect: {error}; again", file=sys.stderr)
            await asyncio.sleep(1)
    try:
        characteristic = None
        while characteristic is None and time.monotonic() < deadline:
            for path, interfaces in (await objects(bus)).items():
                properties = interfaces.get("org.bluez.GattCharacteristic1")
                if path.startswith(device + "/") and properties and properties["UUID"].value.lower() == SMP_CHARACTERISTIC:
                    characteristic = path
            if characteristic is None:
                await asyncio.sleep(0.2)
        if characteristic is None:
            raise RuntimeError("no SMP characteristic")
        notify = await call(bus, characteristic, "org.bluez.GattCharacteristic1", "AcquireNotify", "a{sv}", [{}])
        write = await call(bus, characteristic, "org.bluez.GattCharacteristic1", "AcquireWrite", "a{sv}", [{}])
        notify_fd = notify.unix_fds[notify.body[0]]
        write_fd = write.unix_fds[write.body[0]]
        times = []
        for _ in range(args.count):
            started = time.perf_counter()
            os.write(write_fd, ECHO)
            readable, _, _ = select.select([notify_fd], [], [], 10)
            if not readable:
                raise RuntimeError("no answer to the echo within 10 s")
            answer = os.read(notify_fd, 4096)
            times.append(time.perf_counter() - started)
            if len(answer) < 8 or answer[0] & 0x07 != 3:
                raise RuntimeError(f"unexpected answer {answer.hex()}")
        os.close(notify_fd)
        os.close(write_fd)
        print(json.dumps({"op": "floor-echo", "seconds": statistics.median(times), "runs": len(times), "att_mtu": notify.body[1]}))
    finally:
        try:
            await call(bus, device, "org.bluez.Device1", "Disconnect")
        except RuntimeError:
            pass
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main()))
    except Exception as error:  # noqa: BLE001
        print(f"bench_ble_floor: {error}", file=sys.stderr)
        sys.exit(1)
