#!/usr/bin/env bash
# Benchmark (not a test): `smp` with its default options against smpclient 7.3.0 (the Python SMP client,
# from the test venv) on the real Zephyr 4.4.0 / MCUboot builds (Scripts/firmware-rig.sh), both measured
# in the same run:
#   echo round trip                      native_sim serial, serial-fs, udp
#   4 KiB fs upload and download         native_sim serial, serial-fs, udp (/lfs1)
#   132 kB app through MCUboot serial recovery (image upload)   QEMU mps2-an385
#   50 kB app image upload (the app re-signed as 2.0.0)         QEMU qemu_cortex_m0
# smpclient gets the frame sizing that works best on each build (found by trying; see the table it
# prints); smp gets none (its defaults). Every smp and smpclient run is bounded (BENCH_FW_TIMEOUT s,
# default 180): a run that fails or hangs prints FAILED for its row and the bench goes on.
# smp is timed as a whole process and, where its --json says so, over the transfer alone; smpclient
# after its connection is up. Ratio = smp time / smpclient time (below 1: smp is faster).
# native_sim_udp does not keep one pace: measured with 10-echo blocks every 0.4 s for 16 s, it answers on
# its 10 ms tick for stretches of 0.5-2 s and at once (0.05-0.1 ms) for stretches of 1-4 s in between
# (native_sim's real-time sync catching up, it seems), so a single UDP row says more about which stretch a
# client ran in than about the client: read UDP rows over several runs (BENCH_FW_RUNS).
# Under every row a `floor:` line gives what the device allows any client, with its arithmetic, and smp's
# whole process as a multiple of it. On the native_sim builds the floor comes from the build's own limits
# (Scripts/bench_device_floor.py: the reads of its pty every 20 ms, or its 10 ms UDP tick, the lines and
# frames one read takes, its buffers), independent of every client: smp's start-up (`smp --version`,
# measured first) + the fewest device reads any frame shape needs, the hash included. On the QEMU builds,
# whose time goes to flash writes under emulation, it is the data requests (each as large as the device
# takes) x their median round trip in smp's trace.
# Usage: Scripts/bench-firmware.sh [--no-build]   (env: BENCH_FW_RUNS=1 runs per row (best of),
#        BENCH_FW_ECHOS=20, BENCH_FW_TIMEOUT=180, BENCH_FW_QEMU=0 to leave out the QEMU rows,
#        BENCH_SMP=path of an smp binary to use instead of
#        building the release, SMP_FIRMWARE_DIR, SMP_TEST_VENV)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
runs="${BENCH_FW_RUNS:-1}"
echos="${BENCH_FW_ECHOS:-20}"
limit="${BENCH_FW_TIMEOUT:-180}"
size=4096
rig="$repo/Scripts/firmware-rig.sh"
firmware="${SMP_FIRMWARE_DIR:-$repo/../shared/firmware}"
prefix="zephyr_4.4.0_smp_server_0eae053d_"
[[ -d "$firmware" ]] || { echo "bench-firmware: no firmware directory at $firmware (set SMP_FIRMWARE_DIR)" >&2; exit 1; }

bash Scripts/setup.sh
venv="${SMP_TEST_VENV:-$repo/.venv}"
py="$venv/bin/python"
source Scripts/bench-common.sh
if [[ -n "${BENCH_SMP:-}" ]]; then
    smp="$BENCH_SMP"  # a given smp binary (e.g. a debug build), nothing built
else
    # Only smp: no simulator here. Built as bench_build builds it (release-flags.sh).
    if [[ "${1:-}" != "--no-build" ]]; then
        echo "building release (swift build ${release_flags[*]} --product smp)..." >&2
        swift build "${release_flags[@]}" --product smp >&2
    fi
    smp="$(swift build "${release_flags[@]}" --show-bin-path)/smp"
