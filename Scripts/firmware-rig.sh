#!/usr/bin/env bash
# The real-firmware rig: starts one of the unmodified Zephyr 4.4.0 / MCUboot builds of the shared
# firmware directory (see its README.md) in its own temporary working directory, waits until it answers
# an SMP echo (Scripts/firmware_probe.py: standard-library Python, independent of `smp`), prints where
# to reach it, and stops it again.
#
#   firmware-rig.sh list
#       The builds this script knows, and whether their files are present.
#   firmware-rig.sh start BUILD [--owner PID] [--dir DIR] [--ready-timeout S]
#       Starts BUILD and prints `dir DIR`, `device URI` (for `smp --device`), `address ...` (a pty path
#       or HOST:PORT) and `pid PID` once the device answers. With --owner, the rig stops itself when
#       process PID exits (so a test run that crashes or is killed leaves nothing behind).
#   firmware-rig.sh stop DIR          Stops the rig in DIR (SIGTERM, then SIGKILL) and removes DIR.
#   firmware-rig.sh stop-all ROOT     Stops every rig under ROOT and removes ROOT.
#   firmware-rig.sh run BUILD -- COMMAND...
#       Runs COMMAND with SMP_DEVICE set to a fresh rig's device, then stops the rig.
#
# BUILD is one of
#   serial          native_sim_serial.exe: console-framed SMP on a pty, 2 x 128 B line buffers, 4 x 384 B
#   serial-fs       native_sim_serial_fs.exe: the same with 512 B lines and 4 x 1024 B buffers
#   udp             native_sim_udp.exe: SMP over UDP on 127.0.0.1:1337 (fixed port; one at a time:
#                   a busy port is waited for, up to SMP_FIRMWARE_UDP_WAIT seconds, default 300)
#   mps2-recovery   QEMU mps2-an385: MCUboot in serial recovery, no application
#   mps2            QEMU mps2-an385: MCUboot with its signed application loaded in RAM
#   m0              QEMU microbit (Cortex-M0): MCUboot (swap) + application, the merged hex
# The firmware directory is $SMP_FIRMWARE_DIR, else ../shared/firmware beside the repository.
# Rigs are made under $SMP_FIRMWARE_RIG_ROOT (default $TMPDIR or /tmp). Needs (Scripts/setup.sh):
# libc6-i386 lib32gcc-s1 for native_sim, qemu-system-arm socat for QEMU, python3.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
firmware="${SMP_FIRMWARE_DIR:-$repo/../shared/firmware}"
prefix="zephyr_4.4.0_smp_server_0eae053d_"
probe="$repo/Scripts/firmware_probe.py"
python=/usr/bin/python3
[[ -x "$python" ]] || python="$(command -v python3)"
udp_port=1337

die() { printf 'firmware-rig: %s\n' "$*" >&2; exit 1; }
note() { printf 'firmware-rig: %s\n' "$*" >&2; }

# The files a build needs, one per line.
build_files() {
    case "$1" in
        serial) echo "${prefix}native_sim_serial.exe" ;;
        serial-fs) echo "${prefix}native_sim_serial_fs.exe" ;;
        udp) echo "${prefix}native_sim_udp.exe" ;;
        mps2-recovery) echo "${prefix}mps2_an385_serial_recovery_buf1024.hex" ;;
        mps2) printf '%s\n' "${prefix}mps2_an385_serial_recovery_buf1024.hex" "${prefix}mps2_an385_serial_recovery_buf1024.signed.bin" ;;
        m0) echo "${prefix}qemu_cortex_m0_serial.merged.hex" ;;
        *) return 1 ;;
    esac
}
builds=(serial serial-fs udp mps2-recovery mps2 m0)

# Descriptors inherited from the caller must not live on in the device processes: a caller that
# watches a pipe or socket for this script's exit (Foundation's Process does) would otherwise wait
# for as long as the device runs. Called in each daemon's subshell just before it starts.
close_inherited_fds() {
    local fd
    for fd in $(ls "/proc/$BASHPID/fd" 2>/dev/null); do
        ((fd > 2)) && { eval "exec $fd>&-"; } 2>/dev/null
    done
    return 0
}

# Whether process $1 runs (a zombie does not: nobody may reap our orphans in a container).
alive() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    stat="${stat##*) }"
    [[ "${stat:0:1}" != Z ]]
}

