#!/usr/bin/env bash
# ble-vm.sh: run a command against REAL BlueZ (bluetoothd) with virtual LE controllers, on a machine
# whose kernel has no Bluetooth (containers, CI). It boots Debian's stock kernel (linux-image-amd64)
# under QEMU with this machine's own root file system shared read-only into the guest (9p), and in the
# guest loads hci_vhci, starts a private system dbus-daemon, btvirt (bluez-test-tools: N linked LE
# controllers hci0..hciN-1 inside one emulator, so they see each other's advertising and connect) and
# bluetoothd, powers the adapters on, then runs the command and powers the guest off.
#
#   ble-vm.sh [options] [--] COMMAND [ARG...]
#
# The command runs as root in the guest, in the same directory, with this shell's exported environment
# plus:
#   SMP_BLE_CLIENT_ADAPTER=hci0   SMP_BLE_CLIENT_ADDRESS=<its address>    (for the central / smp)
#   SMP_BLE_DEVICE_ADAPTER=hci1   SMP_BLE_DEVICE_ADDRESS=<its address>    (for the peripheral / smp-sim)
#   SMP_BLE_LOADER_ADAPTER=hci2   SMP_BLE_LOADER_ADDRESS=<its address>    (with --controllers 3 or more: a
#       second peripheral, e.g. smp-sim --ble-loader-adapter, whose firmware loader comes back as
#       another peripheral at another address)
#   SMP_BLE_ADAPTERS="hci0 hci1 ..."  BLE_VM_LOG_DIR=<guest logs>  BLE_VM=1
#   DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket
#   BLE_VM_RESTART_BLUETOOTHD=<command>: `$BLE_VM_RESTART_BLUETOOTHD channels=1 mtu=247` restarts
#       bluetoothd with those [GATT] settings (Channels: ATT plus EATT bearers; ExchangeMTU: the ATT MTU
#       both ends offer) and no remembered devices, so that one boot serves several link configurations.
# Its stdout and stderr go to this script's stdout and stderr; its exit status is this script's.
# Other exit statuses: 124 timeout, 125 the VM or BlueZ did not come up (the guest's logs are printed),
# 64 usage.
#
# Options:
#   --cpus N          vCPUs (default 2)                --mem MIB      guest RAM (default 2048)
#   --controllers N   virtual LE controllers (default 2)
#   --rw PATH         share PATH writable into the guest (repeatable; `/` makes the whole root writable).
#                     The current directory is shared writable unless --ro; everything else is read-only,
#                     except that /tmp, /var/tmp and $HOME take writes in the guest's memory (an overlay
#                     over the host's contents, dropped at the end), and /run and /var/lib/bluetooth
#                     start empty.
#   --ro              do not share the current directory writable
#   --gatt-channels N bluetoothd's [GATT] Channels (default 3: ATT plus 2 EATT bearers when both ends
#                     support EATT, as two bluetoothd adapters do; 1: plain ATT, like most Zephyr devices)
#   --main-conf FILE  use FILE as bluetoothd's main.conf (instead of /etc/bluetooth/main.conf)
#   --btmon           record an HCI trace (btmon) in the guest logs: hci.btsnoop, and btmon.txt decoded
#                     after the run (btmon 5.66 may stop part way with a crash on EATT traffic)
#   --debug           bluetoothd -d (debug log)
#   --logs DIR        copy the guest's logs (console, dbus, bluetoothd, btvirt, btmon) to DIR at the end
#   --timeout S       kill the VM after S seconds (default 3600; exit 124)
#   --accel A         kvm, tcg or auto (default): kvm when /dev/kvm works for a stock kernel, else tcg
#                     (software emulation: works anywhere, several times slower)
#   --kernel PATH     kernel image (default: the newest /boot/vmlinuz-*-amd64 with its modules)
#   --no-install      never apt-get install missing packages
#   --keep            keep the work directory (printed) instead of removing it
#   -q                no progress lines on stderr
#
# Needs root (apt-get, 9p passthrough). Installs if missing (apt-get, non-interactive): qemu-system-x86,
# linux-image-amd64, bluez, bluez-test-tools, busybox-static, kmod, cpio, dbus-daemon, xz-utils.
# Writes only under a new directory in ${TMPDIR:-/tmp} (removed at the end), plus what the command itself
# writes in the writable paths. Works without a TTY (stdin is not used; the command gets /dev/null).
#
# Examples:
#   ble-vm.sh -- bluetoothctl list
#   ble-vm.sh --btmon --logs /tmp/blelogs -- bash -c 'smp-sim --ble $SMP_BLE_DEVICE_ADAPTER & sleep 5;
#       smp ble scan --adapter $SMP_BLE_CLIENT_ADAPTER'
#
# Timing (tcg, 2 vCPUs on a busy 2-core host): BlueZ ready 19-60 s after start, shutdown ~4 s; the
# emulated link has no air time, so transfer rates measure the CPU, not Bluetooth.
# Found with BlueZ 5.66 on both ends (see the SMP client's notes): the peripheral's bluetoothd drops
# ATT writes with a value over 510 bytes (its length check counts the handle), and the central's
# bluetoothd cuts AcquireWrite socket writes to 512 bytes; AcquireWrite reports the ATT MTU (517).
# A Zephyr native_sim BLE build can use a controller through the HCI user channel
# (--bt-dev=hci1) once bluetoothd lets it go: `btmgmt --index 1 power off` first (else EBUSY).
#
# Note: some virtual machines expose /dev/kvm through PVM (kvm_pvm module, "pagetable-based VM"), which runs only
# PVM-enabled guest kernels: a stock kernel hangs in its decompressor. --accel auto uses tcg there.
set -uo pipefail

