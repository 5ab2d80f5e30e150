#!/usr/bin/env bash
# Benchmark (not a test): `smp` against smpclient 7.3.0 (over bleak) on the same Bluetooth LE link, in
# the same run, release build.
#
# Default: REAL BlueZ 5.66. One QEMU guest (Scripts/ble-vm.sh: the kernel's Bluetooth, two linked virtual
# LE controllers, bluetoothd) per run of this script; `smp-sim --ble hci1` is the peripheral, built like
# Zephyr's smp_svr with its Bluetooth overlay (2475-byte SMP buffers, 4 of them, ATT MTU 498), and both
# clients run on hci0. Rows, each the median of BENCH_RUNS runs per client:
#   echo round trip              one `os echo` after the link is up
#   fs upload 64 KiB, fs download 64 KiB (compared byte for byte), image upload 100 kB (an imgtool image)
#   link up                      scan, connect, GATT discovery and subscription until the first request
#   and the stack's own echo round trip (Scripts/bench_ble_floor.py: a fixed SMP echo written to BlueZ's
#   AcquireWrite socket, read from AcquireNotify; no SMP client), the floor under both clients' echo
# Both clients are timed from the link being up to the last answer: smp's --json `transfer_seconds`
# (fs) and `seconds` (image upload, which includes smp's `os params`), and for the echo the round trip
# smp logs with -v; smpclient in-process with time.perf_counter() around each call. Link up: what smp
# logs with -v (`BLE link ... up in N ms`), smpclient's connect(). Whole `smp` commands (process start to
# exit, connection included) are printed beside them.
# The guest's link has no air time (btvirt passes packets between controllers in memory) and the guest
# runs under TCG emulation: the figures compare the two clients on the same stack and link, they are not
# a radio's rates. The last lines print the ceiling the same MTU would give on a radio (LE 1M PHY,
# 251-byte LL packets) and the client controller's LE ACL buffers.
#
# Usage: Scripts/bench-ble.sh [--no-build] [--mtu N] [--channels 1|3] [--bluezoo]
#   --mtu N        ATT MTU both bluetoothd ends offer (default 498; smpclient fails above 513, see below)
#   --channels N   bluetoothd's [GATT] Channels: 1 plain ATT (default, as most Zephyr devices), 3 EATT
#   --bluezoo      the former software-path bench instead: a 256 KiB `smp fs upload` through bluezoo (no
#                  BlueZ, no kernel, no radio), pipelining off and on
# Env: BENCH_RUNS (default 3).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
runs="${BENCH_RUNS:-3}"
mtu=498 channels=1 bluezoo=0 build=""
while (($#)); do
    case "$1" in
        --no-build) build=--no-build ;;
        --mtu) mtu="$2"; shift ;;
        --channels) channels="$2"; shift ;;
        --bluezoo) bluezoo=1 ;;
        *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64 ;;
    esac
    shift
done

if [[ -z "${BENCH_BLE_INNER:-}" ]]; then
    bash Scripts/setup.sh
fi
py="${SMP_TEST_VENV:-$repo/.venv}/bin/python"
source Scripts/bench-common.sh
# In the guest the binaries are copies (BENCH_BLE_BIN), and SwiftPM is not started: under emulation its
# start alone takes minutes.
[[ -n "${BENCH_BLE_BIN:-}" ]] || bench_build "$build"

