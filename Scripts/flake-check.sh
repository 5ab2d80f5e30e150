#!/usr/bin/env bash
# Flake check: runs the README's test command (`bash Scripts/test.sh`) N times, each from a fresh clone
# of a commit, beside a load that keeps every core busy (stress-ng), and prints each run's result, wall
# time and failed tests, then "N passed, M failed". A test that passes here does not depend on the
# machine's speed.
#   flake-check.sh [-n N] [--no-load] [--keep] [--filter ARGS] [REPOSITORY [COMMIT]]
#     REPOSITORY   what to clone (default: the repository this script is in)
#     COMMIT       what to check out (default: HEAD of REPOSITORY; committed changes only)
#     -n N         runs (default 10)
#     --no-load    no stress-ng beside the runs
#     --keep       keep the runs' logs (their directory is printed); the clones are always removed
#     --filter ARGS  passed to Scripts/test.sh, which hands them to `swift test` (quick checks:
#                  --filter 'UDPWindowTests'); without it each run is the whole suite (~12 minutes)
# Each clone gets ../shared (the firmware the real-firmware tests run) as a symlink to the original's, if
# it has one; the Python venvs of the original (.venv, .venv-labgrid) are reused when present, unless
# SMP_TEST_VENV / SMP_LABGRID_VENV say otherwise. stress-ng (Debian's package) is installed if missing.
# Exit code: 0 when every run passed, 1 when one failed, 64 on a usage error.
set -uo pipefail

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

runs=10 load=1 keep=0 filter=() source="" commit=""
while (($#)); do
    case "$1" in
        -n) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "flake-check: -n needs a positive number" >&2; exit 64; }
            runs=$2; shift 2 ;;
        --no-load) load=0; shift ;;
        --keep) keep=1; shift ;;
        --filter) [[ -n "${2:-}" ]] || { echo "flake-check: --filter needs an argument" >&2; exit 64; }
            # Word-split on purpose: --filter 'A|B' or --filter 'A --skip B'.
            read -r -a words <<<"$2"; filter+=(--filter "${words[@]}"); shift 2 ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "flake-check: unknown option $1" >&2; usage >&2; exit 64 ;;
        *) if [[ -z "$source" ]]; then source=$1; elif [[ -z "$commit" ]]; then commit=$1
           else echo "flake-check: too many arguments" >&2; exit 64; fi
           shift ;;
    esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source="${source:-$here}"
commit="${commit:-HEAD}"
log() { printf 'flake-check: %s\n' "$*" >&2; }

