#!/usr/bin/env bash
# The project's test command: installs prerequisites (Scripts/setup.sh), builds everything including
# the tests, and runs the whole suite (unit, simulator, end-to-end and interop tests), then builds the
# README examples in a separate package that depends on this one (Scripts/consumer-test.sh; only when
# run without arguments).
# Arguments go to `swift test` (e.g. --filter EndToEndTests).
# Exit code: 0 when everything passed, else the failing step's code.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export SMP_TEST_VENV="${SMP_TEST_VENV:-$repo/.venv}"
export SMP_TEST_PYTHON="${SMP_TEST_PYTHON:-$SMP_TEST_VENV/bin/python}"
# What smp learns about serial links is kept under $XDG_CACHE_HOME/smp: a directory of this run's own,
# so that no earlier run (or the user's own devices) changes what the tests see.
export XDG_CACHE_HOME="$(mktemp -d -t smp-test-cache.XXXXXX)"
export SMP_TEST_REQUIRE_UMOCKDEV=1  # setup.sh installs umockdev: the udev discovery tests must run, not skip
export SMP_TEST_REQUIRE_SER2NET=1  # setup.sh installs ser2net: the remote serial port tests must run, not skip
# Bluetooth LE tests: each suite starts its own private dbus-daemon + bluezoo through ble-rig.sh (a rig
# stops itself when the test process exits); anything still running under the root stops on exit.
export SMP_TEST_BLE_RIG="$repo/Scripts/ble-rig.sh"
export SMP_BLE_RIG_ROOT="$(mktemp -d -t smp-ble-rigs.XXXXXX)"
trap 'bash "$repo/Scripts/ble-rig.sh" stop-all "$SMP_BLE_RIG_ROOT"; rm -rf "$XDG_CACHE_HOME"' EXIT

started=$SECONDS
step() { printf '\n== %s\n' "$*"; }
elapsed() { printf '%dm%02ds' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)); }

step "setup"
bash Scripts/setup.sh || { echo "test.sh: setup failed"; exit 1; }

step "swift build --build-tests"
swift build --build-tests
build_status=$?
if ((build_status != 0)); then
    echo "test.sh: build FAILED (exit $build_status) after $(elapsed)"
    exit "$build_status"
fi

