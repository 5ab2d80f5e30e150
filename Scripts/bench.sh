#!/usr/bin/env bash
# Benchmark (not a test): `smp` against smpclient (the Python reference client) on the same simulated
# device, release build.
#   (a) 1 MiB fs upload over UDP
#   (b) 1 MiB fs upload over a pty emulating a 1,000,000 baud UART (smp-sim --baud 1000000), with the
#       link's payload ceiling for console framing
#   (b2) 64 KiB fs upload at 1,000,000 baud to smp-sim with Zephyr's default serial buffers (two 128-byte
#       receive lines, 4 x 384-byte SMP buffers): the ceiling there is the device's turnaround for one
#       frame, measured in the same run (Scripts/bench_link_ceiling.py), against smpclient sending at
#       most two 128-byte lines per frame
#   (c) `smp os echo` as a whole process, median of 20 runs over UDP
#   (d) a 1 MiB MCUboot image: `smp dfu --mode upload-only` against `smpmgr upgrade`, over UDP and over the
#       1,000,000 baud pty, with the serial ceiling for image-upload chunks; (d2) the same over UDP to a
#       device with Zephyr's UDP buffers (two per request in flight, drops when none is free)
#   (e) the real Zephyr / MCUboot builds: Scripts/bench-firmware.sh (echo, 4 KiB fs transfers, image uploads
#       through MCUboot serial recovery and on a Cortex-M0 under QEMU, against smpclient)
#   (f) the stripped sizes of the static release smp and smp-sim, and whether Foundation/ICU are linked
#   (g) scale: one `smp dfu` upgrading 1, 16 and 64 simulated boards served by one `smp-sim --count N`
#       (wall time and its ratio to one board, peak RSS and CPU of smp and smp-sim, the same boards as
#       separate smp processes, smp-sim's idle CPU): Scripts/bench-scale.sh
# Timing: both clients over the upload phase (smp's --json transfer_seconds; smpclient's upload loop);
# smp also as a whole process. Best of BENCH_RUNS runs each.
# Usage: Scripts/bench.sh [--no-build]   (env: BENCH_RUNS=3 best-of runs per upload, BENCH_BAUD=1000000,
#        BENCH_SMP=another smp binary against the same smp-sim, e.g. an older release to compare)
#        Scripts/bench.sh scale [--no-build]   (the scale part alone)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [[ "${1:-}" == scale ]]; then
    shift
    exec bash Scripts/bench-scale.sh "$@"
fi
runs="${BENCH_RUNS:-3}"
baud="${BENCH_BAUD:-1000000}"
size=$((1 << 20))

bash Scripts/setup.sh
venv="${SMP_TEST_VENV:-$repo/.venv}"
py="$venv/bin/python"
source Scripts/bench-common.sh
bench_build "${1:-}"
bench_workdir smp-bench

# Starts smp-sim with the given arguments; waits for its EXPECT ready line(s): start_sim EXPECT ARGS...
start_sim() {
    local expect="$1"
    shift
    sim_start '^(pty|udp) ' "$expect" "$@"
}

now() { date +%s.%N; }

# Best times of `smp` uploading the payload over $runs runs: "TRANSFER WALL", where TRANSFER is the
# upload phase as the tool reports it (--json transfer_seconds: parameters query and chunks until the
# device confirmed the last byte, as smpclient is timed) and WALL the whole process (start-up, connect,
# upload and the final hash check).
time_smp_upload() {
    local device="$1" best="" best_wall="" t0 t1 t wall
    for _ in $(seq "$runs"); do
        t0=$(now)
        # --restart: the device holds the same file after the first run, and smp would resume from its end.
        t=$("$smp" --device "$device" --json fs upload --restart "$work/payload.bin" /lfs1/bench-smp.bin |
            "$py" -c 'import json,sys; print(json.load(sys.stdin)["transfer_seconds"])')
        t1=$(now)
        wall=$("$py" -c "print($t1 - $t0)")
        if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if $t < $best else 1)"; then best=$t; fi
        if [[ -z "$best_wall" ]] || "$py" -c "import sys; sys.exit(0 if $wall < $best_wall else 1)"; then best_wall=$wall; fi
    done
    echo "$best $best_wall"
}

# Best upload time (seconds, upload only) of smpclient over $runs runs.
time_smpclient_upload() {
    local best="" t
    for _ in $(seq "$runs"); do
        t=$("$py" Scripts/bench_smpclient.py "$@" --size "$size" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
        if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if $t < $best else 1)"; then best=$t; fi
    done
    echo "$best"
}

