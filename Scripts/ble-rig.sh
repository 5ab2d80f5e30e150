#!/usr/bin/env bash
# The Bluetooth LE test rig: a private D-Bus daemon standing in for the system bus, and bluezoo (a
# BlueZ stand-in on PyPI) with three adapters, hci0 (00:00:5E:00:53:00), hci1 (00:00:5E:00:53:01) and
# hci2 (00:00:5E:00:53:02; a second peripheral address: smp-sim's firmware loader with an identity of its own).
# Real bluetoothd cannot run without Bluetooth hardware; see TESTING.md in the project notes.
#
#   ble-rig.sh start [--no-bluez] [--owner PID] [DIR]
#       Starts a rig in DIR (default: a new directory under $SMP_BLE_RIG_ROOT or /tmp) and prints
#       `dir DIR` and `address unix:path=DIR/bus` when org.bluez (or, with --no-bluez, the bus) is
#       ready. With --owner, the rig stops itself when process PID exits (so a crashed test run
#       leaves nothing behind).
#   ble-rig.sh stop DIR          Stops the rig in DIR and removes DIR.
#   ble-rig.sh stop-all ROOT     Stops every rig under ROOT and removes ROOT.
#   ble-rig.sh run [--no-bluez] -- COMMAND...
#       Runs COMMAND with DBUS_SYSTEM_BUS_ADDRESS pointing at a fresh rig, then stops the rig.
#
# bluezoo comes from the test venv ($SMP_TEST_VENV, default <repo>/.venv; Scripts/setup.sh makes it).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SMP_TEST_VENV:-$repo/.venv}"
adapters=(00:00:5E:00:53:00 00:00:5E:00:53:01 00:00:5E:00:53:02)

# Descriptors inherited from the caller must not live on in the daemons: a caller that watches a
# socket or pipe for this script's exit (Foundation's Process does) would wait as long as they run.
# Called in each daemon's subshell just before it starts.
close_inherited_fds() {
    local fd
    for fd in $(ls "/proc/$BASHPID/fd" 2>/dev/null); do
        ((fd > 2)) && { eval "exec $fd>&-"; } 2>/dev/null
    done
    return 0
}

die() { printf 'ble-rig: %s\n' "$*" >&2; exit 1; }

# Whether process $1 runs (a zombie does not: nobody may reap our orphans in a container).
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat:0:1}" != Z ]]
}

kill_pidfile() {
    local file="$1" pid
    [[ -f "$file" ]] || return 0
    pid="$(cat "$file")"
    if [[ -n "$pid" ]] && alive "$pid"; then
        # SIGKILL: nothing here has state worth saving, and a caller that ignores SIGTERM (test
        # runners may) passes that on to every daemon started from it.
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 100); do alive "$pid" || break; sleep 0.01; done
    fi
    rm -f "$file"
}

stop_rig() {
    local dir="$1"
    [[ -d "$dir" ]] || return 0
    # The watcher first, so that it does not race us; then bluezoo, then the bus.
    kill_pidfile "$dir/watcher.pid"
    kill_pidfile "$dir/bluezoo.pid"
    kill_pidfile "$dir/dbus.pid"
    rm -rf "$dir"
}