step "swift test"
log="$(mktemp -t smp-test.XXXXXX)"
# A hung test holds the run until CI gives up: each `swift test` gets a deadline (the whole suite takes
# about 3 minutes, a real-firmware suite at most 8 under load), and a run that passes it is stopped and fails with
# the tests that had started and not finished. (Not timeout(1): it puts the command in a process group
# of its own, which Ctrl-C and flake-check's stop would miss.)
watchdog() {
    local minutes="$1"
    shift
    local fired
    fired="$(mktemp -u -t smp-test-watchdog.XXXXXX)"
    "$@" &
    local pid=$!
    # Stopped early (the command ended), the sleep fails and the dog leaves without a word.
    { sleep "$((minutes * 60))" || exit 0; : >"$fired"; pkill -TERM -P "$pid"; kill -TERM "$pid"; } >/dev/null 2>&1 &
    local dog=$!
    wait "$pid"
    local status=$?
    pkill -P "$dog" 2>/dev/null
    kill "$dog" 2>/dev/null
    if [[ -e "$fired" ]]; then
        rm -f "$fired"
        echo "test.sh: swift test did not finish within $minutes minutes (stopped); tests started and not finished:"
        sed -E 's/\x1b\[[0-9;]*m//g' "$log" | awk '
            / started\.$/ && /Test / && !/Test case passing/ { name = $0; sub(/.*Test /, "", name); sub(/ started\.$/, "", name); if (name != "run") open[name] = 1 }
            /Test .* (passed|failed|skipped)/ { for (n in open) if (index($0, "Test " n) > 0) delete open[n] }
            END { for (n in open) print "  hung: " n }'
        return 124
    fi
    return "$status"
}
trap 'rm -f "$log"; bash "$repo/Scripts/ble-rig.sh" stop-all "$SMP_BLE_RIG_ROOT"; rm -rf "$XDG_CACHE_HOME"' EXIT
if (($#)); then
    watchdog 30 swift test --skip-build "$@" 2>&1 | tee "$log"
    test_status=${PIPESTATUS[0]}
else
    # The suites that run the real firmware (native_sim processes, QEMU guests that spin the CPU) run on
    # their own after the rest: beside the whole suite on 2 cores their devices answer seconds late.
    real='RealFirmwareTests|RealSerialRecoveryDFUTests|RealSingleApplicationDFUTests|RealFileSystemTransferTests|RealRepeatedWriteTests|ConformanceTests'
    # Bluetooth LE on real BlueZ (Scripts/test-ble-bluez.sh): bluetoothd 5.66 and the kernel's Bluetooth
    # with linked virtual controllers in three QEMU guests that share the configurations: plain ATT at ATT
    # MTU 517 (the whole suite, in two parts), EATT, and MTUs 498, 247, 65 and 23 (echo and file
    # transfer). They run beside the host's suites: their tests wait on the link most of the time (a
    # guest takes about a third of a core), and one after the other they took half the whole run. Their
    # output follows the host's suites; they run a copy of the binaries.
    ble_log="$(mktemp -t smp-test-ble.XXXXXX)"
    bash Scripts/test-ble-bluez.sh --guests 3 >"$ble_log" 2>&1 </dev/null &
    ble_pid=$!
    stop_ble() {
        kill -0 "$ble_pid" 2>/dev/null || return 0
        pkill -TERM -P "$ble_pid" 2>/dev/null # ble-vm.sh: it stops its guest
        kill -TERM "$ble_pid" 2>/dev/null
        wait "$ble_pid" 2>/dev/null
    }
    trap 'stop_ble; rm -f "$log" "$ble_log"; bash "$repo/Scripts/ble-rig.sh" stop-all "$SMP_BLE_RIG_ROOT"; rm -rf "$XDG_CACHE_HOME"' EXIT
    echo "test.sh: real BlueZ started beside the host's suites (pid $ble_pid; tail -f $ble_log)"
    watchdog 20 swift test --skip-build --skip "$real" 2>&1 | tee "$log"
    test_status=${PIPESTATUS[0]}
    step "swift test: real firmware"
    # One suite at a time (each runs its devices one after another): two QEMU guests and a native_sim
    # device at once on 2 cores left a guest unanswered for 15 s.
    for suite in ${real//|/ }; do
        watchdog 20 swift test --skip-build --filter "$suite" 2>&1 | tee -a "$log"
        real_status=${PIPESTATUS[0]}
        ((test_status == 0)) && test_status=$real_status
    done
    step "soak (short): smp against smp-sim --faults over serial and UDP"
    # At most 150 s: every fault profile, a few transfers of each kind; fails on a hang or a lost byte.
    python3 Scripts/soak.py --quick --bin .build/debug 2>&1 | tee -a "$log"
    soak_status=${PIPESTATUS[0]}
    ((test_status == 0)) && test_status=$soak_status
    step "labgrid (Scripts/labgrid-e2e.sh): SMPDriver, coordinator, exporter, ser2net"
    # At most 4 minutes: the driver's unit tests, then smp-sim boards upgraded through labgrid places.
    bash Scripts/labgrid-e2e.sh --bin .build/debug 2>&1 | tee -a "$log"
    labgrid_status=${PIPESTATUS[0]}
    ((test_status == 0)) && test_status=$labgrid_status
    # A separate package that depends on this one by path builds the README examples and runs one.
    step "consumer package (Scripts/consumer-test.sh)"
    bash Scripts/consumer-test.sh
    consumer_status=$?
    ((consumer_status == 0)) || echo "test.sh: the consumer package FAILED (exit $consumer_status)" | tee -a "$log"
    ((test_status == 0)) && test_status=$consumer_status
    step "Bluetooth LE on real BlueZ (Scripts/test-ble-bluez.sh --guests 3: three QEMU guests, six link configurations)"
    ble_waited=$SECONDS
    wait "$ble_pid"
    ble_status=$?
    tee -a "$log" <"$ble_log"
    echo "test.sh: real BlueZ ended $((SECONDS - ble_waited)) s after the host's suites"
    ((test_status == 0)) && test_status=$ble_status
fi

step "summary"
# Swift Testing's and XCTest's own closing lines.
grep -E 'Test run with [0-9]+ test|Executed [0-9]+ test' "$log" | grep -v 'Executed 0 tests' | sort -u | sed 's/^[[:space:]]*/  /' || true
failures=$(grep -cE 'Test .* failed after|error: .*XCT' "$log" || true)
if ((test_status == 0)); then
    echo "test.sh: PASSED in $(elapsed)"
else
    echo "test.sh: FAILED (exit $test_status, $failures failure lines) in $(elapsed)"
    grep -E 'Test .* failed after|error: .*XCT|consumer package FAILED|labgrid-e2e: FAILED|test-ble-bluez: .* FAILED|ble-vm: |did not finish within|^  hung: ' "$log" | head -40 | sed 's/^/  /' || true
fi
exit "$test_status"
