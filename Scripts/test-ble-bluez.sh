#!/usr/bin/env bash
# The Bluetooth LE suite on REAL BlueZ: boots one QEMU guest with the kernel's Bluetooth, three linked
# virtual LE controllers (hci0 the client, hci1 the device, hci2 the device's firmware loader when it
# comes back as another peripheral: SMP_BLE_LOADER_ADAPTER/_ADDRESS) and bluetoothd 5.66
# (Scripts/ble-vm.sh --controllers 3), and runs RealBlueZTests in it once for each link configuration,
# restarting only bluetoothd in between:
#   att-517    [GATT] Channels 1 (plain ATT, as most Zephyr devices), ATT MTU 517   the whole suite
#   eatt-517   Channels 3 (ATT + 2 EATT bearers, BlueZ's default), MTU 517   the whole suite but
#              the relearning test: bluetoothd 5.66 reorders the pieces of a longer request over its
#              bearers, so smp sends single writes there (its reassembly probe goes unanswered)
#   att-498    ... MTU 498 (Zephyr's BT_L2CAP_TX_MTU of the smp_svr Bluetooth overlay)   transfers
#   att-247, att-65, att-23 (the device's own MTU over a 517 link)     transfers
# bluezoo (Scripts/ble-rig.sh) stays for the fast D-Bus tests; this is the real stack.
#
#   test-ble-bluez.sh [--only NAME[,NAME...]] [--guests N] [--logs DIR [--btmon]] [-- TEST-BUNDLE-ARGS...]
#       --guests N: N guests side by side (default 1), the first for att-517, the others share the rest;
#           each guest's output is printed when all have ended
#       --logs DIR: the guest's logs (bluetoothd, btvirt, console; with --btmon an HCI trace) end up in DIR
#           (without it they are kept in a directory of their own, printed, only when a configuration fails)
#       e.g. --only att-517 -- --skip everyGroupAnswers, or -- --filter 'RealBlueZTests/fileRoundTrip' 
#
# Needs the debug build with tests (`swift build --build-tests`) and root (ble-vm.sh installs QEMU,
# the kernel and BlueZ from Debian when missing). Exit status: 0 when every configuration passed.
# Prints one line per configuration and the closing "N passed, M failed" of the configurations.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# name:[GATT] Channels:ExchangeMTU:suite[:device MTU]. bluetoothd cannot offer an ATT MTU below 48 (the
# kernel refuses its L2CAP options), so MTU 23 is the device's own: smp-sim --ble-mtu 23 and mtu=23 in the
# URI, over a link that could carry more.
configurations=(att-517:1:517:full eatt-517:3:517:eatt att-498:1:498:link att-247:1:247:link att-65:1:65:link att-23:1:517:link:23)
# Every configuration runs unless --only names some.
default_skip=","

if [[ "${1:-}" == "--in-guest" ]]; then
    shift
    only="$1"
    shift
    bundle="$SMP_BIN_DIR/tests.xctest"
    # The whole suite, unless the arguments name tests of their own (filters add up).
    filter=(--filter RealBlueZTests)
    [[ " $* " == *" --filter "* ]] && filter=()
    passed=0 failed=0 names=()
    for entry in "${configurations[@]}"; do
        IFS=: read -r name channels mtu suite device_mtu <<<"$entry"
        if [[ -z "$only" ]]; then
            [[ "$default_skip" != *",$name,"* ]] || continue
        else
            [[ ",$only," == *",$name,"* ]] || continue
        fi
        started=$SECONDS
        if ! $BLE_VM_RESTART_BLUETOOTHD "channels=$channels" "mtu=$mtu"; then
            echo "test-ble-bluez: $name: bluetoothd did not come back"
            failed=$((failed + 1)) names+=("$name")
            continue
        fi
        printf '\n== real BlueZ, %s: [GATT] Channels %s, ATT MTU %s, %s suite\n' "$name" "$channels" "${device_mtu:-$mtu}" "$suite"
        # A discovery of the rig's own on the client's adapter for the whole run, so that BlueZ keeps
        # every advertising device known and commands connect without a scan of their own: on this rig
        # a scan of a few seconds misses an advertising device now and then (open, issue 23).
        # scanShowsTheDevice... still checks smp's own scans.
        ( { echo "select $SMP_BLE_CLIENT_ADDRESS"; echo "scan le"; sleep 7200; } | bluetoothctl >/dev/null 2>&1 ) &
        scanner=$!
        # The test bundle itself: SwiftPM's own start-up takes minutes in an emulated guest.
        SMP_BLE_ATT_MTU="${device_mtu:-$mtu}" SMP_BLE_DEVICE_MTU="$device_mtu" SMP_BLE_SUITE="$suite" "$bundle" --testing-library swift-testing "${filter[@]}" "$@"
        status=$?
        pkill -P "$scanner" 2>/dev/null
        wait "$scanner" 2>/dev/null
        if ((status == 0)); then
            passed=$((passed + 1))
            echo "test-ble-bluez: $name PASSED in $((SECONDS - started)) s"
        else
            failed=$((failed + 1)) names+=("$name")
            echo "test-ble-bluez: $name FAILED (exit $status) in $((SECONDS - started)) s"
        fi
    done
    echo
    echo "real BlueZ: $passed passed, $failed failed${names[*]:+ (${names[*]})}"
    ((failed == 0))
    exit
fi

