#!/usr/bin/env python3
"""Times a file upload with smpclient (the independent Python SMP client) for Scripts/bench.sh.

Usage:
  bench_smpclient.py --udp HOST:PORT  [--size BYTES] [--dest /lfs1/bench.bin] [--mtu 1500]
  bench_smpclient.py --serial PATH    [--size BYTES] [--baud 1000000]

Settings match the `smp` CLI's defaults: UDP datagrams of up to 1472 bytes (a 1500-byte link MTU less
the IPv4 and UDP headers); serial console framing with 127-byte lines and messages sized to the
device's advertised buf_size (smpclient's `Auto` strategy reads it from OS params, as `smp` does).
Prints one JSON line: {"client": "smpclient", "bytes": N, "seconds": S, "rate": B/s}.
"""

import argparse
import asyncio
import json
import os
import sys
import time

from smpclient import SMPClient
from smpclient.transport.serial import SMPSerialTransport
from smpclient.transport.udp import SMPUDPTransport


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    link = parser.add_mutually_exclusive_group(required=True)
    link.add_argument("--udp", metavar="HOST:PORT")
    link.add_argument("--serial", metavar="PATH")
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--dest", default="/lfs1/bench-smpclient.bin")
    parser.add_argument("--mtu", type=int, default=1500, help="UDP link MTU (smpclient subtracts 28)")
    parser.add_argument("--baud", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args()

    if args.udp:
        host, _, port = args.udp.rpartition(":")
        transport = SMPUDPTransport(mtu=args.mtu)
        client = SMPClient(transport, host.strip("[]"), timeout_s=args.timeout)
        # SMPClient.connect() passes no port; SMPUDPTransport.connect defaults to 1337.
        await transport.connect(client.address, args.timeout, port=int(port))
        await client._initialize(args.timeout)
    else:
        transport = SMPSerialTransport(baudrate=args.baud)
        client = SMPClient(transport, args.serial, timeout_s=args.timeout)
        await client.connect()

    data = os.urandom(args.size)
    try:
        start = time.perf_counter()
        offset = 0
        async for offset in client.upload_file(data, args.dest):
            pass
        seconds = time.perf_counter() - start
    finally:
        await client.disconnect()
    if offset != len(data):
        print(f"upload stopped at {offset} of {len(data)} bytes", file=sys.stderr)
        return 1
    print(json.dumps({"client": "smpclient", "bytes": len(data), "seconds": seconds, "rate": len(data) / seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