fi
bench_workdir smp-bench-firmware
export SMP_FIRMWARE_RIG_ROOT="$work/rigs"
trap 'bash "$rig" stop-all "$SMP_FIRMWARE_RIG_ROOT"; rm -rf "$work"' EXIT

# smpclient's frame sizing per build (Scripts/bench_firmware_smpclient.py --frames), the best that
# works there: on the default serial builds at most two 128-byte lines per frame (2 x 128 B line
# buffers; `auto` sends frames of up to buf_size and they are dropped); serial-fs takes its buf_size;
# MCUboot's serial recovery has no `os params` (smpclient's auto then sends one 128-byte line per
# frame) but takes frames of its 1024-byte buffer in 128-byte lines.
frames_for() {
    case "$1" in
        serial | m0) echo lines:128:2 ;;
        serial-fs) echo auto ;;
        mps2-recovery) echo buffer:1024:128 ;;
        *) echo auto ;;
    esac
}

rig_dir="" rig_device="" rig_address=""
rig_start() {
    local out
    out="$(bash "$rig" start "$1" --owner $$)" || { echo "bench-firmware: could not start $1" >&2; return 1; }
    rig_dir="$(sed -n 's/^dir //p' <<<"$out")"
    rig_device="$(sed -n 's/^device //p' <<<"$out")"
    rig_address="$(sed -n 's/^address //p' <<<"$out")"
    # What smp learns about a serial link is cached per device path: a cache of each device's own (a
    # fresh device; the ptys are reused), shared by the runs on it as a user's commands share it.
    export XDG_CACHE_HOME="$rig_dir/cache"
}
rig_stop() { [[ -n "$rig_dir" ]] && bash "$rig" stop "$rig_dir"; rig_dir=""; }

now() { date +%s.%N; }
elapsed() { "$py" -c "print('%.4f' % ($2 - $1))"; }

# Runs smp bounded; stdout in $work/smp.out, stderr in $work/smp.err. Prints the wall seconds; fails
# (status 1) when smp failed or was killed.
smp_timed() {
    local t0 t1 status=0
    t0=$(now)
    timeout --kill-after=5 "$limit" "$smp" --device "$rig_device" "$@" >"$work/smp.out" 2>"$work/smp.err" || status=$?
    t1=$(now)
    elapsed "$t0" "$t1"
    if ((status != 0)); then
        printf 'smp %s: exit %d%s: %s\n' "$*" "$status" "$( ((status == 124 || status == 137)) && echo " (killed after ${limit} s)")" \
            "$(head -c 300 "$work/smp.err" | tr '\n' ' ')" >>"$work/failures"
        return 1
    fi
}

# A key of smp's --json object in $work/smp.out, else $2 (the whole process's time).
smp_json() { "$py" -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get(sys.argv[2]) or sys.argv[3])
except Exception: print(sys.argv[3])' "$work/smp.out" "$1" "$2"; }

# Runs the smpclient bench bounded; prints its JSON lines; fails when it failed.
smpclient_run() {
    local status=0
    timeout --kill-after=5 "$limit" "$py" Scripts/bench_firmware_smpclient.py "$@" >"$work/py.out" 2>"$work/py.err" || status=$?
    if ((status != 0)); then
        printf 'smpclient %s: exit %d: %s\n' "$*" "$status" "$(grep -v '^Error reading MCUMgr' "$work/py.err" | head -c 300 | tr '\n' ' ')" >>"$work/failures"
        return 1
    fi
    cat "$work/py.out"
}
op_seconds() { "$py" -c 'import json,sys
for line in sys.stdin:
    o = json.loads(line)
    if o["op"] == sys.argv[1]: print(o["seconds"])' "$1"; }

min() { "$py" -c 'import sys; v=[float(x) for x in sys.argv[1:] if x]; print(min(v) if v else "")' "$@"; }
median() { "$py" -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:] if x]; print(statistics.median(v) if v else "")' "$@"; }