rate() { "$py" -c "print('%.2f' % ($size / $1 / 1048576))"; }

# (a) UDP
start_sim 1 --udp 127.0.0.1:0
udp="$(grep -m1 '^udp ' "$work/sim.out" | cut -d' ' -f2)"
"$smp" --device "udp:$udp" os echo warmup >/dev/null
read -r ours_udp ours_udp_wall <<<"$(time_smp_upload "udp:$udp")"
theirs_udp=$(time_smpclient_upload --udp "$udp")
stop_sim
"$py" - "$size" "$ours_udp" "$theirs_udp" "$ours_udp_wall" <<'PY'
import sys
size, ours, theirs, wall = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
mib = 1 << 20
print(f"udp upload 1MiB: smp {size/ours/mib:.2f} MiB/s, smpclient {size/theirs/mib:.2f} MiB/s, ratio {theirs/ours:.1f}x  (target >= 3x)")
print(f"  (both timed over the upload phase; smp as a whole process incl. start-up and the final hash check:"
      f" {wall*1000:.0f} ms = {size/wall/mib:.2f} MiB/s, {theirs/wall:.1f}x smpclient's upload phase)")
PY

# (b) serial over a pty at $baud
start_sim 1 --pty-link "$work/tty" --baud "$baud"
"$smp" --device "serial:$work/tty" os echo warmup >/dev/null
buf_size=$("$smp" --device "serial:$work/tty" --json os params | "$py" -c 'import json,sys; print(json.load(sys.stdin)["buf_size"])')
read -r ours_serial ours_serial_wall <<<"$(time_smp_upload "serial:$work/tty")"
theirs_serial=$(time_smpclient_upload --serial "$work/tty" --baud "$baud")
stop_sim
"$py" - "$size" "$ours_serial" "$theirs_serial" "$baud" "$buf_size" <<'PY'
import math, sys
import cbor2
size, ours, theirs, baud, buf_size = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
mib = 1 << 20
# A full-size fs upload request (not the first: no "len"), at an offset past 64 KiB, as the device's
# buffer allows it: SMP packet P <= buf_size - 4 (the 2-byte length and 2-byte CRC share the buffer).
packet_limit = buf_size - 4
name = "/lfs1/bench-smp.bin"
def packet(n):
    return 8 + len(cbor2.dumps({"off": 524288, "data": b"\0" * n, "name": name}))
data = packet_limit
while packet(data) > packet_limit:
    data -= 1
p = packet(data)
body = 2 + p + 2                                  # len_be16 | P | crc16
b64 = 4 * math.ceil(body / 3)                      # Base64, padded
lines = math.ceil(b64 / 124)                       # <= 124 Base64 chars per line
wire = b64 + 3 * lines                             # 2 marker bytes + '\n' per line
fraction = data / wire
ceiling = baud / 10 * fraction                     # 8N1: 10 bits per byte
ours_rate, theirs_rate = size / ours, size / theirs
print(f"serial ceiling: {baud} baud / 10 = {baud/10:.0f} B/s x payload fraction {data}/{wire} = {fraction:.4f}"
      f" -> {ceiling/mib:.3f} MiB/s")
print(f"  (request: {data} data bytes in P = {p} B (header 8 + CBOR {p - 8 - data} + data); body = 2+P+2 = {body};"
      f" Base64 4*ceil(body/3) = {b64}; {lines} lines x 3 framing bytes; wire = {wire} B; responses not counted)")
print(f"serial upload 1MiB @ {baud} baud: smp {ours_rate/mib:.3f} MiB/s, smpclient {theirs_rate/mib:.3f} MiB/s,"
      f" ratio {theirs/ours:.2f}x; smp at {100*ours_rate/ceiling:.1f}% of ceiling (target >= 90%)")
PY

# (b2) serial at $baud to Zephyr's default buffers: two 127-byte lines per frame (marker and newline
# included), one frame at a time. The ceiling: the data one such upload frame carries over the device's
# median turnaround for a frame of that size whose answer is short (a padded `os params` read).
small=$((64 << 10))
head -c "$small" /dev/urandom >"$work/small.bin"
# (sim_start gives the benchmarks large buffers without line limits: Zephyr's defaults again here.) A port
# of its own: smp remembers each port's buffers and line limits, and this device is not row (b)'s; on
# row (b)'s port the first chunk would first test what smp remembered there (2 s, then `os params`).
tty="$work/tty-zephyr"
start_sim 1 --pty-link "$tty" --baud "$baud" --buf-size 384 --rx-lines 2
frame=182  # the largest SMP packet in two 127-byte console lines
turnaround=$("$py" Scripts/bench_link_ceiling.py "$tty" "$frame" --request params --count 50 |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["median_seconds"])')
zephyr_smp=$("$smp" --device "serial:$tty" --json fs upload "$work/small.bin" /lfs1/bench-small.bin |
    "$py" -c 'import json,sys; print(json.load(sys.stdin)["transfer_seconds"])')