start_rig() {
    local bluez=1 owner="" dir=""
    while (($#)); do
        case "$1" in
            --no-bluez) bluez=0 ;;
            --owner) owner="$2"; shift ;;
            *) dir="$1" ;;
        esac
        shift
    done
    command -v dbus-daemon >/dev/null || die "dbus-daemon is not installed; run Scripts/setup.sh (apt: dbus-daemon)"
    if ((bluez)) && [[ ! -x "$venv/bin/bluezoo" ]]; then
        die "bluezoo is not installed in $venv; run Scripts/setup.sh (pip: bluezoo==1.0.2)"
    fi
    if [[ -z "$dir" ]]; then
        local root="${SMP_BLE_RIG_ROOT:-${TMPDIR:-/tmp}}"
        mkdir -p "$root"
        dir="$(mktemp -d "$root/rig.XXXXXX")"
    fi
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    local address="unix:path=$dir/bus"

    # Not `--fork`: the pid must be ours to stop. "Failed to set fd limit" on stderr is harmless.
    (
        close_inherited_fds
        exec dbus-daemon --session --nofork --nopidfile --address="$address" --print-address=3 \
            3>"$dir/address" >/dev/null 2>"$dir/dbus.log" </dev/null
    ) &
    echo $! >"$dir/dbus.pid"
    for _ in $(seq 250); do
        [[ -s "$dir/address" ]] && break
        alive "$(cat "$dir/dbus.pid")" || { cat "$dir/dbus.log" >&2; stop_rig "$dir"; die "dbus-daemon exited"; }
        sleep 0.02
    done
    [[ -s "$dir/address" ]] || { stop_rig "$dir"; die "dbus-daemon did not start within 5 s"; }

    if ((bluez)); then
        (
            close_inherited_fds
            export DBUS_SYSTEM_BUS_ADDRESS="$address"
            exec "$venv/bin/bluezoo" -q -a "${adapters[0]}" -a "${adapters[1]}" -a "${adapters[2]}" --auto-enable --scan-interval 1 \
                >"$dir/bluezoo.log" 2>&1 </dev/null
        ) &
        echo $! >"$dir/bluezoo.pid"
        local ready=0
        for _ in $(seq 300); do
            # Ready when its objects answer with every adapter: bluezoo takes the name org.bluez before
            # it serves its object manager (a test that asked in between got "Unknown object '/'").
            if DBUS_SYSTEM_BUS_ADDRESS="$address" dbus-send --system --print-reply --dest=org.bluez / \
                org.freedesktop.DBus.ObjectManager.GetManagedObjects 2>/dev/null | grep -q "object path \"/org/bluez/hci2\""; then
                ready=1
                break
            fi
            alive "$(cat "$dir/bluezoo.pid")" || break
            sleep 0.05
        done
        if ((!ready)); then
            cat "$dir/bluezoo.log" >&2
            stop_rig "$dir"
            die "bluezoo did not take org.bluez within 15 s"
        fi
    fi

    if [[ -n "$owner" ]]; then
        # Stops the rig when its owner exits, whatever the reason.
        (
            close_inherited_fds
            trap '' HUP
            while alive "$owner" && [[ -d "$dir" ]]; do sleep 0.5; done
            rm -f "$dir/watcher.pid"
            stop_rig "$dir"
        ) </dev/null >/dev/null 2>&1 &
        echo $! >"$dir/watcher.pid"
    fi
    printf 'dir %s\naddress %s\n' "$dir" "$address"
}

command="${1:-}"
shift || true
case "$command" in
    start) start_rig "$@" ;;
    stop) [[ -n "${1:-}" ]] || die "usage: ble-rig.sh stop DIR"; stop_rig "$1" ;;
    stop-all)
        [[ -n "${1:-}" ]] || die "usage: ble-rig.sh stop-all ROOT"
        [[ -d "$1" ]] || exit 0
        for d in "$1"/*/; do [[ -d "$d" ]] && stop_rig "${d%/}"; done
        rm -rf "$1"
        ;;
    run)
        options=()
        while (($#)) && [[ "$1" != "--" ]]; do options+=("$1"); shift; done
        [[ "${1:-}" == "--" ]] && shift
        (($#)) || die "usage: ble-rig.sh run [--no-bluez] -- COMMAND..."
        out="$(start_rig "${options[@]}" --owner $$)"
        rig_dir="$(sed -n 's/^dir //p' <<<"$out")"
        trap 'stop_rig "$rig_dir"' EXIT
        export DBUS_SYSTEM_BUS_ADDRESS="$(sed -n 's/^address //p' <<<"$out")"
        "$@"
        ;;
    *)
        sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 64
        ;;
esac
