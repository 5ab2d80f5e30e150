#!/usr/bin/env bash
# Benchmark (not a test): one `smp dfu` upgrading 1, 16 and 64 simulated boards at once, served by one
# `smp-sim --count N`, release build. Also the last part of Scripts/bench.sh (`bash Scripts/bench.sh scale`
# runs it alone).
# The boards behave like the real builds, so that the times are honest:
#   - the UDP link of the shared native_sim_udp build (smp-sim's Zephyr UDP receive model with its
#     --buf-size 2048 --buf-count 2): a request holds two SMP buffers until it is answered on the device's
#     10 ms tick, and a datagram that finds none is dropped (one chunk per board in flight, one answer per
#     tick at most, as the real build measures); unlike that build (`--like native_sim_udp`, which has no
#     MCUboot and no image group) the boards have MCUboot's image group, as a networked board with MCUboot;
#   - MCUboot swap-using-scratch: after the reset the board stays silent for the 250 ms reset delay, the
#     swap (--swap-time, default 2 s: a real MCUboot swap of a 160 KiB image takes seconds) and a 50 ms boot;
#   - a 160 KiB imgtool-signed image (version 1.2.3), smp dfu in its default mode (confirm-only: upload,
#     confirm, reset, wait for the swap, reconnect, check the running image), --swap-time the same.
# Rows, per board count (best of BENCH_RUNS, a fresh smp-sim each run):
#   - one `smp dfu` for all boards: wall time of the whole process, ratio to one board (same run; target
#     <= 1.5x at 64), smp's peak RSS (/usr/bin/time "Maximum resident set size") and CPU time;
#   - smp-sim: peak RSS, RSS per device, CPU time;
#   - the same boards as N separate `smp dfu` processes (the baseline a script without the fleet CLI has).
# Afterwards every board is asked (`smp image list`) and must run 1.2.3, confirmed.
# Then smp-sim's idle CPU with 64 devices (no timers run while no request is pending).
# Usage: Scripts/bench-scale.sh [--no-build]
#   env: BENCH_RUNS=3, BENCH_SCALE_COUNTS="1 16 64", BENCH_SCALE_SWAP=2 (seconds),
#        BENCH_SCALE_IMAGE=163840 (bytes), BENCH_SCALE_IDLE=5 (seconds),
#        BENCH_SCALE_SEPARATE_MAX=64 (the most boards run as separate smp processes),
#        BENCH_SCALE_LINK=udp (or pty: serial boards with Zephyr's default buffers on ptys; use a smaller
#        BENCH_SCALE_IMAGE, e.g. 24576: such a board takes about 6 KiB/s)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
runs="${BENCH_RUNS:-3}"
counts=(${BENCH_SCALE_COUNTS:-1 16 64})
swap="${BENCH_SCALE_SWAP:-2}"
image_size="${BENCH_SCALE_IMAGE:-163840}"
idle_seconds="${BENCH_SCALE_IDLE:-5}"
separate_max="${BENCH_SCALE_SEPARATE_MAX:-64}"
link="${BENCH_SCALE_LINK:-udp}"
[[ "$link" == udp || "$link" == pty ]] || { echo "bench-scale: BENCH_SCALE_LINK must be udp or pty" >&2; exit 64; }
size=4096  # bench_workdir's payload (unused here)

bash Scripts/setup.sh
venv="${SMP_TEST_VENV:-$repo/.venv}"
py="$venv/bin/python"
source Scripts/bench-common.sh
bench_build "${1:-}"
bench_workdir smp-bench-scale
# smp keeps each device's round trip in $XDG_CACHE_HOME/smp: the benchmark's hundreds of one-off ports stay
# out of the user's cache, and every run starts without one.
export XDG_CACHE_HOME="$work/cache"
[[ "${counts[0]}" == 1 ]] || { echo "bench-scale: BENCH_SCALE_COUNTS must start with 1 (the ratios are against one board)" >&2; exit 64; }
command -v /usr/bin/time >/dev/null || { echo "bench-scale: needs /usr/bin/time (Debian package time; Scripts/setup.sh installs it)" >&2; exit 1; }

# The image: imgtool-signed, version 1.2.3, $image_size bytes in all.
head -c $((image_size - 0x200 - 48)) /dev/urandom >"$work/fw-body.bin"
"$venv/bin/imgtool" sign --pad-header -H 0x200 -S $((0x76000)) -v 1.2.3 "$work/fw-body.bin" "$work/fw.bin" >/dev/null
fw_size=$(stat -c %s "$work/fw.bin")

# Whether this smp upgrades several boards in one process (the fleet CLI: repeatable --device, --max-parallel).
fleet=0
# (grep reads all of the help, no -q: under pipefail an early exit would fail the pipeline.)
if "$smp" dfu --help 2>&1 | grep -- '--max-parallel' >/dev/null; then fleet=1; fi

clock_ticks=$(getconf CLK_TCK)
# CPU seconds (user + system) a process has used so far: cpu_seconds PID
cpu_seconds() { awk -v hz="$clock_ticks" '{ print ($14 + $15) / hz }' "/proc/$1/stat"; }
# A /proc/PID/status field in kB: status_kb PID VmHWM
status_kb() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/status"; }

