#!/usr/bin/env python3
"""Times smpclient (the independent Python SMP client) against a real firmware build, for
Scripts/bench-firmware.sh, or a Bluetooth LE device through BlueZ (bleak), for Scripts/bench-ble.sh:
echo round trips, a file upload and download, an image upload.

Usage:
  bench_firmware_smpclient.py (--serial PATH | --udp HOST:PORT | --ble ADDRESS) [--frames SPEC] OPERATION...
Frame sizing (--frames; serial only): `auto` (smpclient's default: messages up to the device's
buf_size), `lines:L:N` (BufferParams: at most N lines of L bytes per frame: `lines:128:2` for Zephyr's
default 2 x 128-byte line buffers), `buffer:B:L` (BufferSize: buf_size B, lines of L bytes).
Operations, run in the order given, each timed after the connection is up:
  --echo N               N echo round trips ("hi"); reports the median
  --fs-upload BYTES      a file of random bytes (or --file's) to --dest (default /lfs1/bench-smpclient.bin)
  --fs-download          that file back (after --fs-upload), compared byte for byte
  --image FILE           image upload to slot 0 (smpclient's `upload`, SHA-256 in the first chunk)
Prints one JSON line per operation: {"op": ..., "seconds": S, ...}, and first {"op": "connect", ...}: the
time to the link being up (over BLE: scan, connect, GATT discovery, subscription); exit 1 when an
operation fails.
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from smp.os_management import EchoWriteRequest  # noqa: F401  (import check: the smp package is there)
from smpclient import SMPClient
from smpclient.generics import error, success
from smpclient.requests.os_management import EchoWrite
from smpclient.transport.ble import SMPBLETransport
from smpclient.transport.serial import SMPSerialTransport
from smpclient.transport.serial.encoded import Auto, BufferParams, BufferSize
from smpclient.transport.udp import SMPUDPTransport


def strategy(spec: str):
    kind, *values = spec.split(":")
    if kind == "auto":
        return Auto()
    if kind == "lines":
        return BufferParams(line_length=int(values[0]), line_buffers=int(values[1]))
    if kind == "buffer":
        return BufferSize(buf_size=int(values[0]), line_length=int(values[1]) if len(values) > 1 else 128)
    raise SystemExit(f"unknown --frames {spec!r}")


async def use_known_devices() -> None:
    """Makes bleak's find_device_by_address, which smpclient's BLE transport calls, answer with the
    device BlueZ already knows when its own scan sees no new advertisement within a few seconds."""
    from bleak import BleakScanner
    from bleak.backends.bluezdbus.manager import get_global_bluez_manager
    from bleak.backends.device import BLEDevice

    scan = BleakScanner.find_device_by_address

    async def find(address, timeout=10.0, **kwargs):
        device = await scan(address, timeout=min(timeout, 3.0), **kwargs)
        if device is not None:
            return device
        manager = await get_global_bluez_manager()
        for path, interfaces in manager._properties.items():  # bleak's cache of BlueZ's objects
            properties = interfaces.get("org.bluez.Device1")
            if properties and properties.get("Address", "").upper() == address.upper():
                return BLEDevice(address, properties.get("Name"), {"path": path, "props": properties})
        return await scan(address, timeout=timeout, **kwargs)

    BleakScanner.find_device_by_address = staticmethod(find)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    link = parser.add_mutually_exclusive_group(required=True)
    link.add_argument("--serial", metavar="PATH")
    link.add_argument("--udp", metavar="HOST:PORT")
    link.add_argument("--ble", metavar="ADDRESS")
    parser.add_argument("--frames", default="auto")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--echo", type=int, default=0)
    parser.add_argument("--fs-upload", type=int, default=0, metavar="BYTES")
    parser.add_argument("--file", help="upload this file's bytes instead of random ones (--fs-upload 1)")
    parser.add_argument("--fs-download", action="store_true")
    parser.add_argument("--dest", default="/lfs1/bench-smpclient.bin")
    parser.add_argument("--image")
    args = parser.parse_args()

    started = time.perf_counter()
    if args.ble:
        # Scanning for the device, connecting and subscribing take longer than one request. bleak's
        # scan waits for a new advertisement, which the virtual controllers of Scripts/ble-vm.sh send
        # only when a scan starts: a device BlueZ already knows is taken from BlueZ instead, as smp
        # does. Up to three tries, the link-up time being the last one's.
        await use_known_devices()
        for attempt in range(3):
            client = SMPClient(SMPBLETransport(), args.ble, timeout_s=args.timeout)
            try:
                started = time.perf_counter()
                await client.connect(max(args.timeout, 30.0))
                break
            except Exception as failure:  # noqa: BLE001 - retried, then reported
                print(f"smpclient: connect attempt {attempt + 1} failed: {type(failure).__name__}: {failure}", file=sys.stderr)
                if attempt == 2:
                    raise
    elif args.udp:
        host, _, port = args.udp.rpartition(":")
        transport = SMPUDPTransport()
        client = SMPClient(transport, host.strip("[]"), timeout_s=args.timeout)
        await transport.connect(client.address, args.timeout, port=int(port))
        await client._initialize(args.timeout)
    else:
        transport = SMPSerialTransport(strategy(args.frames))
        client = SMPClient(transport, args.serial, timeout_s=args.timeout)
        await client.connect()

    print(json.dumps({"op": "connect", "seconds": time.perf_counter() - started}), flush=True)
    status = 0
    data = open(args.file, "rb").read() if args.file else os.urandom(args.fs_upload)
    try:
        if args.echo:
            times = []
            for _ in range(args.echo):
                start = time.perf_counter()
                response = await client.request(EchoWrite(d="hi"))
                times.append(time.perf_counter() - start)
                if not success(response) or response.r != "hi":
                    raise RuntimeError(f"echo answered {response}")
            print(json.dumps({"op": "echo", "seconds": statistics.median(times), "runs": len(times)}), flush=True)
        if args.fs_upload:
            start = time.perf_counter()
            offset = 0
            async for offset in client.upload_file(data, args.dest):
                pass
            seconds = time.perf_counter() - start
            if offset != len(data):
                raise RuntimeError(f"upload stopped at {offset} of {len(data)} bytes")
            print(json.dumps({"op": "fs-upload", "bytes": len(data), "seconds": seconds}), flush=True)
        if args.fs_download:
            start = time.perf_counter()
            back = await client.download_file(args.dest)
            seconds = time.perf_counter() - start
            if back != data:
                raise RuntimeError(f"download of {len(back)} bytes differs from the {len(data)} uploaded")
            print(json.dumps({"op": "fs-download", "bytes": len(back), "seconds": seconds}), flush=True)
        if args.image:
            image = open(args.image, "rb").read()
            start = time.perf_counter()
            offset = 0
            async for offset in client.upload(image):
                pass
            seconds = time.perf_counter() - start
            if offset != len(image):
                raise RuntimeError(f"image upload stopped at {offset} of {len(image)} bytes")
            print(json.dumps({"op": "image-upload", "bytes": len(image), "seconds": seconds}), flush=True)
    except Exception as failure:  # noqa: BLE001 - reported, the bench prints FAILED for the row
        print(f"smpclient failed: {type(failure).__name__}: {failure}", file=sys.stderr)
        status = 1
    finally:
        await client.disconnect()
    return status


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