# row LABEL SMP_SECONDS SMP_NOTE SMPCLIENT_SECONDS [BYTES]: one result line; FAILED where a side has none.
row() {
    "$py" - "$@" <<'PY'
import sys
label, ours, note, theirs = sys.argv[1:5]
size = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else 0
def show(s):
    if not s: return "FAILED"
    text = f"{float(s)*1000:.0f} ms" if float(s) < 1 else f"{float(s):.2f} s"
    if size: text += f" ({size/float(s)/1024:.1f} KiB/s)"
    return text
ratio = f"ratio {float(ours)/float(theirs):.2f}x" if ours and theirs else "ratio -"
print(f"{label}: smp {show(ours)}{' ' + note if note and ours else ''}, smpclient {show(theirs)}; {ratio}")
PY
}

# The device's own floor for a transfer, from smp's -v trace in $work/smp.err: the answers to the data
# requests smp sent (each as large as the device takes: its line buffers and SMP buffer, learned or asked;
# one frame at a time where it holds one) times their median round trip. Prints "REQUESTS MEDIAN_SECONDS";
# nothing without a trace.
device_floor() {
    "$py" - "$1" "$work/smp.err" <<'PY'
import re, statistics, sys
pattern = re.compile(r"<- " + re.escape(sys.argv[1]) + r"seq \d+ \d+ B after ([0-9.]+) ms")
times = [float(m.group(1)) / 1000 for m in map(pattern.search, open(sys.argv[2], errors="replace")) if m]
if times: print(len(times), statistics.median(times))
PY
}

# model_floor_line BUILD OP OURS_WHOLE_PROCESS SMPCLIENT_SECONDS: the native_sim build's floor for OP (upload,
# download, echo) from its limits (Scripts/bench_device_floor.py) plus smp's start-up; smp's whole process
# beside it, and what 1.5x smpclient's engine would need.
model_floor_line() {
    local model
    model="$("$py" Scripts/bench_device_floor.py "$1" "$2")" || { echo "  (device floor: FAILED)"; return; }
    "$py" - "$model" "$3" "$4" "$startup" <<'PY'
import json, sys
model, ours, theirs, startup = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
start = float(startup) if startup else 0.0
total = start + model["seconds"]
text = f"  floor (the device's limits): {start*1000:.1f} ms start-up + {model['arithmetic']} = {total*1000:.0f} ms"
if ours:
    text += f"; smp whole process {float(ours)*1000:.0f} ms = {float(ours)/total:.2f}x the floor"
if theirs:
    text += f"; 1.5x smpclient's engine: {float(theirs)/1.5*1000:.0f} ms"
print(text)
PY
}

# floor_line "REQUESTS MEDIAN" VERIFICATIONS OURS_WHOLE_PROCESS SMPCLIENT_SECONDS: the device's floor for
# the row, with its arithmetic: smp's start-up (`smp --version`, median of 15, measured once per bench)
# plus the fewest requests the transfer needs (its data requests, each as large as the device takes,
# and VERIFICATIONS more: the hash after a file transfer) times the device's median round trip for
# them (its ticks); smp's whole process beside it, and what 1.5x smpclient's engine would need.
floor_line() {
    "$py" - "$1" "$2" "$3" "$4" "$startup" <<'PY'
import sys
floor, verifications, ours, theirs, startup = sys.argv[1].split(), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
if len(floor) != 2:
    print("  (device floor: no trace)")
    sys.exit()
n, rtt = int(floor[0]), float(floor[1])
start = float(startup) if startup else 0.0
total = start + (n + verifications) * rtt
requests = f"{n} data request{'s' if n != 1 else ''}" + (f" + {verifications} hash" if verifications else "")
text = (f"  floor: {start*1000:.1f} ms start-up + ({requests}) x {rtt*1000:.1f} ms median round trip"
        f" = {total*1000:.0f} ms")
if ours:
    text += f"; smp whole process {float(ours)*1000:.0f} ms = {float(ours)/total:.2f}x the floor"
if theirs:
    text += f"; 1.5x smpclient's engine: {float(theirs)/1.5*1000:.0f} ms"
print(text)
PY
}