self="${BASH_SOURCE[0]}"

# ---------------------------------------------------------------------------------------------------
# Guest side, shared by PID 1 and by the restart command the guest's command may call.
# ---------------------------------------------------------------------------------------------------
bluetoothd_path() {
    local b=/usr/libexec/bluetooth/bluetoothd
    [[ -x "$b" ]] || b=/usr/lib/bluetooth/bluetoothd
    echo "$b"
}

# Starts bluetoothd (with $dir/main.conf when there is one) and powers every controller's adapter on.
# Sets adapters=(hci0 ...) and addresses=(...), or fail="why".
bluez_up() {
    local bluetoothd n a ok end
    bluetoothd="$(bluetoothd_path)"
    # -n: stay in the foreground and log to stderr. hostname asks systemd-hostnamed (absent); sap
    # (SIM access over RFCOMM) fails on these LE-only controllers.
    local conf=()
    [[ -f "$dir/main.conf" ]] && conf=(-f "$dir/main.conf")
    "$bluetoothd" -n ${debug:+-d} "${conf[@]}" --noplugin=hostname,sap >>"$logs/bluetoothd.log" 2>&1 </dev/null &
    echo $! >/run/ble-vm/bluetoothd.pid
    adapters=() addresses=()
    for ((n = 0; n < controllers; n++)); do adapters+=("hci$n"); done
    wait_for 60 bash -c 'dbus-send --system --print-reply=literal --dest=org.freedesktop.DBus / \
        org.freedesktop.DBus.NameHasOwner string:org.bluez 2>/dev/null | grep -q true' ||
        { fail="bluetoothd did not take org.bluez"; return; }
    for a in "${adapters[@]}"; do
        ok=""
        end=$((SECONDS + 60))
        while ((SECONDS < end)); do
            dbus-send --system --print-reply --dest=org.bluez "/org/bluez/$a" org.freedesktop.DBus.Properties.Set \
                string:org.bluez.Adapter1 string:Powered variant:boolean:true >/dev/null 2>&1 &&
                dbus-send --system --print-reply=literal --dest=org.bluez "/org/bluez/$a" \
                    org.freedesktop.DBus.Properties.Get string:org.bluez.Adapter1 string:Powered 2>/dev/null |
                grep -q true && { ok=1; break; }
            kill -0 "$(cat /run/ble-vm/bluetoothd.pid)" 2>/dev/null || break
            sleep 0.2
        done
        [[ -n "$ok" ]] || { fail="bluetoothd did not power on $a"; return; }
        log "$a powered"
        addresses+=("$(dbus-send --system --print-reply=literal --dest=org.bluez "/org/bluez/$a" \
            org.freedesktop.DBus.Properties.Get string:org.bluez.Adapter1 string:Address 2>/dev/null |
            awk '{ print $NF }')")
    done
}