zephyr_theirs=$("$py" Scripts/bench_firmware_smpclient.py --serial "$tty" --frames lines:128:2 --timeout 10 \
    --fs-upload 1 --file "$work/small.bin" --dest /lfs1/bench-small-py.bin |
    "$py" -c 'import json,sys
for line in sys.stdin:
    o = json.loads(line)
    if o["op"] == "fs-upload": print(o["seconds"])')
stop_sim
"$py" - "$small" "$frame" "$turnaround" "$zephyr_smp" "$zephyr_theirs" "$baud" <<'PY'
import sys
import cbor2
size, frame, turnaround, ours, theirs, baud = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
name = "/lfs1/bench-small.bin"
def packet(n):  # a chunk past the first (no "len"), at an offset of five CBOR bytes
    return 8 + len(cbor2.dumps({"name": name, "off": 65536, "data": b"\0" * n}))
data = frame
while packet(data) > frame:
    data -= 1
ceiling = data / turnaround
ours_rate, theirs_rate = size / ours, size / theirs
print(f"serial ceiling, Zephyr's default buffers @ {baud} baud: {data} data bytes per {frame}-byte frame /"
      f" {turnaround*1000:.1f} ms device turnaround = {ceiling/1024:.2f} KiB/s")
print(f"serial upload 64KiB to Zephyr's default buffers: smp {ours_rate/1024:.2f} KiB/s = {100*ours_rate/ceiling:.1f}% of"
      f" the ceiling (target >= 90%), smpclient (two 128-byte lines per frame) {theirs_rate/1024:.2f} KiB/s; ratio {theirs/ours:.2f}x")
PY

# (c) smp os echo as a whole process, median of 20 runs over UDP
start_sim 1 --udp 127.0.0.1:0
udp="$(grep -m1 '^udp ' "$work/sim.out" | cut -d' ' -f2)"
times=()
for _ in $(seq 20); do
    t0=$(now)
    "$smp" --device "udp:$udp" os echo hi >/dev/null
    t1=$(now)
    times+=("$("$py" -c "print($t1 - $t0)")")
done
stop_sim
"$py" - "${times[@]}" <<'PY'
import statistics, sys
ms = sorted(float(t) * 1000 for t in sys.argv[1:])
print(f"echo (whole smp process, UDP): median {statistics.median(ms):.1f} ms over {len(ms)} runs"
      f" (min {ms[0]:.1f}, max {ms[-1]:.1f}; target << 100 ms)")
PY

# (f) size: the static release binaries as built and stripped (a stripped copy, as a package would ship
# them), and whether the full Foundation and ICU are linked in (ICU's collator symbol) or only
# FoundationEssentials
for name in smp smp-sim; do
    bin="$smp"
    [[ "$name" == smp-sim ]] && bin="$sim"
    strip -o "$work/$name.stripped" "$bin"
    built=$(stat -c %s "$bin")
    stripped=$(stat -c %s "$work/$name.stripped")
    icu=no
    # grep reads all of nm's output (no -q): under pipefail an early exit would fail the pipeline.
    if nm "$bin" 2>/dev/null | grep 'ucol_open' >/dev/null; then icu=yes; fi
    "$py" - "$name" "$built" "$stripped" "$icu" <<'PY'
import sys
name, built, stripped, icu = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print(f"size {name}: {stripped / 1e6:.1f} MB stripped ({stripped} B; {built / 1e6:.1f} MB as built),"
      f" Foundation/ICU linked: {icu} (target <= 20 MB stripped)")
PY
done

# (d) firmware upgrade of a 1 MiB MCUboot image: `smp dfu --mode upload-only` against `smpmgr upgrade`
# (smpmgr 0.19.1: upload, mark for test, reset) on the same smp-sim, over UDP and over the emulated
# 1,000,000 baud pty. Both as whole processes (best of $runs; smpmgr once on serial), smp also over its
# upload phase (--json upload_seconds: first chunk until the device confirmed the last byte).
imgtool="$venv/bin/imgtool"
slot=$((2 << 20))
head -c $((size - 0x200 - 48)) /dev/urandom >"$work/fw-body.bin"
"$imgtool" sign --pad-header -H 0x200 -S "$slot" -v 1.2.3 "$work/fw-body.bin" "$work/fw.bin" >/dev/null
fw_size=$(stat -c %s "$work/fw.bin")

# Runs smpmgr with its UDP port pointed at $1 (smpmgr always uses 1337 otherwise); writes the seconds
# from after Python's imports to its exit (connect, upload, test, reset) to $work/smpmgr.seconds.
smpmgr_run() {
    local port="$1"
    shift
    "$py" -c '
import atexit, sys, time
from smpclient.transport.udp import SMPUDPTransport
SMPUDPTransport.connect.__defaults__ = (int(sys.argv.pop(1)),)
from smpmgr.main import app
out = sys.argv.pop(1)
t0 = time.monotonic()
atexit.register(lambda: open(out, "w").write(str(time.monotonic() - t0)))
sys.argv[0] = "smpmgr"
sys.exit(app())' "$port" "$work/smpmgr.seconds" "$@"
}

# Best "UPLOAD WALL" seconds of `smp dfu --mode upload-only` over $runs runs (a fresh device each run).
time_smp_dfu() {
    local best="" best_wall="" t0 t1 t wall device
    for _ in $(seq "$runs"); do
        start_sim 1 "$@" --slot-size "$slot"
        device="$(sim_device)"
        t0=$(now)
        t=$("$smp" --device "$device" --json dfu "$work/fw.bin" --mode upload-only |
            "$py" -c 'import json,sys
for line in sys.stdin:
    o = json.loads(line)
    if o.get("event") == "result": print(o["upload_seconds"])')
        t1=$(now)
        stop_sim
        wall=$("$py" -c "print($t1 - $t0)")
        if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if $t < $best else 1)"; then best=$t; fi
        if [[ -z "$best_wall" ]] || "$py" -c "import sys; sys.exit(0 if $wall < $best_wall else 1)"; then best_wall=$wall; fi
    done
    echo "$best $best_wall"
}

# Best "WALL AFTER_IMPORTS" seconds of `smpmgr upgrade` over $1 runs (a fresh device each run).
time_smpmgr_upgrade() {
    local n="$1" best="" best_inner="" t0 t1 wall inner
    shift
    for _ in $(seq "$n"); do
        start_sim 1 "$@" --slot-size "$slot"
        t0=$(now)
        if [[ "$1" == "--udp" ]]; then
            udp="$(grep -m1 '^udp ' "$work/sim.out" | cut -d' ' -f2)"
            smpmgr_run "${udp##*:}" --ip 127.0.0.1 --mtu 1472 --timeout 5 upgrade "$work/fw.bin" >/dev/null
        else
            smpmgr_run 1337 --port "$work/tty" --baudrate "$baud" --timeout 5 upgrade "$work/fw.bin" >/dev/null
        fi
        t1=$(now)
        stop_sim
        wall=$("$py" -c "print($t1 - $t0)")
        inner=$(cat "$work/smpmgr.seconds")
        if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if $wall < $best else 1)"; then best=$wall; fi
        if [[ -z "$best_inner" ]] || "$py" -c "import sys; sys.exit(0 if $inner < $best_inner else 1)"; then best_inner=$inner; fi
    done
    echo "$best $best_inner"
}