# Starts a command as the leader of its own process group (setsid without a fork: the subshell is not
# a group leader), output to $2, in directory $1; records its pid in $3.
spawn() {
    local dir="$1" log="$2" pidfile="$3"
    shift 3
    : >"$log"
    (
        close_inherited_fds
        cd "$dir"
        exec setsid "$@" >"$log" 2>&1 </dev/null
    ) &
    echo $! >"$pidfile"
}

# Stops the process group recorded in a pid file: SIGTERM, up to 3 s, then SIGKILL, up to 3 s.
kill_pidfile() {
    local file="$1" pid
    [[ -f "$file" ]] || return 0
    pid="$(cat "$file")"
    if [[ -n "$pid" ]] && alive "$pid"; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 300); do alive "$pid" || break; sleep 0.01; done
        if alive "$pid"; then
            kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
            for _ in $(seq 300); do alive "$pid" || break; sleep 0.01; done
        fi
    fi
    # Anything else left in the group (nothing should be).
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$file"
}

stop_rig() {
    local dir="$1"
    [[ -d "$dir" && -f "$dir/build" ]] || { [[ -d "$dir" ]] && rm -rf "$dir"; return 0; }
    # The watcher first, so that it does not race us; then the bridge, then the device.
    kill_pidfile "$dir/watcher.pid"
    kill_pidfile "$dir/socat.pid"
    kill_pidfile "$dir/device.pid"
    rm -rf "$dir"
}