# Starts `smp-sim --count N` as the real build, waits for its N ready lines, writes the devices' URIs
# (one per line) to $work/devices.txt: scale_sim_start N
scale_sim_start() {
    local n="$1" i ready
    : >"$work/sim.out"
    : >"$work/sim.out"  # read below before the background job may have opened it
    if [[ "$link" == pty ]]; then
        # Zephyr's default serial buffers (smp-sim's defaults, as native_sim_serial: 4 x 384-byte SMP
        # buffers, 2 x 128-byte receive lines freed on the 10 ms tick); the pty runs as fast as it goes.
        "$sim" --count "$n" --pty-link "$work/tty-%d" --swap-time "$swap" >"$work/sim.out" 2>"$work/sim.err" &
        ready='^pty '
    else
        "$sim" --count "$n" --buf-size 2048 --buf-count 2 --udp-queue zephyr --udp 127.0.0.1:0 --swap-time "$swap" \
            >"$work/sim.out" 2>"$work/sim.err" &
        ready='^udp '
    fi
    sim_pid=$!
    for i in $(seq 400); do
        [[ $(grep -c "$ready" "$work/sim.out") -ge "$n" ]] && break
        kill -0 "$sim_pid" 2>/dev/null || break
        sleep 0.05
    done
    if [[ $(grep -c "$ready" "$work/sim.out") -lt "$n" ]]; then
        echo "bench-scale: smp-sim --count $n did not start: $(cat "$work/sim.err")" >&2
        exit 1
    fi
    if [[ "$link" == pty ]]; then
        grep '^pty ' "$work/sim.out" | awk '{ for (i = 1; i < NF; i++) if ($i == "link") print "serial:" $(i + 1) }' >"$work/devices.txt"
    else
        grep '^udp ' "$work/sim.out" | awk '{ print "udp:" $2 }' >"$work/devices.txt"
    fi
}

