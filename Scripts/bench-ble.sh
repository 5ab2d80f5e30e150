#!/usr/bin/env bash
# Benchmark (not a test): a 256 KiB `smp fs upload` over the Bluetooth LE path — smp -> BlueZ D-Bus API
# -> smp-sim's GATT peripheral — with pipelining off (--pipeline 1) and on (the device's buf_count - 1),
# on a private bus with bluezoo (Scripts/ble-rig.sh), release build.
#   (a) AcquireWrite/AcquireNotify sockets (what BlueZ offers for write-without-response + notify)
#   (b) WriteValue calls and PropertiesChanged notifications (acquire=off)
# bluezoo has no radio: the figures measure the software path (framing, D-Bus, sockets, session), not a
# real link's air time. Best of BENCH_RUNS runs each, timed over the upload phase (--json transfer_seconds).
# Usage: Scripts/bench-ble.sh [--no-build]   (env: BENCH_RUNS=3, BENCH_BLE_MTU=247)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
runs="${BENCH_RUNS:-3}"
mtu="${BENCH_BLE_MTU:-247}"
size=$((256 * 1024))

bash Scripts/setup.sh
py="${SMP_TEST_VENV:-$repo/.venv}/bin/python"
source Scripts/bench-common.sh
bench_build "${1:-}"

if [[ -z "${BENCH_BLE_INNER:-}" ]]; then
    # Run the measurements with DBUS_SYSTEM_BUS_ADDRESS pointing at a fresh rig; the rig stops after.
    exec env BENCH_BLE_INNER=1 bash Scripts/ble-rig.sh run -- bash "$0" --no-build
fi

bench_workdir smp-bench-ble

start_sim() { sim_start '^ble ' 1 --ble hci1 --ble-mtu "$mtu" "$@"; }

# Best upload-phase time over $runs runs: best_upload DEVICE [smp fs upload options...]
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
    local label="$1" device="$2"
    "$smp" --device "$device" os echo warmup >/dev/null
    local depth
    depth=$("$smp" --device "$device" --json os params | "$py" -c 'import json,sys; print(json.load(sys.stdin)["buf_count"] - 1)')
    local off on
    off=$(best_upload "$device" --pipeline 1)
    on=$(best_upload "$device")
    "$py" - "$size" "$off" "$on" "$label" "$mtu" "$depth" <<'PY'
import sys
size, off, on, label, mtu, depth = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
kib = 1024
print(f"ble upload 256KiB ({label}, ATT MTU {mtu}): pipelining off {size/off/kib:.0f} KiB/s,"
      f" on (depth {depth}) {size/on/kib:.0f} KiB/s, speed-up {off/on:.2f}x")
PY
}

device="ble:00:00:5E:00:53:01"
start_sim
measure "AcquireWrite/AcquireNotify sockets" "$device"
measure "WriteValue + PropertiesChanged" "$device?acquire=off"
stop_sim
echo "(bluezoo stands in for BlueZ and has no radio timing: these are software-path figures, not air time)"