# ---------------------------------------------------------------------------------------------------
# bluezoo: the software path only.
# ---------------------------------------------------------------------------------------------------
if ((bluezoo)); then
    size=$((256 * 1024))
    mtu=${BENCH_BLE_MTU:-247}
    if [[ -z "${BENCH_BLE_INNER:-}" ]]; then
        exec env BENCH_BLE_INNER=1 bash Scripts/ble-rig.sh run -- bash "$0" --no-build --bluezoo
    fi
    bench_workdir smp-bench-ble
    best_upload() {
        local device="$1" best="" t
        shift
        for _ in $(seq "$runs"); do
            t=$("$smp" --device "$device" --json fs upload "$@" "$work/payload.bin" /lfs1/bench-ble.bin |
                "$py" -c 'import json,sys; print(json.load(sys.stdin)["transfer_seconds"])')
            if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if $t < $best else 1)"; then best=$t; fi
        done
        echo "$best"
    }
    measure() {
        local label="$1" device="$2" depth off on
        "$smp" --device "$device" os echo warmup >/dev/null
        depth=$("$smp" --device "$device" --json os params | "$py" -c 'import json,sys; print(json.load(sys.stdin)["buf_count"] - 1)')
        off=$(best_upload "$device" --pipeline 1)
        on=$(best_upload "$device")
        "$py" - "$size" "$off" "$on" "$label" "$mtu" "$depth" <<'PY'
import sys
size, off, on, label, mtu, depth = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
print(f"ble upload 256KiB ({label}, ATT MTU {mtu}): pipelining off {size/off/1024:.0f} KiB/s,"
      f" on (depth {depth}) {size/on/1024:.0f} KiB/s, speed-up {off/on:.2f}x")
PY
    }
    sim_start '^ble ' 1 --ble hci1 --ble-mtu "$mtu"
    measure "AcquireWrite/AcquireNotify sockets" "ble:00:00:5E:00:53:01"
    measure "WriteValue + PropertiesChanged" "ble:00:00:5E:00:53:01?acquire=off"
    stop_sim
    echo "(bluezoo stands in for BlueZ and has no radio timing: these are software-path figures, not air time)"
    exit 0
fi

# ---------------------------------------------------------------------------------------------------
# Real BlueZ: the host boots the guest, the guest measures.
# ---------------------------------------------------------------------------------------------------
if [[ -z "${BENCH_BLE_INNER:-}" ]]; then
    # The guest runs copies, so that a build while it runs changes nothing under it.
    bin="$(mktemp -d "${TMPDIR:-/tmp}/smp-bench-ble-bin.XXXXXX")"
    trap 'rm -rf "$bin"' EXIT
    cp "$smp" "$bin/smp"  # BENCH_SMP may name another smp under any file name
    cp "$sim" "$bin/smp-sim"
    BENCH_BLE_INNER=1 BENCH_BLE_BIN="$bin" BENCH_RUNS="$runs" \
        bash Scripts/ble-vm.sh -q --gatt-channels "$channels" --timeout 3000 -- \
        bash "$0" --no-build --mtu "$mtu" --channels "$channels"
    exit
fi

smp="$BENCH_BLE_BIN/smp" sim="$BENCH_BLE_BIN/smp-sim"
size=$((64 * 1024))
bench_workdir smp-bench-ble
$BLE_VM_RESTART_BLUETOOTHD "channels=$channels" "mtu=$mtu" >/dev/null
address="$SMP_BLE_DEVICE_ADDRESS"
device="ble:$address?adapter=$SMP_BLE_CLIENT_ADAPTER"

# A 100 kB image for both clients: random bytes signed by imgtool as MCUboot expects them.
head -c 100000 /dev/urandom >"$work/body.bin"
"${SMP_TEST_VENV:-$repo/.venv}/bin/imgtool" sign --header-size 0x200 --pad-header --align 4 --version 1.0.0 \
    --slot-size 0x40000 "$work/body.bin" "$work/image.bin" >/dev/null

# The peripheral: smp_svr with the Bluetooth overlay; a file system big enough for both clients' files.
sim_start_seconds=120 sim_start '^ble ' 1 --ble "$SMP_BLE_DEVICE_ADAPTER" --ble-mtu "$mtu" --buf-size 2475 --buf-count 4 --fs-blocks 0
# A discovery of the rig's own for the whole run, so that BlueZ keeps the advertising device known: on
# this rig a short scan misses an advertiser now and then (Scripts/test-ble-bluez.sh does the same).
# (Its stderr is dropped: stopping it would print "Terminated".)
( { echo "select $SMP_BLE_CLIENT_ADDRESS"; echo "scan le"; sleep 7200; } | bluetoothctl >/dev/null 2>&1 ) 2>/dev/null &
scanner=$!
trap 'pkill -P "$scanner" 2>/dev/null; stop_sim; rm -rf "$work"' EXIT
export XDG_CACHE_HOME="$work/cache"