log() { echo "$(cut -d' ' -f1 /proc/uptime) $*" >>"$logs/guest.log"; }
# Waits up to $1 seconds for the command $2... to succeed.
wait_for() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do ((SECONDS < end)) || return 1; sleep 0.1; done
}
stop_pid() {
    local pid
    pid="$(cat "/run/ble-vm/$1.pid" 2>/dev/null)" || return 0
    kill -TERM "$pid" 2>/dev/null
    wait_for 3 bash -c "! kill -0 $pid 2>/dev/null"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rm -f "/run/ble-vm/$1.pid"
}

# `--guest-restart-bluetoothd DIR [channels=N] [mtu=N]`, run by the guest's command through
# $BLE_VM_RESTART_BLUETOOTHD: stops bluetoothd, forgets every device it knew (/var/lib/bluetooth),
# writes main.conf's [GATT] Channels (ATT plus EATT bearers) and ExchangeMTU (the ATT MTU both ends
# offer; BlueZ's default 517), and starts it again with every adapter powered. Exit 0 when BlueZ is
# back, 125 otherwise.
guest_restart_bluetoothd() {
    dir="$1"
    shift
    # shellcheck disable=SC1091
    source "$dir/guest.conf"
    logs="$dir/logs"
    local channels="" mtu="" arg
    for arg in "$@"; do
        case "$arg" in
            channels=[1-5]) channels="${arg#channels=}" ;;
            mtu=*) mtu="${arg#mtu=}"; [[ "$mtu" =~ ^[0-9]+$ ]] && ((mtu >= 23 && mtu <= 517)) ||
                { echo "ble-vm: mtu takes 23..517" >&2; return 64; } ;;
            *) echo "ble-vm: --guest-restart-bluetoothd takes channels=1..5 and mtu=23..517, not $arg" >&2; return 64 ;;
        esac
    done
    log "restarting bluetoothd (channels ${channels:-default}, mtu ${mtu:-default})"
    stop_pid bluetoothd
    rm -rf /var/lib/bluetooth/*
    { echo "[GATT]"; [[ -n "$channels" ]] && echo "Channels = $channels"; [[ -n "$mtu" ]] && echo "ExchangeMTU = $mtu"; } >"$dir/main.conf"
    local fail=""
    bluez_up
    if [[ -n "$fail" ]]; then
        echo "ble-vm: $fail" >&2
        return 125
    fi
    log "bluetoothd back: ${adapters[*]}"
    return 0
}

# ---------------------------------------------------------------------------------------------------
# Guest side: PID 1 of the VM (started by the initramfs with `--guest-init DIR`).
# ---------------------------------------------------------------------------------------------------
guest_init() {
    local dir="$1"
    set +o pipefail # `producer | grep -q` must not fail when grep stops reading early
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    export HOME=/root LANG=C.UTF-8
    # shellcheck disable=SC1091
    source "$dir/guest.conf" # rw_paths=(...) rw_tags=(...) controllers= btmon= debug= rw_root= host_home=
    logs="$dir/logs" # on the writable work share: the host sees them while the guest runs

    mount -t proc proc /proc
    mount -t sysfs sysfs /sys
    mount -t devtmpfs devtmpfs /dev 2>/dev/null
    mkdir -p /dev/pts /dev/shm
    mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
    mount -t tmpfs -o mode=1777 tmpfs /dev/shm
    # Empty: /run (the guest's own bus and daemons) and /var/lib/bluetooth (no pairings, no cache).
    # Host contents visible, writes kept in the guest's memory (overlay): /tmp, /var/tmp and $HOME.
    mount -t tmpfs -o mode=755 tmpfs /run
    mount -t tmpfs -o mode=755 tmpfs /var/lib/bluetooth
    mkdir -p /run/ble-vm /run/dbus /run/lock
    modprobe overlay 2>/dev/null
    local d o
    for d in /tmp /var/tmp "${host_home:-/root}"; do
        [[ -d "$d" && "$d" != / ]] || continue
        o="/run/ble-vm/overlay/$(echo "$d" | tr / _)"
        mkdir -p "$o/upper" "$o/work"
        chmod --reference="$d" "$o/upper" 2>/dev/null
        mount -t overlay overlay -o "lowerdir=$d,upperdir=$o/upper,workdir=$o/work" "$d" 2>/dev/null ||
            mount -t tmpfs -o mode=1777 tmpfs "$d"
    done
    # Writable shares, parents before children (the list is sorted by the host).
    local i
    for i in "${!rw_paths[@]}"; do
        mkdir -p "${rw_paths[$i]}" 2>/dev/null
        mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none "${rw_tags[$i]}" "${rw_paths[$i]}" ||
            echo "ble-vm: cannot mount ${rw_paths[$i]} writable" >&2
    done
    mkdir -p "$logs"
    hostname ble-vm 2>/dev/null || echo ble-vm >/proc/sys/kernel/hostname
    ip link set lo up 2>/dev/null

    local fail=""
    # A controller is ready once the kernel read its address; failed when an init command timed out.
    controllers_ready() {
        local n
        for ((n = 0; n < controllers; n++)); do
            hciconfig "hci$n" 2>/dev/null | grep -q 'BD Address: [0-9A-F:]*[1-9A-F]' || return 1
        done
    }
    controllers_settled() { controllers_ready || dmesg | tail -n "+$((dmesg_base + 1))" | grep -q 'hci[0-9]*: Opcode .* failed'; }
    log "init"
    modprobe virtio_rng 2>>"$logs/guest.log"
    modprobe hci_vhci 2>>"$logs/guest.log" || fail="modprobe hci_vhci failed"

    # The system bus, with Debian's system bus policy (bluetooth.conf lets root own org.bluez).
    if [[ -z "$fail" ]]; then
        dbus-daemon --system --nofork --nopidfile --nosyslog >"$logs/dbus.log" 2>&1 </dev/null &
        echo $! >/run/ble-vm/dbus.pid
        wait_for 30 test -S /run/dbus/system_bus_socket || fail="dbus-daemon did not start"
        log "dbus-daemon up"
    fi
    if [[ -z "$fail" && -n "$btmon" ]]; then
        btmon -w "$logs/hci.btsnoop" >/dev/null 2>"$logs/btmon.err" </dev/null &
        echo $! >/run/ble-vm/btmon.pid
        sleep 0.5
    fi
    # The kernel resets each controller as soon as btvirt creates it and gives up after 2 s (HCI
    # command timeout); a slow guest (tcg on a busy host) can miss that, leaving the controller down
    # and unknown to bluetoothd. So wait for every controller's address and start btvirt again if one
    # failed. Running btvirt once before warms tcg's translation cache for its code.
    if [[ -z "$fail" ]]; then
        btvirt -h >/dev/null 2>&1
        local attempt dmesg_base
        for attempt in 1 2 3 4; do
            dmesg_base="$(dmesg | wc -l)"
            btvirt -L "-l$controllers" >>"$logs/btvirt.log" 2>&1 </dev/null &
            echo $! >/run/ble-vm/btvirt.pid
            if wait_for 30 test -e "/sys/class/bluetooth/hci$((controllers - 1))" &&
                wait_for 20 controllers_settled && controllers_ready; then
                fail=""
                break
            fi
            fail="btvirt's $controllers controllers did not come up: $(dmesg | tail -n "+$((dmesg_base + 1))" |
                grep 'hci[0-9]*:' | tail -3 | tr '\n' ' ')"
            log "attempt $attempt: $fail"
            stop_pid btvirt
            wait_for 10 bash -c '! compgen -G "/sys/class/bluetooth/hci*" >/dev/null'
        done
        log "btvirt: $(ls /sys/class/bluetooth | tr '\n' ' ')"
    fi
    local adapters=() addresses=()
    [[ -n "$fail" ]] || bluez_up

    local rc=125
    if [[ -n "$fail" ]]; then
        echo "ble-vm: guest setup failed: $fail" >>"$dir/stderr"
        log "setup failed: $fail"
    else
        {
            echo "export BLE_VM=1 BLE_VM_LOG_DIR=$logs"
            printf 'export BLE_VM_RESTART_BLUETOOTHD=%q\n' "bash $dir/ble-vm.sh --guest-restart-bluetoothd $dir"
            echo "export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/dbus/system_bus_socket"
            echo "export SMP_BLE_ADAPTERS='${adapters[*]}'"
            echo "export SMP_BLE_CLIENT_ADAPTER=${adapters[0]} SMP_BLE_CLIENT_ADDRESS=${addresses[0]}"
            ((controllers > 1)) && echo "export SMP_BLE_DEVICE_ADAPTER=${adapters[1]} SMP_BLE_DEVICE_ADDRESS=${addresses[1]}"
            ((controllers > 2)) && echo "export SMP_BLE_LOADER_ADAPTER=${adapters[2]} SMP_BLE_LOADER_ADDRESS=${addresses[2]}"
        } >/run/ble-vm/adapters.sh
        local ready
        ready="$(cut -d' ' -f1 /proc/uptime)"
        {
            echo "uptime $ready"
            for n in "${!adapters[@]}"; do echo "${adapters[$n]} ${addresses[$n]}"; done
            "$(bluetoothd_path)" --version 2>/dev/null | sed 's/^/bluez /'
            echo "kernel $(uname -r)"
        } >"$dir/ready.tmp"
        mv "$dir/ready.tmp" "$dir/ready"
        log "ready"
        env -i /bin/bash "$dir/run.sh" </dev/null >>"$dir/stdout" 2>>"$dir/stderr"
        rc=$?
        log "command exited $rc"
    fi

    # Stop the daemons (bluetoothd first: it unregisters the adapters cleanly), keep their logs.
    local p
    for p in bluetoothd btvirt btmon dbus; do stop_pid "$p"; done
    dmesg >"$logs/dmesg.txt" 2>/dev/null
    echo "$rc" >"$dir/rc.tmp" && mv "$dir/rc.tmp" "$dir/rc"
    sync
    for i in $(printf '%s\n' "${!rw_paths[@]}" | sort -rn); do umount "${rw_paths[$i]}" 2>/dev/null; done
    sync
    /bin/busybox poweroff -f 2>/dev/null
    echo o >/proc/sysrq-trigger
    sleep 10
}

if [[ "${1:-}" == "--guest-restart-bluetoothd" ]]; then
    shift
    guest_restart_bluetoothd "$@"
    exit $?
fi
if [[ "${1:-}" == "--guest-init" ]]; then
    guest_init "$2"
    exit 0 # PID 1 exiting panics the kernel; with panic=-1 and -no-reboot QEMU then exits
fi

# ---------------------------------------------------------------------------------------------------
# Host side.
# ---------------------------------------------------------------------------------------------------
cpus=2 mem=2048 controllers=2 btmon="" gatt_channels="" main_conf="" debug="" logs_out="" timeout_s=3600 accel=auto kernel=""
install=1 keep=0 quiet=0 share_cwd=1
rw=()
usage() { sed -n '2,/^set -uo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 64; }
die() { printf 'ble-vm: %s\n' "$*" >&2; exit 125; }
bad() { printf 'ble-vm: %s\n' "$*" >&2; exit 64; }
say() { ((quiet)) || printf 'ble-vm: %s\n' "$*" >&2; }

while (($#)); do
    case "$1" in
        --cpus) cpus="$2"; shift ;;
        --mem) mem="$2"; shift ;;
        --controllers) controllers="$2"; shift ;;
        --rw) rw+=("$2"); shift ;;
        --ro) share_cwd=0 ;;
        --gatt-channels) gatt_channels="$2"; shift ;;
        --main-conf) main_conf="$2"; shift ;;
        --btmon) btmon=1 ;;
        --debug) debug=1 ;;
        --logs) logs_out="$2"; shift ;;
        --timeout) timeout_s="$2"; shift ;;
        --accel) accel="$2"; shift ;;
        --kernel) kernel="$2"; shift ;;
        --no-install) install=0 ;;
        --keep) keep=1 ;;
        -q) quiet=1 ;;
        -h | --help) usage ;;
        --) shift; break ;;
        -*) echo "ble-vm: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
    shift
done
(($#)) || usage
[[ "$controllers" =~ ^[1-9][0-9]?$ ]] || bad "--controllers takes 1..99"
[[ "$accel" =~ ^(auto|kvm|tcg)$ ]] || bad "--accel takes auto, kvm or tcg"
[[ "$cpus" =~ ^[1-9][0-9]?$ && "$mem" =~ ^[1-9][0-9]*$ && "$timeout_s" =~ ^[1-9][0-9]*$ ]] ||
    bad "--cpus, --mem and --timeout take positive numbers"
[[ -z "$gatt_channels" || "$gatt_channels" =~ ^[1-5]$ ]] || bad "--gatt-channels takes 1..5"
[[ -z "$gatt_channels" || -z "$main_conf" ]] || bad "give --gatt-channels or --main-conf, not both"
[[ -z "$main_conf" || -r "$main_conf" ]] || bad "--main-conf $main_conf: cannot read it"
[[ $EUID -eq 0 ]] || die "run as root (apt-get, 9p passthrough of the root file system)"

# Packages: command or file that shows it, and the Debian package.
ensure_packages() {
    local missing=() p
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    compgen -G '/boot/vmlinuz-*-amd64' >/dev/null || missing+=(linux-image-amd64)
    [[ -x /usr/libexec/bluetooth/bluetoothd || -x /usr/lib/bluetooth/bluetoothd ]] || missing+=(bluez)
    command -v btvirt >/dev/null || missing+=(bluez-test-tools)
    command -v btmon >/dev/null || missing+=(bluez)
    [[ -x /bin/busybox ]] && ! ldd /bin/busybox >/dev/null 2>&1 || missing+=(busybox-static)
    command -v modprobe >/dev/null || missing+=(kmod)
    command -v cpio >/dev/null || missing+=(cpio)
    command -v dbus-daemon >/dev/null || missing+=(dbus-daemon)
    command -v dbus-send >/dev/null || missing+=(dbus-bin)
    command -v xz >/dev/null || missing+=(xz-utils)
    ((${#missing[@]})) || return 0
    ((install)) || die "missing packages: ${missing[*]} (apt-get install ${missing[*]})"
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    say "installing ${missing[*]}"
    local log="$work/apt.log" try
    for try in 1 2 3; do
        if { [[ $try -gt 1 ]] || ! apt-cache show "${missing[@]}" >/dev/null 2>&1; }; then
            DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update >>"$log" 2>&1
        fi
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -q \
            --no-install-recommends "${missing[@]}" >>"$log" 2>&1 && return 0
        sleep 5
    done
    tail -20 "$log" >&2
    die "apt-get install ${missing[*]} failed"
}

pick_kernel() {
    if [[ -n "$kernel" ]]; then
        kver="${kver:-$(basename "$kernel" | sed 's/^vmlinuz-//')}"
    else
        local k v
        for k in $(ls -v /boot/vmlinuz-*-amd64 2>/dev/null | sort -rV); do
            v="${k#/boot/vmlinuz-}"
            if [[ -f "/lib/modules/$v/modules.dep" ]]; then kernel="$k" kver="$v"; break; fi
        done
    fi
    [[ -n "$kernel" && -f "$kernel" ]] || die "no kernel with modules in /boot and /lib/modules (apt-get install linux-image-amd64)"
    [[ -f "/lib/modules/$kver/modules.dep" ]] || die "no modules for $kernel in /lib/modules/$kver"
}

pick_accel() {
    [[ "$accel" == auto ]] || return 0
    if [[ -r /dev/kvm && -w /dev/kvm && ! -d /sys/module/kvm_pvm ]]; then accel=kvm; else accel=tcg; fi
}

# The kernel as an uncompressed ELF: QEMU boots it through its PVH entry, which skips the decompressor
# (seconds under tcg). Falls back to the bzImage when no xz stream is found.
extract_vmlinux() {
    local out="$work/vmlinux" off
    off="$(LC_ALL=C grep -abo -m1 $'\xfd7zXZ' "$kernel" 2>/dev/null | head -1 | cut -d: -f1)"
    if [[ -n "$off" ]] && tail -c +"$((off + 1))" "$kernel" | xz -dc >"$out" 2>/dev/null; [[ -s "$out" ]] &&
        [[ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" == $'177ELF' ]]; then
        boot_image="$out"
    else
        rm -f "$out"
        boot_image="$kernel"
    fi
}

# A tiny initramfs: static busybox and the modules needed to mount the root over virtio 9p, then
# switch_root into this script (copied into the work directory) as PID 1.
make_initramfs() {
    local root="$work/initramfs" m mods
    mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
    cp /bin/busybox "$root/bin/busybox"
    mods="$(for m in virtio_pci 9pnet_virtio 9p; do modprobe -S "$kver" --show-depends "$m"; done |
        awk '$1 == "insmod" { print $2 }' | awk '!seen[$0]++')"
    : >"$root/modules/order"
    for m in $mods; do
        case "$m" in
            *.ko) cp "$m" "$root/modules/" ;;
            *.ko.xz) xz -dc "$m" >"$root/modules/$(basename "${m%.xz}")"; m="${m%.xz}" ;;
            *.ko.zst) zstd -qdc "$m" >"$root/modules/$(basename "${m%.zst}")"; m="${m%.zst}" ;;
            *.ko.gz) gzip -dc "$m" >"$root/modules/$(basename "${m%.gz}")"; m="${m%.gz}" ;;
        esac
        basename "$m" >>"$root/modules/order"
    done
    local rootopts="ro"
    ((rw_root)) && rootopts="rw"
    cat >"$root/init" <<EOF
#!/bin/busybox sh
B=/bin/busybox
\$B mount -t proc proc /proc
\$B mount -t sysfs sysfs /sys
\$B mount -t devtmpfs devtmpfs /dev
for m in \$(\$B cat /modules/order); do \$B insmod /modules/\$m || echo "initramfs: insmod \$m failed"; done
if ! \$B mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,$rootopts blevmroot /newroot; then
    echo "initramfs: cannot mount the root over 9p"; \$B poweroff -f
fi
\$B umount /proc /sys /dev
exec \$B switch_root /newroot /bin/bash $work/ble-vm.sh --guest-init $work
EOF
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet) >"$work/initramfs.cpio"
}

# Escapes a path for a QEMU option value (commas doubled).
qarg() { printf '%s' "${1//,/,,}"; }

cleanup() {
    local rc=$?
    if [[ -n "${qpid:-}" ]]; then
        kill -TERM "$qpid" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$qpid" 2>/dev/null
    fi
    [[ -n "${tails:-}" ]] && kill $tails 2>/dev/null
    if ((keep)); then
        say "work directory kept: $work"
    elif [[ -n "${work:-}" && -d "$work" ]]; then
        rm -rf "$work"
    fi
    return $rc
}

base="${TMPDIR:-/tmp}"
[[ "$base" =~ ^/[A-Za-z0-9._/-]*$ ]] || base=/tmp
work="$(mktemp -d "$base/ble-vm.XXXXXX")" || die "cannot create a work directory in $base"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ensure_packages
pick_kernel
pick_accel

# Writable shares: the work directory, the current directory, --rw paths.
cwd="$(pwd -P)"
rw_root=0
shares=("$work")
((share_cwd)) && [[ "$cwd" != / ]] && shares+=("$cwd")
for p in ${rw[@]+"${rw[@]}"}; do
    [[ -d "$p" ]] || die "--rw $p: not a directory"
    p="$(cd "$p" && pwd -P)"
    if [[ "$p" == / ]]; then rw_root=1; else shares+=("$p"); fi
done
mapfile -t shares < <(printf '%s\n' "${shares[@]}" | awk '!seen[$0]++' | awk '{ print length($0) "\t" $0 }' |
    sort -n | cut -f2-)
for p in "${shares[@]}"; do
    [[ "$p" == *$'\n'* || "$p" == *\'* ]] && die "cannot share a path with a newline or a quote: $p"
done

# Configuration and command for the guest.
cp "$self" "$work/ble-vm.sh"
if [[ -n "$main_conf" ]]; then
    cp "$main_conf" "$work/main.conf"
elif [[ -n "$gatt_channels" ]]; then
    printf '[GATT]\nChannels = %s\n' "$gatt_channels" >"$work/main.conf"
fi
{
    printf 'controllers=%q btmon=%q debug=%q rw_root=%q host_home=%q\n' "$controllers" "$btmon" "$debug" \
        "$rw_root" "${HOME:-/root}"
    printf 'rw_paths=('; for p in "${shares[@]}"; do printf '%q ' "$p"; done; echo ')'
    printf 'rw_tags=('; for i in "${!shares[@]}"; do printf 'blevm%d ' "$i"; done; echo ')'
} >"$work/guest.conf"
{
    # Exported environment, less what belongs to the host's login, display and D-Bus.
    while IFS= read -r name; do
        case "$name" in
            DBUS_* | XDG_RUNTIME_DIR | DISPLAY | WAYLAND_DISPLAY | SSH_* | PWD | OLDPWD | SHLVL | _ | TMUX* | \
                INVOCATION_ID | JOURNAL_STREAM | NOTIFY_SOCKET | LISTEN_* | SHELLOPTS | BASHOPTS | BASH_* | \
                PPID | UID | EUID | GROUPS | COLUMNS | LINES) continue ;;
        esac
        printf 'export %s=%q\n' "$name" "${!name}"
    done < <(compgen -e)
    echo 'source /run/ble-vm/adapters.sh'
    printf 'cd %q || exit 125\n' "$cwd"
    printf 'exec'; printf ' %q' "$@"; echo
} >"$work/run.sh"
: >"$work/stdout"
: >"$work/stderr"

extract_vmlinux
make_initramfs

qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot -monitor none
    -m "$mem" -smp "$cpus" -serial "file:$(qarg "$work/console.log")"
    -kernel "$(qarg "$boot_image")" -initrd "$(qarg "$work/initramfs.cpio")"
    -append "console=ttyS0 loglevel=4 panic=-1 mitigations=off cryptomgr.notests random.trust_cpu=on 8250.nr_uarts=1 rdinit=/init"
    -device virtio-rng-pci
    -fsdev "local,id=fsroot,path=/,security_model=none,multidevs=remap$( ((rw_root)) || echo ,readonly=on)"
    -device virtio-9p-pci,fsdev=fsroot,mount_tag=blevmroot)
for i in "${!shares[@]}"; do
    qemu+=(-fsdev "local,id=fs$i,path=$(qarg "${shares[$i]}"),security_model=none,multidevs=remap"
        -device "virtio-9p-pci,fsdev=fs$i,mount_tag=blevm$i")
done
if [[ "$accel" == kvm ]]; then
    qemu+=(-accel kvm -cpu host)
else
    qemu+=(-accel tcg,thread=multi -cpu max)
fi

say "booting $(basename "$kernel") ($accel, $cpus vCPU, $mem MiB), $controllers LE controllers"
elapsed() { awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
start="$(date +%s.%N)"
"${qemu[@]}" </dev/null >"$work/qemu.log" 2>&1 &
qpid=$!
tail -n +1 -F --pid="$qpid" "$work/stdout" 2>/dev/null &
tails="$!"
tail -n +1 -F --pid="$qpid" "$work/stderr" >&2 2>/dev/null &
tails="$tails $!"
announced=0 timed_out=0
while kill -0 "$qpid" 2>/dev/null; do
    if ((!announced)) && [[ -s "$work/ready" ]]; then
        announced=1
        info="$(awk 'NR > 1 { printf "%s%s", sep, $0; sep = ", " }' "$work/ready")"
        say "BlueZ ready $(elapsed) s after start (guest uptime $(awk '/^uptime/ { print $2 }' "$work/ready") s): $info"
    fi
    if ((!timed_out)) && awk -v a="$start" -v b="$(date +%s.%N)" -v t="$timeout_s" 'BEGIN { exit !(b - a > t) }'; then
        timed_out=1
        kill -TERM "$qpid" 2>/dev/null
    fi
    sleep 0.1
done
wait "$qpid"
qrc=$?
qpid=""
wait $tails 2>/dev/null
tails=""
total="$(elapsed)"

# The trace as text, decoded here (fast, no Bluetooth needed). btmon 5.66 may crash part way on EATT
# traffic (a NULL dereference in its ATT decoder); what it printed until then is kept.
if [[ -s "$work/logs/hci.btsnoop" ]]; then
    (stdbuf -oL btmon -r "$work/logs/hci.btsnoop" >"$work/logs/btmon.txt" 2>&1 </dev/null; true) 2>/dev/null
fi
if [[ -n "$logs_out" ]]; then
    mkdir -p "$logs_out" && cp -a "$work/logs/." "$logs_out/" 2>/dev/null
    cp "$work/console.log" "$work/qemu.log" "$logs_out/" 2>/dev/null
fi
if [[ -s "$work/rc" ]]; then
    rc="$(cat "$work/rc")"
    say "command exited $rc; VM ran $total s"
    if [[ "$rc" == 125 && ! -s "$work/ready" ]]; then
        for f in guest.log dbus.log btvirt.log bluetoothd.log; do
            [[ -s "$work/logs/$f" ]] && { echo "--- $f" >&2; tail -20 "$work/logs/$f" >&2; }
        done
    fi
    exit "$rc"
fi
if ((timed_out)); then
    echo "ble-vm: timed out after $timeout_s s" >&2
    tail -20 "$work/console.log" >&2
    exit 124
fi
echo "ble-vm: the VM stopped without the command's exit status (qemu exit $qrc)" >&2
echo "--- qemu" >&2; tail -20 "$work/qemu.log" >&2
echo "--- console" >&2; tail -40 "$work/console.log" >&2
exit 125