sim_device() {
    if grep -q '^udp ' "$work/sim.out"; then
        echo "udp:$(grep -m1 '^udp ' "$work/sim.out" | cut -d' ' -f2)"
    else
        echo "serial:$work/tty"
    fi
}

read -r dfu_udp dfu_udp_wall <<<"$(time_smp_dfu --udp 127.0.0.1:0)"
read -r mgr_udp mgr_udp_inner <<<"$(time_smpmgr_upgrade "$runs" --udp 127.0.0.1:0)"
read -r dfu_serial dfu_serial_wall <<<"$(time_smp_dfu --pty-link "$work/tty" --baud "$baud")"
read -r mgr_serial mgr_serial_inner <<<"$(time_smpmgr_upgrade 1 --pty-link "$work/tty" --baud "$baud")"
"$py" - "$fw_size" "$dfu_udp" "$dfu_udp_wall" "$mgr_udp" "$dfu_serial" "$dfu_serial_wall" "$mgr_serial" "$baud" "$mgr_udp_inner" "$buf_size" <<'PY'
import math, sys
import cbor2
size = int(sys.argv[1])
dfu_udp, dfu_udp_wall, mgr_udp, dfu_serial, dfu_serial_wall, mgr_serial = map(float, sys.argv[2:8])
baud, mgr_inner, buf_size = int(sys.argv[8]), float(sys.argv[9]), int(sys.argv[10])
mib = 1 << 20
print(f"dfu udp 1MiB image: smp dfu whole process {dfu_udp_wall:.3f} s = {size/dfu_udp_wall/mib:.2f} MiB/s (upload phase"
      f" {dfu_udp:.3f} s = {size/dfu_udp/mib:.2f} MiB/s); smpmgr upgrade whole process {mgr_udp:.3f} s, after its Python"
      f" imports {mgr_inner:.3f} s = {size/mgr_inner/mib:.2f} MiB/s; ratio {mgr_udp/dfu_udp_wall:.1f}x whole process,"
      f" {mgr_inner/dfu_udp_wall:.1f}x against smpmgr without its start-up  (target >= 3x)")