results="$work/results.txt"  # lines: CLIENT ROW SECONDS
record() { echo "$1 $2 $3" >>"$results"; }
json_field() { "$py" -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }
now() { date +%s.%N; }
elapsed() { "$py" -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$1" "$(now)"; }

# Waits until bluetoothd no longer holds a connection to the device (after a client exits it may keep
# one for a moment): each measurement starts from an advertising device.
settle() {
    for _ in $(seq 100); do
        bluetoothctl info "$address" 2>/dev/null | grep -q "Connected: yes" || return 0
        sleep 0.1
    done
}

smp_runs() {
    local out t0
    settle
    # Echo: the round trip smp logs for the echo request (-v).
    t0=$(now)
    out="$("$smp" --device "$device" -v os echo hi 2>&1)" || { echo "smp echo failed: $out" >&2; return 1; }
    record smp whole-echo "$(elapsed "$t0")"
    record smp echo "$(grep -E '<- .*os\(0\) cmd 0 .* after ' <<<"$out" | tail -1 | sed -E 's/.* after ([0-9.]+) ms.*/\1/' |
        "$py" -c 'import sys; print(float(sys.stdin.read()) / 1000)')"
    record smp link-up "$(grep -E 'BLE link .* up in [0-9]+ ms' <<<"$out" | sed -E 's/.* up in ([0-9]+) ms.*/\1/' |
        "$py" -c 'import sys; print(float(sys.stdin.read()) / 1000)')"
    settle
    t0=$(now)
    # A new name each run: a file the device holds already would be resumed, not sent.
    out="$("$smp" --device "$device" --json fs upload "$work/payload.bin" "/lfs1/bench-smp-$run.bin")" ||
        { echo "smp fs upload failed: $out" >&2; return 1; }
    record smp whole-fs-upload "$(elapsed "$t0")"
    record smp fs-upload "$(json_field transfer_seconds <<<"$out")"
    settle
    rm -f "$work/back-smp.bin"
    out="$("$smp" --device "$device" --json fs download "/lfs1/bench-smp-$run.bin" "$work/back-smp.bin")" ||
        { echo "smp fs download failed: $out" >&2; return 1; }
    cmp -s "$work/payload.bin" "$work/back-smp.bin" || { echo "smp fs download: the file differs" >&2; return 1; }
    record smp fs-download "$(json_field transfer_seconds <<<"$out")"
    settle
    out="$("$smp" --device "$device" --json image upload "$work/image.bin")" || { echo "smp image upload failed: $out" >&2; return 1; }
    record smp image-upload "$(json_field seconds <<<"$out")"
    # The next run uploads the same image again: erase the slot so that it is a whole upload.
    settle
    "$smp" --device "$device" image erase >/dev/null
}

smpclient_runs() {
    local out
    settle
    out="$("$py" Scripts/bench_firmware_smpclient.py --ble "$address" --timeout 10 --echo 1 --fs-upload "$size" \
        --file "$work/payload.bin" --dest "/lfs1/bench-smpclient-$run.bin" --fs-download --image "$work/image.bin" 2>"$work/smpclient.err")" ||
        { echo "smpclient failed: $(tail -3 "$work/smpclient.err")" >&2; return 1; }
    while read -r line; do
        "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); print("smpclient", {"connect": "link-up"}.get(d["op"], d["op"]), d["seconds"])' "$line" >>"$results"
    done <<<"$out"
    settle
    "$smp" --device "$device" image erase >/dev/null
}

# The stack's own echo round trip (Scripts/bench_ble_floor.py: BlueZ's sockets, no SMP client): the
# floor under both clients' echo.
floor_runs() {
    local out
    settle
    out="$("$py" Scripts/bench_ble_floor.py --ble "$address" --adapter "$SMP_BLE_CLIENT_ADAPTER" --count 5 2>"$work/floor.err")" ||
        { echo "floor probe failed: $(tail -3 "$work/floor.err")" >&2; return 1; }
    record floor echo "$(json_field seconds <<<"$out")"
}

failed=0
for run in $(seq "$runs"); do
    echo "run $run of $runs..." >&2
    smp_runs || failed=1
    smpclient_runs || failed=1
    floor_runs || failed=1
done

# The client controller's LE ACL buffers (HCI LE Read Buffer Size: status, length, count).
le_buffers=""
if reply="$(hcitool -i "$SMP_BLE_CLIENT_ADAPTER" cmd 0x08 0x0002 2>/dev/null)"; then
    read -r -a bytes <<<"$(tail -1 <<<"$reply")"
    if [[ "${bytes[3]:-}" == "00" ]]; then
        le_buffers="$((16#${bytes[5]}${bytes[4]})) B x $((16#${bytes[6]}))"
    fi
