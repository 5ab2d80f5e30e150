#!/usr/bin/env python3
"""Soak test: many transfers of each kind through smp-sim's injected link faults.

For each fault profile and link (serial over a pty, UDP on loopback) it starts one `smp-sim --faults ...`
and runs `smp` transfers of random sizes: fs upload (checked by smp's own SHA-256 and by a download
compared byte for byte), fs download, image upload (checked against the device's image list) and dfu
(checked against the image the device runs afterwards). Every transfer is a separate `smp` process with
a hard deadline; every loop is bounded in count and in time. Standard-library Python only.

Each transfer ends as one of: completed (verified), a clear error (smp exited non-zero with an error
message inside the deadline), a hang (killed at the deadline, or died of a signal), or corrupt (smp said
success but the data differs: bytes lost or changed). The table prints per profile and link; the exit
status is 1 when any hang or corrupt transfer happened, or when a fault-free transfer did not complete.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

# name -> (faults for serial, faults for udp); None = not run on that link.
PROFILES = {
    "clean": ("none", "none"),
    "loss10": ("loss=0.02", "loss=0.1"),
    # A device with native_sim's ~10 ms answer time, without and with 10% loss each way.
    "rtt10": (None, "delay=10"),
    "loss10-rtt10": (None, "loss=0.1,delay=10"),
    "dup-reorder": ("dup=0.02,reorder=0.02", "dup=0.02,reorder=0.02"),
    "corrupt": ("corrupt=1e-4", None),
    "noise": ("noise=0.05,drop-lines=0.002", None),
    "resets": ("reset-after=60000,resets=3,reset-in-erase=1", "reset-after=300000,resets=3,reset-in-erase=1"),
    "combined": ("loss=0.02,dup=0.02,reorder=0.02,corrupt=1e-4,noise=0.05,jitter=5",
                 "loss=0.1,dup=0.02,reorder=0.02,jitter=5"),
}
# The fault-free profile a profile's throughput is compared with (default: clean).
BASELINE = {"loss10-rtt10": "rtt10"}
ERROR_EXITS = {1, 66, 69, 75, 76}


def mcuboot_image(payload: bytes, version: tuple) -> tuple:
    """A minimal MCUboot image (header, payload, SHA-256 TLV); returns (bytes, hash)."""
    header_size = 32
    header = struct.pack("<IIHHIIBBHII", 0x96F3B83D, 0, header_size, 0, len(payload), 0,
                         version[0], version[1], version[2], version[3], 0)
    body = header + payload
    digest = hashlib.sha256(body).digest()
    tlv = struct.pack("<HHBBH", 0x6907, 4 + 4 + 32, 0x10, 0, 32) + digest
    return body + tlv, digest


class Sim:
    """One smp-sim process with a fault profile on one link."""

    def __init__(self, args, link, faults, directory, seed):
        self.link = link
        command = [os.path.join(args.bin, "smp-sim"), "--buf-size", "2048", "--rx-lines", "0",
                   "--fs-blocks", "0", "--udp-queue", "unlimited", "--swap-time", "0"]
        if faults != "none":
            command += ["--faults", f"{faults},seed={seed}"]
        if link == "serial":
            self.device_path = os.path.join(directory, "tty")
            command += ["--pty-link", self.device_path]
        else:
            command += ["--udp", "127.0.0.1:0"]
        self.stderr = open(os.path.join(directory, f"sim-{link}.stderr"), "w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr,
                                        stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.device = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.device is None:
            line = self.process.stdout.readline()
            if not line:
                break
            words = line.split()
            if words and words[0] == "pty":
                self.device = f"serial:{self.device_path}"
            elif words and words[0] == "udp":
                self.device = f"udp:{words[1]}"
        if self.device is None:
            self.stop()
            raise RuntimeError(f"smp-sim did not start: {' '.join(command)}")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.stderr.close()


class Outcome:
    def __init__(self, kind, size, state, seconds, detail=""):
        self.kind, self.size, self.state, self.seconds, self.detail = kind, size, state, seconds, detail


def run_smp(args, device, arguments, deadline):
    """Runs smp; returns (exit status or None when killed at the deadline, stdout, stderr, seconds)."""
    command = [os.path.join(args.bin, "smp"), "--device", device] + arguments
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = process.communicate(timeout=deadline)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        status = None
    return status, out.decode(errors="replace"), err.decode(errors="replace"), time.monotonic() - start


def classify(kind, size, status, out, err, seconds, check):
    """Outcome of one smp run: a hang, a clear error, corrupt or completed (`check()` verifies the data)."""
    if status is None:
        return Outcome(kind, size, "hang", seconds, "killed at the deadline; stderr: " + err.strip()[-300:])
    if status < 0:
        return Outcome(kind, size, "hang", seconds, f"died of signal {-status}; stderr: " + err.strip()[-300:])
    if status != 0:
        message = err.strip()
        if not message:
            # Under --json the error is the JSON object on stdout: {"error": {"message": ...}}.
            try:
                message = json.loads(out.strip().splitlines()[-1])["error"]["message"].strip()
            except (ValueError, IndexError, KeyError, TypeError):
                message = ""
        if status in ERROR_EXITS and message:
            return Outcome(kind, size, "error", seconds, f"exit {status}: " + message.splitlines()[-1][:200])
        return Outcome(kind, size, "unclear", seconds, f"exit {status} without a clear message: {message[-300:]}")
    problem = check()
    if problem:
        return Outcome(kind, size, "corrupt", seconds, problem)
    return Outcome(kind, size, "completed", seconds)


def deadline_for(size, link):
    # Generous: a transfer that needs longer than this is stuck, not slow (loopback, debug build).
    rate = 8_000 if link == "serial" else 50_000
    return 60 + size / rate


def soak_one(args, profile, link, faults, rng, end_time, directory):
    seed = rng.randrange(1, 1 << 31)
    sim = Sim(args, link, faults, directory, seed)
    outcomes = []
    try:
        counter = 0
        for round_index in range(args.count):
            for kind in ("fs", "image-up", "dfu"):
                if time.monotonic() > end_time:
                    return outcomes, seed
                counter += 1
                max_size = args.max_size_serial if link == "serial" else args.max_size_udp
                size = rng.randrange(1, max_size + 1)
                if kind == "fs":
                    outcomes += soak_fs(args, sim, link, size, rng, counter, directory)
                elif kind == "image-up":
                    outcomes.append(soak_image(args, sim, link, size, rng, counter, directory))
                else:
                    outcomes.append(soak_dfu(args, sim, link, size, rng, counter, directory))
    finally:
        sim.stop()
    return outcomes, seed


def soak_fs(args, sim, link, size, rng, counter, directory):
    data = rng.randbytes(size)
    local = os.path.join(directory, f"up-{counter}.bin")
    with open(local, "wb") as f:
        f.write(data)
    remote = f"/lfs1/soak-{counter}.bin"
    status, out, err, seconds = run_smp(args, sim.device, ["--json", "fs", "upload", local, remote],
                                        deadline_for(size, link))

    def check_upload():
        try:
            result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return f"no JSON result: {out[-200:]}"
        if result.get("verified") not in ("sha256", "crc32"):
            return f"upload not verified by a hash: {result}"
        return None

    up = classify("fs-up", size, status, out, err, seconds, check_upload)
    if up.state != "completed":
        return [up]
    back = os.path.join(directory, f"down-{counter}.bin")
    status, out, err, seconds = run_smp(args, sim.device, ["--json", "fs", "download", remote, back],
                                        deadline_for(size, link))

    def check_download():
        try:
            with open(back, "rb") as f:
                got = f.read()
        except OSError as error:
            return f"no downloaded file: {error}"
        if got != data:
            same = next((i for i, (a, b) in enumerate(zip(got, data)) if a != b), min(len(got), len(data)))
            return f"downloaded {len(got)} bytes, uploaded {len(data)}; first difference at {same}"
        return None

    down = classify("fs-down", size, status, out, err, seconds, check_download)
    if down.state == "completed" or down.state == "corrupt":
        # A download that completed proves the uploaded file; a corrupt one blames the upload or download.
        pass
    for path in (local, back):
        if os.path.exists(path):
            os.remove(path)
    return [up, down]


def image_list(args, sim):
    for _ in range(10):
        status, out, _, _ = run_smp(args, sim.device, ["--json", "image", "list"], 30)
        if status == 0:
            try:
                return json.loads(out.strip().splitlines()[-1]).get("images", [])
            except (ValueError, IndexError):
                pass
        time.sleep(0.2)
    return None


def soak_image(args, sim, link, size, rng, counter, directory):
    image, digest = mcuboot_image(rng.randbytes(size), (1, rng.randrange(256), rng.randrange(65536), counter))
    local = os.path.join(directory, f"image-{counter}.bin")
    with open(local, "wb") as f:
        f.write(image)
    status, out, err, seconds = run_smp(args, sim.device, ["image", "upload", local], deadline_for(size, link))

    def check():
        images = image_list(args, sim)
        if images is None:
            return "image list failed after the upload"
        if not any(slot.get("hash") == digest.hex() for slot in images):
            return f"the device lists no image with hash {digest.hex()[:16]}...: {images}"
        return None

    outcome = classify("image-up", len(image), status, out, err, seconds, check)
    os.remove(local)
    return outcome


def soak_dfu(args, sim, link, size, rng, counter, directory):
    image, digest = mcuboot_image(rng.randbytes(size), (2, counter % 256, rng.randrange(65536), counter))
    local = os.path.join(directory, f"dfu-{counter}.bin")
    with open(local, "wb") as f:
        f.write(image)
    status, out, err, seconds = run_smp(args, sim.device, ["--json", "dfu", local, "--swap-time", "0.1",
                                                           "--reconnect-timeout", "20"],
                                        deadline_for(size, link) + 30)

    def check():
        images = image_list(args, sim)
        if images is None:
            return "image list failed after the dfu"
        if not any(slot.get("hash") == digest.hex() and slot.get("active") for slot in images):
            return f"the device does not run the image with hash {digest.hex()[:16]}...: {images}"
        return None

    outcome = classify("dfu", len(image), status, out, err, seconds, check)
    os.remove(local)
    return outcome


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(repo, ".build", "debug"),
                        help="directory holding smp and smp-sim (default .build/debug)")
    parser.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated: " + ", ".join(PROFILES))
    parser.add_argument("--links", default="serial,udp", help="serial, udp or both")
    parser.add_argument("--count", type=int, default=10, help="rounds per profile and link (each: fs upload + "
                        "download, image upload, dfu)")
    parser.add_argument("--max-size-serial", type=int, default=48 * 1024)
    parser.add_argument("--max-size-udp", type=int, default=256 * 1024)
    parser.add_argument("--budget", type=float, default=1800, help="seconds for the whole run (default 1800)")
    parser.add_argument("--seed", type=int, default=None, help="seed of sizes and contents (default: random)")
    parser.add_argument("--quick", action="store_true", help="CI: 2 rounds, small sizes, 150 s budget")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every transfer")
    args = parser.parse_args()
    if args.quick:
        args.count, args.max_size_serial, args.max_size_udp = 2, 12 * 1024, 48 * 1024
        args.budget = min(args.budget, 150)
    for tool in ("smp", "smp-sim"):
        if not os.access(os.path.join(args.bin, tool), os.X_OK):
            sys.exit(f"soak: {os.path.join(args.bin, tool)} is missing: run `swift build` first or pass --bin")
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    profiles = [p for p in args.profiles.split(",") if p]
    for p in profiles:
        if p not in PROFILES:
            sys.exit(f"soak: unknown profile {p}; use {', '.join(PROFILES)}")
    links = [l for l in args.links.split(",") if l]
    print(f"soak: seed {seed}, {args.count} rounds per profile and link, budget {args.budget:.0f} s, bin {args.bin}")
    start = time.monotonic()
    end_time = start + args.budget
    rows = []
    details = []
    clean = {}
    plan = [(p, l) for p in profiles for l in links if PROFILES[p][0 if l == "serial" else 1] is not None]

    work = tempfile.mkdtemp(prefix="smp-soak.")
    try:
        for index, (profile, link) in enumerate(plan):
            faults = PROFILES[profile][0 if link == "serial" else 1]
            # An equal share of what is left for each remaining profile and link.
            share = (end_time - time.monotonic()) / (len(plan) - index)
            directory = tempfile.mkdtemp(dir=work)
            outcomes, sim_seed = soak_one(args, profile, link, faults, rng, time.monotonic() + share, directory)
            shutil.rmtree(directory, ignore_errors=True)
            done = [o for o in outcomes if o.state == "completed"]
            rate = sum(o.size for o in done) / sum(o.seconds for o in done) if done else 0
            times = [o.seconds for o in done]
            row = {
                "profile": profile, "link": link, "faults": faults if faults == "none" else f"{faults},seed={sim_seed}",
                "transfers": len(outcomes), "completed": len(done),
                "errors": sum(o.state == "error" for o in outcomes),
                "hangs": sum(o.state in ("hang", "unclear") for o in outcomes),
                "corrupt": sum(o.state == "corrupt" for o in outcomes),
                "lost_bytes": sum(o.size for o in outcomes if o.state == "corrupt"),
                "median": statistics.median(times) if times else None,
                "p99": percentile(times, 0.99) if times else None,
                "rate": rate,
            }
            clean[(profile, link)] = row
            rows.append(row)
            for o in outcomes:
                if o.state != "completed" or args.verbose:
                    details.append(f"  {profile}/{link} {o.kind} {o.size} B: {o.state} in {o.seconds:.2f} s {o.detail}")
            print(f"  {profile}/{link}: {row['completed']}/{row['transfers']} completed", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    header = (f"{'profile':<12} {'link':<6} {'transfers':>9} {'completed':>9} {'errors':>6} {'hangs':>5} "
              f"{'lost B':>6} {'median s':>8} {'p99 s':>6} {'KiB/s':>7} {'vs base':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        base = clean.get((BASELINE.get(row["profile"], "clean"), row["link"]))
        ratio = row["rate"] / base["rate"] if base and base["rate"] else None
        print(f"{row['profile']:<12} {row['link']:<6} {row['transfers']:>9} {row['completed']:>9} {row['errors']:>6} "
              f"{row['hangs']:>5} {row['lost_bytes']:>6} "
              f"{row['median'] if row['median'] is None else format(row['median'], '.2f'):>8} "
              f"{row['p99'] if row['p99'] is None else format(row['p99'], '.2f'):>6} "
              f"{row['rate'] / 1024:>7.1f} {('-' if ratio is None else format(ratio, '.2f') + 'x'):>8}")
    print()
    print("faults: " + "; ".join(f"{r['profile']}/{r['link']}: {r['faults']}" for r in rows))
    print("KiB/s: bytes of completed transfers over their whole-process time (smp start, link setup, verify);"
          " vs base: against clean on the same link (loss10-rtt10 against rtt10)")
    if details:
        print("transfers:" if args.verbose else "transfers that did not complete:")
        print("\n".join(details[:60]))
    bad = [r for r in rows if r["hangs"] or r["corrupt"]]
    clean_failed = [r for r in rows if r["profile"] == "clean" and r["completed"] != r["transfers"]]
    elapsed = time.monotonic() - start
    if bad or clean_failed:
        print(f"soak: FAILED in {elapsed:.0f} s: " + ", ".join(
            f"{r['profile']}/{r['link']} hangs {r['hangs']} corrupt {r['corrupt']}" for r in bad + clean_failed))
        return 1
    print(f"soak: PASSED in {elapsed:.0f} s (seed {seed}): no hangs, no bytes lost or corrupted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