# Ceiling: image upload chunks {"off": N >= 65536, "data": ...} filling the device buffer (buf_size less
# the serial link's 2-byte length and 2-byte CRC), console framing as in (b).
packet_limit = buf_size - 4
def packet(n):
    return 8 + len(cbor2.dumps({"off": 524288, "data": b"\0" * n}))
data = packet_limit
while packet(data) > packet_limit:
    data -= 1
p = packet(data)
body = 2 + p + 2
b64 = 4 * math.ceil(body / 3)
lines = math.ceil(b64 / 124)
wire = b64 + 3 * lines
ceiling = baud / 10 * data / wire
print(f"dfu serial ceiling: {baud} baud / 10 x image-chunk payload fraction {data}/{wire} = {data/wire:.4f} -> {ceiling/mib:.3f} MiB/s")
print(f"dfu serial 1MiB image @ {baud} baud: smp dfu upload phase {size/dfu_serial/mib:.3f} MiB/s ({dfu_serial:.2f} s) ="
      f" {100*size/dfu_serial/ceiling:.1f}% of ceiling (target >= 90%); whole process {dfu_serial_wall:.2f} s;"
      f" smpmgr upgrade {mgr_serial:.2f} s whole process, ratio {mgr_serial/dfu_serial_wall:.2f}x")
PY

# (d2) the same upgrade over UDP to Zephyr's UDP buffers (smp-sim --udp-queue zephyr, 4 x 2048 B: a request
# holds two buffers until it is answered on the device's 10 ms tick, and a datagram that finds none is
# dropped): `smp dfu` keeps buf_count / 2 = 2 chunks in flight, what such a device takes (buf_count - 1
# loses every third chunk and waits for its resend); smpmgr sends one at a time. Once each.
read -r dfu_zephyr dfu_zephyr_wall <<<"$(runs=1 time_smp_dfu --udp 127.0.0.1:0 --udp-queue zephyr)"
read -r mgr_zephyr mgr_zephyr_inner <<<"$(time_smpmgr_upgrade 1 --udp 127.0.0.1:0 --udp-queue zephyr)"
"$py" - "$fw_size" "$dfu_zephyr" "$dfu_zephyr_wall" "$mgr_zephyr" "$mgr_zephyr_inner" <<'PY'
import sys
size = int(sys.argv[1])
ours, wall, theirs, theirs_inner = map(float, sys.argv[2:6])
mib = 1 << 20
print(f"dfu udp 1MiB image to Zephyr's UDP buffers (4 x 2048 B, 10 ms tick): smp dfu upload phase {ours:.2f} s ="
      f" {size/ours/mib:.2f} MiB/s, whole process {wall:.2f} s; smpmgr upgrade {theirs:.2f} s whole process,"
      f" {theirs_inner:.2f} s after its imports; ratio {theirs_inner/wall:.2f}x")
PY

# (g) scale: 1, 16 and 64 simulated boards upgraded by one `smp dfu` (Scripts/bench-scale.sh)
bash Scripts/bench-scale.sh --no-build

# (e) the real Zephyr / MCUboot builds (../shared/firmware or $SMP_FIRMWARE_DIR): smp against smpclient
# on echo, 4 KiB fs transfers and image uploads; rows print FAILED when a client fails (bounded runs).
if [[ -d "${SMP_FIRMWARE_DIR:-$repo/../shared/firmware}" ]]; then
    bash Scripts/bench-firmware.sh --no-build
else
    echo "real firmware: skipped (no ${SMP_FIRMWARE_DIR:-$repo/../shared/firmware}; set SMP_FIRMWARE_DIR)"
fi