fi

"$py" - "$results" "$mtu" "$channels" "$size" "$(stat -c %s "$work/image.bin")" "$le_buffers" "$failed" <<'PY'
import collections, statistics, sys
path, mtu, channels, size, image, le_buffers, failed = sys.argv[1:8]
mtu, size, image = int(mtu), int(size), int(image)
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(path):
    client, row, seconds = line.split()
    rows[row][client].append(float(seconds))
print(f"\nBluetooth LE on real BlueZ 5.66 (QEMU guest, two virtual controllers), ATT MTU {mtu}, "
      f"{'plain ATT' if channels == '1' else f'EATT ({channels} channels)'}; smp-sim as smp_svr with its Bluetooth overlay")
print(f"{'row':<26} {'smp':>10} {'smpclient':>10} {'ratio':>7}")
volume = {"fs-upload": size, "fs-download": size, "image-upload": image}
worst = None
for row, label in [("echo", "echo round trip"), ("fs-upload", "fs upload 64 KiB"), ("fs-download", "fs download 64 KiB"),
                   ("image-upload", f"image upload {image // 1000} kB"), ("link-up", "link up (scan..subscribe)")]:
    ours, theirs = rows[row].get("smp"), rows[row].get("smpclient")
    def show(values):
        if not values:
            return "FAILED"
        median = statistics.median(values)
        if row in volume:
            return f"{volume[row] / median / 1024:.1f} KiB/s"
        return f"{median * 1000:.0f} ms"
    ratio = ""
    if ours and theirs:
        r = statistics.median(theirs) / statistics.median(ours)
        ratio = f"{r:.2f}x"
        if row != "link-up":
            worst = r if worst is None else min(worst, r)
    print(f"{label:<26} {show(ours):>10} {show(theirs):>10} {ratio:>7}")
floor = rows["echo"].get("floor")
if floor:
    f = statistics.median(floor)
    ours, theirs = rows["echo"].get("smp"), rows["echo"].get("smpclient")
    line = f"the stack's echo floor (BlueZ's sockets, no SMP client): {f * 1000:.1f} ms"
    if ours:
        line += f"; smp spends {max(0.0, statistics.median(ours) - f) * 1000:.1f} ms above it"
    if theirs:
        line += f", smpclient {max(0.0, statistics.median(theirs) - f) * 1000:.1f} ms"
        line += f"; 1.5x smpclient would need {statistics.median(theirs) / 1.5 * 1000:.1f} ms"
    print(line)
for row, what in [("whole-echo", "os echo"), ("whole-fs-upload", "fs upload")]:
    whole = rows[row].get("smp")
    if whole:
        print(f"(a whole `smp {what}` command, process start to exit, connection included: {statistics.median(whole):.2f} s)")
print(f"ratio: smpclient's time / smp's (above 1: smp is faster); worst transfer row {worst:.2f}x" if worst else "")
# A radio's ceiling for this MTU: LE 1M PHY, 251-byte LL payloads (data length extension), each packet
# 2120 us on air + 150 us IFS + an 80 us empty acknowledgement + 150 us IFS; ATT notifications or writes
# without response of MTU - 3 bytes. Packets per connection event are bounded by the controller's ACL
# buffers when the host keeps them full.
per_packet_us = 2120 + 150 + 80 + 150
att_payload = mtu - 3
ll_packets_per_pdu = -(-(mtu + 4) // 251)  # L2CAP header 4 bytes
per_pdu_us = ll_packets_per_pdu * per_packet_us
print(f"a radio's ceiling for ATT MTU {mtu} (LE 1M PHY, 251-byte LL packets, no loss): "
      f"{att_payload} B per {ll_packets_per_pdu} LL packet(s) of {per_pdu_us} us = {att_payload / per_pdu_us * 1e6 / 1024:.0f} KiB/s"
      + (f"; the client controller's LE ACL buffers: {le_buffers}" if le_buffers else ""))
print("(the guest's link has no air time: these rates compare the clients on one stack, they are not a radio's)")
sys.exit(1 if failed == "1" else 0)
PY