: >"$work/failures"
head -c "$size" /dev/urandom >"$work/f4k.bin"
results=()

# smp's own start-up, without a device: the part of every whole-process row that no round trip explains.
# Timed from Python around each run (not with `date`, whose own start is of the same order); the first
# run only warms the page cache.
startup="$("$py" - "$smp" <<'PY' || true
import statistics, subprocess, sys, time
times = []
for run in range(16):
    start = time.perf_counter()
    subprocess.run([sys.argv[1], "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    if run: times.append(time.perf_counter() - start)
print(statistics.median(times))
PY
)"
results+=("smp start-up (smp --version, whole process, median of 15): $("$py" -c "import sys; print('%.1f ms' % (float(sys.argv[1]) * 1000) if sys.argv[1] else 'FAILED')" "$startup")")

# Echo and 4 KiB fs transfers on the native_sim builds.
for build in serial serial-fs udp; do
    rig_start "$build" || { results+=("$build: the rig did not start: FAILED"); continue; }
    frames="$(frames_for "$build")"
    if [[ "$build" == udp ]]; then link=(--udp "$rig_address"); else link=(--serial "$rig_address" --frames "$frames"); fi

    theirs_echo="" theirs_up="" theirs_down=""
    # smpclient first: it leaves $work/f4k.bin on the device, which smp's download then fetches, so
    # that smp's download row does not depend on smp's upload.
    if out="$(smpclient_run "${link[@]}" --echo "$echos" --fs-upload 1 --file "$work/f4k.bin" --fs-download --dest /lfs1/bench.bin)"; then
        theirs_echo="$(op_seconds echo <<<"$out")"
        theirs_up="$(op_seconds fs-upload <<<"$out")"
        theirs_down="$(op_seconds fs-download <<<"$out")"
    fi

    # Whole processes on both sides (start-up, connect, one echo): smp's only way to run; smpclient's
    # round trip inside its session is shown beside it.
    echo_times=() py_echo_times=()
    for _ in $(seq 10); do
        t="$(smp_timed os echo hi)" && echo_times+=("$t") || break
    done
    ours_echo="$( ((${#echo_times[@]} == 10)) && median "${echo_times[@]}" || true)"
    for _ in $(seq 5); do
        t0=$(now)
        smpclient_run "${link[@]}" --echo 1 >/dev/null || break
        py_echo_times+=("$(elapsed "$t0" "$(now)")")
    done
    theirs_echo_process="$( ((${#py_echo_times[@]} == 5)) && median "${py_echo_times[@]}" || true)"

    up_wall=() up_transfer=() down_wall=() down_transfer=() first_up=""
    for _ in $(seq "$runs"); do
        rm -f "$work/back.bin"
        if t="$(smp_timed -v --json fs download /lfs1/bench.bin "$work/back.bin")"; then
            if cmp -s "$work/f4k.bin" "$work/back.bin"; then
                down_wall+=("$t"); down_transfer+=("$(smp_json transfer_seconds "$t")")
            else
                echo "smp fs download /lfs1/bench.bin: exit 0 but the bytes differ from the uploaded ones" >>"$work/failures"
            fi
        fi
        # --restart: the device already holds these bytes (smpclient's upload), and smp would otherwise
        # resume from them and send nothing. The first upload to a device learns its serial link (see
        # LinkProbe); later ones, as a user's later commands, check what was learned with one frame.
        for pass in first later; do
            [[ "$pass" == first && -n "$first_up" ]] && continue
            if t="$(smp_timed -v --json fs upload --restart "$work/f4k.bin" /lfs1/bench.bin)"; then
                if [[ "$pass" == first ]]; then
                    first_up="$(smp_json transfer_seconds "$t")"
                else
                    up_wall+=("$t"); up_transfer+=("$(smp_json transfer_seconds "$t")")
                fi
            fi
        done
    done
    rig_stop

    results+=("$(row "$build echo, whole process (smpclient $frames)" "$ours_echo" "median of 10" "$theirs_echo_process")")
    results+=("  (smpclient's echo round trip inside its session: $("$py" -c "import sys; print('%.1f ms, median of $echos' % (float(sys.argv[1]) * 1000) if sys.argv[1] else 'FAILED')" "$theirs_echo"))")
    results+=("$(model_floor_line "$build" echo "$ours_echo" "")")
    up="$(min "${up_transfer[@]:-}")"
    results+=("$(row "$build fs upload 4 KiB (smpclient $frames)" "$up" "transfer (whole process $(min "${up_wall[@]:-}") s; first on the device, learning its link: ${first_up:-FAILED} s)" "$theirs_up" "$size")")
    results+=("$(model_floor_line "$build" upload "$(min "${up_wall[@]:-}")" "$theirs_up")")
    down="$(min "${down_transfer[@]:-}")"
    results+=("$(row "$build fs download 4 KiB (smpclient $frames)" "$down" "transfer (whole process $(min "${down_wall[@]:-}") s)" "$theirs_down" "$size")")
    results+=("$(model_floor_line "$build" download "$(min "${down_wall[@]:-}")" "$theirs_down")")
done

# Image uploads under QEMU: a fresh device for each client and run.
# image_row LABEL BUILD FILE: smp `image upload` (its --json seconds) against smpclient `upload`.
image_row() {
    local label="$1" build="$2" file="$3" frames ours=() ours_wall=() theirs=() out t bytes floor=""
    frames="$(frames_for "$build")"
    bytes=$(stat -c %s "$file")
    for _ in $(seq "$runs"); do
        if rig_start "$build"; then
            if out="$(smpclient_run --serial "$rig_address" --frames "$frames" --image "$file")"; then
                theirs+=("$(op_seconds image-upload <<<"$out")")
            fi
            rig_stop
        fi
        if rig_start "$build"; then
            if t="$(smp_timed -v --json image upload "$file")"; then
                ours+=("$(smp_json seconds "$t")")
                ours_wall+=("$t")
                floor="$(device_floor 'write-response image(1) cmd 1 ')"
            fi
            rig_stop
        fi
    done
    results+=("$(row "$label (smpclient $frames)" "$(min "${ours[@]:-}")" "upload" "$(min "${theirs[@]:-}")" "$bytes")")
    results+=("$(floor_line "$floor" 0 "$(min "${ours_wall[@]:-}")" "$(min "${theirs[@]:-}")")")
}

if [[ "${BENCH_FW_QEMU:-1}" != 0 ]]; then
image_row "mps2 MCUboot serial recovery, 132 kB app" mps2-recovery "$firmware/${prefix}mps2_an385_serial_recovery_buf1024.signed.bin"

# The Cortex-M0 app re-signed as 2.0.0 (header and TLVs off, imgtool sign again), as the test suite does.
"$py" - "$firmware/${prefix}qemu_cortex_m0_serial.signed.bin" "$work/m0-body.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
header_size, image_size = struct.unpack_from("<H", data, 8)[0], struct.unpack_from("<I", data, 12)[0]
open(sys.argv[2], "wb").write(data[header_size:header_size + image_size])
PY
"$venv/bin/imgtool" sign --header-size 0x200 --pad-header --align 4 --version 2.0.0 --slot-size 0x1A000 \
    "$work/m0-body.bin" "$work/m0-2.0.0.bin" >/dev/null
image_row "qemu_cortex_m0 image upload, 50 kB app" m0 "$work/m0-2.0.0.bin"
fi

echo
echo "real firmware (Zephyr 4.4.0 / MCUboot; smp defaults, smpclient 7.3.0 best frame sizing; best of $runs):"
printf '  %s\n' "${results[@]}"
if [[ -s "$work/failures" ]]; then
    echo "failures:"
    sed 's/^/  /' "$work/failures"
fi