free_tcp_port() {
    "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The pids holding UDP port $udp_port, space-separated (empty when the port is free).
udp_port_holders() {
    { ss -H -uapn "sport = :$udp_port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | tr '\n' ' '; } || true
}

# Whether the rig being started is still wanted: its owner (if any) runs and nobody stopped it.
still_wanted() {
    [[ -f "$dir/build" ]] && { [[ -z "$owner" ]] || alive "$owner"; }
}

udp_port_busy() {
    [[ -n "$(ss -H -uan "sport = :$udp_port" 2>/dev/null)" ]]
}

# Waits (up to SMP_FIRMWARE_UDP_WAIT s) until UDP port 1337 is free; other engineers' rigs, or a
# native_sim_udp someone started by hand, may hold it.
wait_for_udp_port() {
    local limit="${SMP_FIRMWARE_UDP_WAIT:-300}" waited=0 said=0
    command -v ss >/dev/null || die "ss (iproute2) is needed to see who holds UDP port $udp_port"
    while udp_port_busy; do
        still_wanted || die "stopped while waiting for UDP port $udp_port (the owner exited or the rig was stopped)"
        if ((waited >= limit)); then
            die "UDP port $udp_port is still in use after ${limit} s (pids: $(udp_port_holders)); native_sim_udp binds that fixed port, so only one can run at a time. Stop the other one or raise SMP_FIRMWARE_UDP_WAIT."
        fi
        if ((!said)); then
            note "UDP port $udp_port is in use (pids: $(udp_port_holders)); native_sim_udp can only run one at a time: waiting up to ${limit} s for it to become free"
            said=1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

# Waits until the device in $dir answers an echo at $address (a pty path or HOST:PORT); $kind is
# --serial or --udp. With $banner, nothing is sent before the console has shown it. Fails when the device
# (or the bridge) exits, or after $ready_timeout s.
wait_ready() {
    local dir="$1" kind="$2" address="$3" banner="${4:-}" deadline=$((SECONDS + ready_timeout))
    if [[ -n "$banner" ]] && ! "$python" "$probe" --serial "$address" --await "$banner" --timeout "$ready_timeout"; then
        note "the device did not boot within ${ready_timeout} s"
        return 1
    fi
    while ((SECONDS < deadline)); do
        still_wanted || { note "stopped while waiting for the device to answer"; return 1; }
        alive "$(cat "$dir/device.pid")" || { tail -20 "$dir/device.log" >&2; return 1; }
        if [[ -f "$dir/socat.pid" ]] && ! alive "$(cat "$dir/socat.pid")"; then
            tail -5 "$dir/socat.log" >&2
            return 1
        fi
        "$python" "$probe" "$kind" "$address" --timeout 1 && return 0
        sleep 0.1
    done
    note "no answer to an SMP echo within ${ready_timeout} s; the device's log ends:"
    tail -20 "$dir/device.log" >&2
    return 1
}

start_rig() {
    local build="" owner="" dir="" ready_timeout=120 banner=""
    while (($#)); do
        case "$1" in
            --owner) owner="$2"; shift ;;
            --dir) dir="$2"; shift ;;
            --ready-timeout) ready_timeout="$2"; shift ;;
            -*) die "unknown option $1" ;;
            *) [[ -z "$build" ]] || die "one BUILD only"; build="$1" ;;
        esac
        shift
    done
    [[ -n "$build" ]] || die "usage: firmware-rig.sh start BUILD (one of: ${builds[*]})"
    local files
    files="$(build_files "$build")" || die "unknown build '$build' (one of: ${builds[*]})"
    [[ -d "$firmware" ]] || die "no firmware directory at $firmware (set SMP_FIRMWARE_DIR)"
    local file
    while read -r file; do
        [[ -f "$firmware/$file" ]] || die "$firmware/$file is missing"
    done <<<"$files"
    firmware="$(cd "$firmware" && pwd)"
    case "$build" in
        serial | serial-fs | udp)
            [[ -e /lib/ld-linux.so.2 ]] || die "the native_sim builds are 32-bit: install libc6-i386 and lib32gcc-s1 (Scripts/setup.sh)"
            ;;
        *)
            command -v qemu-system-arm >/dev/null || die "qemu-system-arm is not installed (Scripts/setup.sh; apt: qemu-system-arm)"
            command -v socat >/dev/null || die "socat is not installed (Scripts/setup.sh; apt: socat)"
            ;;
    esac

    if [[ -z "$dir" ]]; then
        local root="${SMP_FIRMWARE_RIG_ROOT:-${TMPDIR:-/tmp}}"
        mkdir -p "$root"
        dir="$(mktemp -d "$root/fw-$build.XXXXXX")"
    fi
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    echo "$build" >"$dir/build"
    mkdir -p "$dir/work"  # the device's working directory: flash.bin (LittleFS behind /lfs1) lives here
    # Whatever ends this script before the device is ready (an error, die, a signal) stops the rig.
    trap 'note "start failed (line $LINENO)"; exit 1' ERR
    trap 'exit 1' INT TERM
    trap 'stop_rig "$dir"' EXIT

    # The watcher first: if this script is killed while the device starts, the device still goes.
    if [[ -n "$owner" ]]; then
        (
            close_inherited_fds
            trap '' HUP
            while alive "$owner" && [[ -f "$dir/build" ]]; do sleep 0.5; done
            rm -f "$dir/watcher.pid"
            stop_rig "$dir"
        ) </dev/null >/dev/null 2>&1 &
        echo $! >"$dir/watcher.pid"
    fi

    local device="" address="" kind=""
    case "$build" in
        serial | serial-fs)
            spawn "$dir/work" "$dir/device.log" "$dir/device.pid" "$firmware/$files"
            local pty=""
            for _ in $(seq 500); do
                pty="$(sed -n 's/.*uart connected to pseudotty: \(\/dev\/pts\/[0-9]*\).*/\1/p' "$dir/device.log" 2>/dev/null | head -1 || true)"
                [[ -n "$pty" ]] && break
                alive "$(cat "$dir/device.pid")" || break
                sleep 0.01
            done
            [[ -n "$pty" ]] || { cat "$dir/device.log" >&2; stop_rig "$dir"; die "$build printed no pty"; }
            ln -s "$pty" "$dir/tty"
            kind=--serial address="$pty" device="serial:$pty"
            ;;
        udp)
            # Whoever answers on the port must be ours: another process may bind it between our check
            # and our device's bind. Then ours goes, and we wait for the port again (5 tries).
            local holders="" pid attempt
            for attempt in 1 2 3 4 5; do
                wait_for_udp_port
                rm -rf "$dir/work" && mkdir -p "$dir/work"
                spawn "$dir/work" "$dir/device.log" "$dir/device.pid" "$firmware/$files"
                pid="$(cat "$dir/device.pid")"
                for _ in $(seq 300); do
                    holders="$(udp_port_holders)"
                    [[ -n "$holders" ]] && break
                    alive "$pid" || break
                    sleep 0.01
                done
                # Ours alone: Linux lets two sockets with SO_REUSEADDR share a UDP port, and then only one gets the datagrams.
                [[ "${holders% }" == "$pid" ]] && break
                note "UDP port $udp_port was taken by another process (pids: $holders) while $build started (try $attempt of 5)"
                kill_pidfile "$dir/device.pid"
                ((attempt < 5)) || die "UDP port $udp_port kept being taken by other processes; try again later"
            done
            kind=--udp address="127.0.0.1:$udp_port" device="udp:127.0.0.1:$udp_port"
            ;;
        mps2-recovery | mps2 | m0)
            local port machine wait=off
            port="$(free_tcp_port)"
            # The Cortex-M0 build's application never reads its UART again when a byte reached the UART
            # while it booted (a frame in its first ~0.1 s under QEMU, and much later on a loaded
            # machine: every echo after it goes unanswered). So QEMU starts it only once socat is
            # connected (wait=on: nothing it prints is lost), and nothing is sent before Zephyr's boot
            # banner.
            [[ "$build" == m0 ]] && wait=on banner="*** Booting Zephyr"
            local qemu=(qemu-system-arm -nographic -monitor none
                -chardev "socket,id=con,host=127.0.0.1,port=$port,server=on,wait=$wait" -serial chardev:con)
            if [[ "$build" == m0 ]]; then
                qemu+=(-cpu cortex-m0 -machine microbit -device "loader,file=$firmware/$files")
            else
                qemu+=(-cpu cortex-m3 -machine mps2-an385 -serial null
                    -device "loader,file=$firmware/${prefix}mps2_an385_serial_recovery_buf1024.hex")
                [[ "$build" == mps2 ]] &&
                    qemu+=(-device "loader,file=$firmware/${prefix}mps2_an385_serial_recovery_buf1024.signed.bin,addr=0x20050000")
            fi
            spawn "$dir/work" "$dir/device.log" "$dir/device.pid" "${qemu[@]}"
            # The TCP chardev listens once QEMU is up; socat turns it into a pty ($dir/tty).
            for _ in $(seq 500); do
                ss -H -tln "sport = :$port" 2>/dev/null | grep -q . && break
                alive "$(cat "$dir/device.pid")" || break
                sleep 0.01
            done
            ss -H -tln "sport = :$port" 2>/dev/null | grep -q . || {
                cat "$dir/device.log" >&2; stop_rig "$dir"; die "QEMU did not open its serial port $port"; }
            spawn "$dir/work" "$dir/socat.log" "$dir/socat.pid" socat "pty,link=$dir/tty,raw,echo=0" "tcp:127.0.0.1:$port"
            for _ in $(seq 500); do
                [[ -L "$dir/tty" ]] && break
                alive "$(cat "$dir/socat.pid")" || break
                sleep 0.01
            done
            [[ -L "$dir/tty" ]] || { cat "$dir/socat.log" >&2; stop_rig "$dir"; die "socat made no pty"; }
            kind=--serial address="$dir/tty" device="serial:$dir/tty"
            ;;
    esac

    if ! wait_ready "$dir" "$kind" "$address" "$banner"; then
        stop_rig "$dir"
        die "$build did not answer an SMP echo"
    fi
    trap - ERR INT TERM EXIT
    printf 'dir %s\ndevice %s\naddress %s\npid %s\nlog %s\n' "$dir" "$device" "$address" "$(cat "$dir/device.pid")" "$dir/device.log"
}