# A local repository: resolve the commit there (HEAD is its checked-out commit, also in a worktree).
local_source=""
if [[ -d "$source" ]]; then
    local_source="$(cd "$source" && git rev-parse --show-toplevel 2>/dev/null)" \
        || { log "$source is not a git repository"; exit 64; }
    sha="$(git -C "$local_source" rev-parse --verify "$commit^{commit}" 2>/dev/null)" \
        || { log "no commit $commit in $local_source"; exit 64; }
    if [[ -n "$(git -C "$local_source" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
        log "note: $local_source has uncommitted changes; the runs test commit ${sha:0:12} without them"
    fi
    commit=$sha
    # The venvs the tests need (Scripts/setup.sh creates them): reuse the original's.
    [[ -z "${SMP_TEST_VENV:-}" && -x "$local_source/.venv/bin/python" ]] && export SMP_TEST_VENV="$local_source/.venv"
    [[ -z "${SMP_LABGRID_VENV:-}" && -x "$local_source/.venv-labgrid/bin/python" ]] && export SMP_LABGRID_VENV="$local_source/.venv-labgrid"
    [[ -n "${SMP_TEST_VENV:-}" ]] && export SMP_TEST_PYTHON="${SMP_TEST_PYTHON:-$SMP_TEST_VENV/bin/python}"
fi

# The load: stress-ng from Debian, installed like Scripts/setup.sh installs packages.
if ((load)) && ! command -v stress-ng >/dev/null; then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { log "need root (or sudo) to install stress-ng (or use --no-load)"; exit 1; }
        sudo=(sudo -n)
    fi
    log "installing stress-ng"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends stress-ng >/dev/null \
        || { log "could not install stress-ng"; exit 1; }
fi

work="$(mktemp -d -t smp-flake-check.XXXXXX)"
mkdir -p "$work/logs"
stress_pid="" run_pid=""
# Stops the run in progress (its own process group: test.sh, swift, the simulators it started).
stop_run() {
    [[ -n "$run_pid" ]] || return 0
    kill -TERM -- "-$run_pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$run_pid" 2>/dev/null
    wait "$run_pid" 2>/dev/null
    run_pid=""
}
stop_load() {
    [[ -n "$stress_pid" ]] || return 0
    # stress-ng runs in its own process group (setsid): stop it and its workers.
    kill -TERM -- "-$stress_pid" 2>/dev/null || kill -TERM "$stress_pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$stress_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$stress_pid" 2>/dev/null
    wait "$stress_pid" 2>/dev/null
    stress_pid=""
}
cleanup() {
    stop_run
    stop_load
    if ((keep)); then
        find "$work" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
        log "logs kept in $work/logs"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ../shared beside each clone (the clones are siblings in $work).
original_shared=""
[[ -n "$local_source" && -d "$local_source/../shared" ]] && original_shared="$(cd "$local_source/../shared" && pwd)"
[[ -n "$original_shared" ]] && ln -s "$original_shared" "$work/shared"

if ((load)); then
    setsid stress-ng --cpu 0 --cpu-load 100 --quiet >"$work/logs/stress-ng.log" 2>&1 &
    stress_pid=$!
    sleep 1
    kill -0 "$stress_pid" 2>/dev/null || { log "stress-ng did not start: $(cat "$work/logs/stress-ng.log")"; exit 1; }
    log "load: stress-ng --cpu 0 --cpu-load 100 ($(nproc) workers, pid $stress_pid)"
fi
log "$runs run(s) of Scripts/test.sh${filter[*]:+ ${filter[*]}} on ${commit:0:12} from $source"

# The names of the failed tests in a test.sh log, as its summary finds them.
failed_names() {
    grep -E 'Test .* failed after|error: .*XCT|consumer package FAILED|labgrid-e2e: FAILED|test.sh: build FAILED|test.sh: setup failed|^  hung: ' "$1" \
        | sed -E -e 's/.*Test (.*) failed after.*/\1/' \
                 -e 's/^  hung: (.*)/\1 (hung)/' \
                 -e 's/.*error: (-\[[^]]*\]).*/\1/' \
                 -e 's/.*(consumer package) FAILED.*/\1/' \
                 -e 's/.*(labgrid-e2e): FAILED.*/\1/' \
                 -e 's/.*test.sh: (build) FAILED.*/\1/' \
                 -e 's/.*test.sh: (setup) failed.*/\1/' \
        | grep -v '^run with [0-9]' \
        | awk '!seen[$0]++'
}

passed=0 failed=0
for ((i = 1; i <= runs; i++)); do
    clone="$work/run$i"
    run_log="$work/logs/run$i.log"
    start=$SECONDS
    status=0
    if ! git clone -q "$source" "$clone" >"$run_log" 2>&1; then
        status=1
    elif ! git -C "$clone" -c advice.detachedHead=false checkout -q "$commit" >>"$run_log" 2>&1 \
        && ! { git -C "$clone" fetch -q origin "$commit" && git -C "$clone" -c advice.detachedHead=false checkout -q "$commit"; } >>"$run_log" 2>&1; then
        echo "flake-check: commit $commit is not in the clone of $source" >>"$run_log"
        status=1
    else
        # In the background and its own process group, so that a signal to this script (its traps run
        # only between commands) stops the run at once, with everything it started.
        (cd "$clone" && exec setsid bash Scripts/test.sh "${filter[@]}") >>"$run_log" 2>&1 &
        run_pid=$!
        wait "$run_pid"
        status=$?
        run_pid=""
    fi
    seconds=$((SECONDS - start))
    time_text="$(printf '%dm%02ds' $((seconds / 60)) $((seconds % 60)))"
    if ((status == 0)); then
        passed=$((passed + 1))
        printf 'run %d/%d: PASSED in %s\n' "$i" "$runs" "$time_text"
    else
        failed=$((failed + 1))
        printf 'run %d/%d: FAILED (exit %d) in %s\n' "$i" "$runs" "$status" "$time_text"
        names="$(failed_names "$run_log")"
        if [[ -n "$names" ]]; then
            printf '%s\n' "$names" | sed 's/^/  failed: /'
        else
            printf '  (no failed test named; the log ends:)\n'
            tail -5 "$run_log" | sed 's/^/  | /'
        fi
        ((keep)) && printf '  log: %s\n' "$run_log"
    fi
    rm -rf "$clone"
done

echo "$passed passed, $failed failed"
((failed == 0))