# Every board in $work/devices.txt runs 1.2.3, confirmed (one `smp image list` each, 8 at a time).
check_boards() {
    local bad
    bad=$(xargs -P 8 -I{} sh -c '"$1" --device "$2" --timeout 5 --json image list 2>&1 |
        "$3" -c "import json,sys
try:
    images = json.load(sys.stdin)[\"images\"]
except Exception:
    images = []
ok = any(i.get(\"active\") and i.get(\"confirmed\") and i.get(\"version\") == \"1.2.3\" for i in images)
print(\"\" if ok else sys.argv[1])" "$2"' _ "$smp" {} "$py" <"$work/devices.txt" | grep -v '^$' || true)
    if [[ -n "$bad" ]]; then
        echo "bench-scale: these boards do not run 1.2.3 after the upgrade: $(echo $bad)" >&2
        return 1
    fi
}

# One upgrade run of N boards; sets result to "WALL SMP_RSS_KB SMP_CPU SIM_HWM_KB SIM_IDLE_RSS_KB SIM_CPU"
# (not in a subshell: the EXIT trap must see sim_pid): scale_run N one|separate
scale_run() {
    local n="$1" how="$2" t0 t1 sim_cpu0 sim_idle status=0 rss cpu user system
    scale_sim_start "$n"
    sleep 0.2
    sim_idle=$(status_kb "$sim_pid" VmRSS)
    sim_cpu0=$(cpu_seconds "$sim_pid")
    t0=$(date +%s.%N)
    if [[ "$how" == one ]]; then
        # One board: the plain single-device command; many: the fleet CLI's device file.
        local args=(--device "$(head -n 1 "$work/devices.txt")")
        ((n > 1)) && args=(--devices "$work/devices.txt" --max-parallel "$n")
        /usr/bin/time -f '%M %U %S' -o "$work/time.one" \
            "$smp" dfu "${args[@]}" --swap-time "$swap" "$work/fw.bin" >"$work/dfu.out" 2>&1 || status=$?
        # (After a failure time's first line says so.)
        read -r rss user system < <(tail -n 1 "$work/time.one")
    else
        local pids=() i=0
        while read -r uri; do
            /usr/bin/time -f '%M %U %S' -o "$work/time.$i" \
                "$smp" --device "$uri" dfu --swap-time "$swap" "$work/fw.bin" >"$work/dfu.$i.out" 2>&1 &
            pids+=($!)
            i=$((i + 1))
        done <"$work/devices.txt"
        for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
        # The sum of the processes' peak RSS and CPU.
        read -r rss user system < <(tail -q -n 1 "$work"/time.[0-9]* | awk '{ rss += $1; u += $2; s += $3 } END { print rss, u, s }')
    fi
    t1=$(date +%s.%N)
    if ((status != 0)); then
        echo "bench-scale: smp dfu ($n boards, $how) failed with exit $status:" >&2
        tail -n 20 "$work"/dfu*.out >&2
        exit 1
    fi
    local hwm sim_cpu
    cpu=$("$py" -c "print($user + $system)")
    hwm=$(status_kb "$sim_pid" VmHWM)
    sim_cpu=$("$py" -c "print($(cpu_seconds "$sim_pid") - $sim_cpu0)")
    check_boards
    stop_sim
    result="$("$py" -c "print($t1 - $t0)") $rss $cpu $hwm $sim_idle $sim_cpu"
}

# Best of $runs (by wall time); sets best: best_run N one|separate
best_run() {
    best=""
    for _ in $(seq "$runs"); do
        scale_run "$@"
        if [[ -z "$best" ]] || "$py" -c "import sys; sys.exit(0 if ${result%% *} < ${best%% *} else 1)"; then best=$result; fi
    done
}

load="$(cut -d' ' -f1-3 /proc/loadavg)"
if [[ "$link" == pty ]]; then
    echo "scale: boards = smp-sim --count N on ptys with Zephyr's default serial buffers (4 x 384-byte SMP buffers, 2 x 128-byte"
    echo "  receive lines freed on the 10 ms tick, console framing) and MCUboot swap-scratch: silent 0.25 s + ${swap} s swap + 0.05 s boot"
else
    echo "scale: boards = smp-sim --count N with native_sim_udp's UDP link (2 x 2048-byte SMP buffers, one request per board"
    echo "  answered per 10 ms tick, datagrams beyond the free buffers dropped) and MCUboot swap-scratch: silent 0.25 s + ${swap} s swap + 0.05 s boot"
fi
echo "  after the reset; image ${fw_size} B (imgtool, 1.2.3); smp dfu confirm-only --swap-time ${swap}; best of ${runs};"
echo "  $(nproc) cores, load average ${load} at the start"

declare -A one separate
if ((fleet)); then
    for n in "${counts[@]}"; do
        best_run "$n" one
        one[$n]=$best
    done
else
    echo "scale: one smp dfu for many boards: skipped (this smp takes one --device; build it with the fleet CLI)"
    best_run 1 one
    one[1]=$best
fi
for n in "${counts[@]}"; do
    # (Each smp process holds ~22 MB: 256 of them would take 5.6 GB.)
    if ((n > 1 && n <= separate_max)); then
        best_run "$n" separate
        separate[$n]=$best
    fi
done

rows=()
for n in "${counts[@]}"; do
    [[ -n "${one[$n]:-}" ]] && rows+=("$n one ${one[$n]}")
    [[ -n "${separate[$n]:-}" ]] && rows+=("$n separate ${separate[$n]}")
done
"$py" - "$load" "${rows[@]}" <<'PY'
import sys
rows = [r.split() for r in sys.argv[2:]]
base = next(float(r[2]) for r in rows if r[0] == "1" and r[1] == "one")
base_sim = next(int(r[5]) for r in rows if r[0] == "1" and r[1] == "one")
base_rss = next(int(r[3]) for r in rows if r[0] == "1" and r[1] == "one")
for n, how, wall, rss, cpu, hwm, idle, sim_cpu in rows:
    n, wall, rss, cpu, hwm, idle, sim_cpu = int(n), float(wall), int(rss), float(cpu), int(hwm), int(idle), float(sim_cpu)
    ratio = wall / base
    who = "one smp dfu" if how == "one" else f"{n} smp dfu processes"
    boards = "board " if n == 1 else "boards"
    target = "  (target <= 1.5x)" if how == "one" and n > 1 else ""
    smp_mem = f"smp peak RSS {rss / 1024:.1f} MB" if how == "one" else f"smp peak RSS {rss / 1024:.1f} MB in all ({rss / 1024 / n:.1f} MB each)"
    per_board = f" ({(rss - base_rss) / (n - 1):.0f} kB per extra board)" if how == "one" and n > 1 else ""
    sim_extra = f", {(hwm - base_sim) / max(1, n - 1):.0f} kB per extra device" if n > 1 else ""
    print(f"scale {n:3d} {boards}, {who}: {wall:.2f} s = {ratio:.2f}x one board{target}; {smp_mem}{per_board}, smp CPU {cpu:.2f} s;"
          f" smp-sim peak RSS {hwm / 1024:.1f} MB (idle {idle / 1024:.1f} MB{sim_extra}), smp-sim CPU {sim_cpu:.2f} s")
PY

# smp-sim's idle CPU: 64 devices (the largest count) that receive nothing for $idle_seconds.
n="${counts[-1]}"
scale_sim_start "$n"
sleep 0.5
c0=$(cpu_seconds "$sim_pid")
sleep "$idle_seconds"
c1=$(cpu_seconds "$sim_pid")
rss=$(status_kb "$sim_pid" VmRSS)
stop_sim
"$py" - "$n" "$c0" "$c1" "$idle_seconds" "$rss" <<'PY'
import sys
n, c0, c1, seconds, rss = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
print(f"scale: smp-sim idle with {n} devices: {100 * (c1 - c0) / seconds:.2f}% of a core over {seconds:.0f} s"
      f" (timers only while requests are pending), RSS {rss / 1024:.1f} MB")
PY
echo "scale: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
