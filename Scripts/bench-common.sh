# Sourced by bench.sh and bench-ble.sh (not run on its own): release binaries built as the tool is meant
# to be installed, a work directory with a random payload, and starting/stopping one smp-sim.
# Needs: repo (the checkout), size (payload bytes). Sets: smp, sim, work, sim_pid.

source "$repo/Scripts/release-flags.sh"

# bench_build [--no-build]: builds smp and smp-sim (unless told not to) as they ship (release-flags.sh:
# the Swift runtime and FoundationEssentials linked in, whole-program optimised for size); sets smp and sim
# (smp is $BENCH_SMP when that is set).
bench_build() {
    if [[ "${1:-}" != "--no-build" ]]; then
        echo "building release (swift build ${release_flags[*]} --product smp / smp-sim)..." >&2
        swift build "${release_flags[@]}" --product smp >&2
        swift build "${release_flags[@]}" --product smp-sim >&2
    fi
    local bin
    bin="$(swift build "${release_flags[@]}" --show-bin-path)"
    smp="$bin/smp"
    sim="$bin/smp-sim"
    # BENCH_SMP: another smp binary against the same simulator (e.g. an older release, to compare).
    [[ -z "${BENCH_SMP:-}" ]] || smp="$BENCH_SMP"
}

# bench_workdir NAME: a temporary directory with $size random bytes in payload.bin, removed (and the
# simulator stopped) on exit.
bench_workdir() {
    work="$(mktemp -d -t "$1.XXXXXX")"
    sim_pid=""
    trap 'stop_sim; rm -rf "$work"' EXIT
    head -c "$size" /dev/urandom >"$work/payload.bin"
}

stop_sim() {
    if [[ -n "$sim_pid" ]] && kill -0 "$sim_pid" 2>/dev/null; then
        kill -TERM "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    sim_pid=""
}

# sim_start PATTERN COUNT ARGS...: starts smp-sim with ARGS and waits until COUNT lines of its output
# (its ready lines, kept in $work/sim.out) match PATTERN, for up to sim_start_seconds (default 10); sets
# sim_pid.
sim_start() {
    local pattern="$1" expect="$2"
    shift 2
    : >"$work/sim.out"
    # The benchmarks measure the tools, not a device's limits: smp-sim's former defaults (2048-byte
    # buffers, no serial line-buffer or UDP buffer limits, unlimited file system) instead of Zephyr's.
    "$sim" --buf-size 2048 --rx-lines 0 --fs-blocks 0 --udp-queue unlimited "$@" >"$work/sim.out" 2>"$work/sim.err" &
    sim_pid=$!
    for _ in $(seq $((${sim_start_seconds:-10} * 20))); do
        [[ $(grep -c -E "$pattern" "$work/sim.out") -ge "$expect" ]] && return 0
        kill -0 "$sim_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "$(basename "$0"): smp-sim did not start: $(cat "$work/sim.err")" >&2
    exit 1
}