command="${1:-}"
shift || true
case "$command" in
    list)
        for build in "${builds[@]}"; do
            state=present
            while read -r file; do [[ -f "$firmware/$file" ]] || state="missing ($firmware/$file)"; done <<<"$(build_files "$build")"
            printf '%-14s %s\n' "$build" "$state"
        done
        ;;
    start) start_rig "$@" ;;
    stop) [[ -n "${1:-}" ]] || die "usage: firmware-rig.sh stop DIR"; stop_rig "$1" ;;
    stop-all)
        [[ -n "${1:-}" ]] || die "usage: firmware-rig.sh stop-all ROOT"
        [[ -d "$1" ]] || exit 0
        for d in "$1"/*/; do [[ -d "$d" ]] && stop_rig "${d%/}"; done
        rm -rf "$1"
        ;;
    run)
        build="${1:-}"
        shift || true
        [[ "${1:-}" == "--" ]] && shift
        [[ -n "$build" ]] && (($#)) || die "usage: firmware-rig.sh run BUILD -- COMMAND..."
        out="$(start_rig "$build" --owner $$)"
        rig_dir="$(sed -n 's/^dir //p' <<<"$out")"
        trap 'stop_rig "$rig_dir"' EXIT
        printf '%s\n' "$out" >&2
        export SMP_DEVICE="$(sed -n 's/^device //p' <<<"$out")"
        "$@"
        ;;
    *)
        sed -n '2,31p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 64
        ;;
esac