only="" logs="" btmon="" guests=1
usage="usage: test-ble-bluez.sh [--only NAME[,NAME...]] [--guests N] [--logs DIR [--btmon]] [-- TEST-BUNDLE-ARGS...]"
while (($#)); do
    case "$1" in
        --only) only="$2"; shift ;;
        --guests) guests="$2"; [[ "$guests" =~ ^[1-9]$ ]] || { echo "$usage (--guests takes 1 to 9)" >&2; exit 64; }; shift ;;
        --logs) logs="$2"; shift ;;
        --btmon) btmon=1 ;;
        --) shift; break ;;
        *) echo "$usage" >&2; exit 64 ;;
    esac
    shift
done
bundle="$(ls -d .build/debug/*PackageTests.xctest 2>/dev/null | head -1)"
[[ -x .build/debug/smp && -x .build/debug/smp-sim && -n "$bundle" ]] ||
    { echo "test-ble-bluez: build first (swift build --build-tests)" >&2; exit 1; }
# The configurations to run, in order.
selected=()
for entry in "${configurations[@]}"; do
    name="${entry%%:*}"
    if [[ -z "$only" ]]; then
        [[ "$default_skip" != *",$name,"* ]] && selected+=("$name")
    elif [[ ",$only," == *",$name,"* ]]; then
        selected+=("$name")
    fi
done
((${#selected[@]})) || { echo "test-ble-bluez: no configuration named ${only:-(none)}" >&2; exit 64; }
# With --guests N the configurations share N guests that run side by side: the first takes the first
# configuration (att-517's whole suite, about as long as all the others), the others the rest in turn.
((guests > ${#selected[@]})) && guests=${#selected[@]}
groups=()
for i in "${!selected[@]}"; do
    if ((guests == 1 || i == 0)); then g=0; else g=$((1 + (i - 1) % (guests - 1))); fi
    groups[g]="${groups[g]:+${groups[g]},}${selected[i]}"
done
# The guests run a copy of the binaries, so that a build while they run changes nothing under them.
export SMP_BIN_DIR
SMP_BIN_DIR="$(mktemp -d "${TMPDIR:-/tmp}/smp-ble-bin.XXXXXX")" || exit 1
pids=()
trap 'for p in "${pids[@]}"; do pkill -TERM -P "$p" 2>/dev/null; done; wait; rm -rf "$SMP_BIN_DIR"' EXIT
cp .build/debug/smp .build/debug/smp-sim "$SMP_BIN_DIR/" && cp "$bundle" "$SMP_BIN_DIR/tests.xctest" || exit 1
# Without --logs the guests' logs go to a directory of their own that is kept, and named, only when a
# configuration fails: a failure in CI can be read afterwards.
own_logs=""
[[ -z "$logs" ]] && { logs="$(mktemp -d "${TMPDIR:-/tmp}/smp-ble-logs.XXXXXX")" && own_logs=1 || logs=""; }
run_guest() { # run_guest LOGDIR CONFIGURATIONS [TEST-BUNDLE-ARGS...]
    local vm_args=(--timeout 2400 --controllers 3) dir="$1" names="$2"
    shift 2
    [[ -n "$dir" ]] && vm_args+=(--logs "$dir")
    [[ -n "$btmon" ]] && vm_args+=(--btmon)
    bash Scripts/ble-vm.sh "${vm_args[@]}" -- bash Scripts/test-ble-bluez.sh --in-guest "$names" "$@"
}
status=0
if ((guests == 1)); then
    run_guest "$logs" "${groups[0]}" "$@"
    status=$?
else
    # Each guest's output is printed whole when all have ended, in order, then the closing line of all.
    out="$SMP_BIN_DIR/out"
    mkdir -p "$out"
    for g in "${!groups[@]}"; do
        echo "test-ble-bluez: guest $((g + 1)) of $guests runs ${groups[g]}"
        run_guest "${logs:+$logs/guest$((g + 1))}" "${groups[g]}" "$@" >"$out/$g" 2>&1 </dev/null &
        pids+=($!)
    done
    for g in "${!pids[@]}"; do
        wait "${pids[g]}" || status=1
    done
    pids=()
    passed=0 failed=0 names=()
    for g in "${!groups[@]}"; do
        printf '\n== real BlueZ, guest %d of %d: %s\n' $((g + 1)) "$guests" "${groups[g]}"
        cat "$out/$g"
        line="$(grep -E '^real BlueZ: [0-9]+ passed, [0-9]+ failed' "$out/$g" | tail -1)"
        if [[ "$line" =~ ^real\ BlueZ:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
            passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
            [[ "$line" =~ \((.*)\)$ ]] && names+=("${BASH_REMATCH[1]}")
        else
            # The guest ended without its closing line (it did not boot, or timed out): all of it failed.
            failed=$((failed + $(tr ',' '\n' <<<"${groups[g]}" | wc -l))) names+=("${groups[g]//,/ }")
        fi
    done
    echo
    echo "real BlueZ: $passed passed, $failed failed${names[*]:+ (${names[*]})}"
    ((failed == 0)) || status=1
fi
if ((status != 0)) && [[ -n "$logs" ]]; then
    echo "test-ble-bluez: the guests' logs (bluetoothd, btvirt, dbus, console): $logs"
elif [[ -n "$own_logs" ]]; then
    rm -rf "$logs"
fi
exit "$status"
