#!/usr/bin/env bash
# Installs what the tests need: a few Debian packages and a pinned Python venv (<repo>/.venv) with
# independent SMP peers (smpclient, smpmgr) and MCUboot's imgtool, and a second venv
# (<repo>/.venv-labgrid) with the labgrid board-farm engine. Idempotent and fast when done.
# Runs unattended as root on a fresh Debian 12 machine (CI); never prompts.
#   setup.sh            everything the tests need
#   setup.sh --build    only the Debian packages that building the package needs (Scripts/demo.sh)
set -euo pipefail

only_build=0
case "${1:-}" in
    "") ;;
    --build) only_build=1 ;;
    *) printf 'setup: unknown option %s (use --build for the build packages only, or nothing)\n' "$1" >&2; exit 64 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SMP_TEST_VENV:-$repo/.venv}"
# labgrid has its own venv: it depends on pyserial-labgrid, a fork of pyserial that installs the same
# `serial` package as pyserial (which smpclient/smpmgr need), so the two cannot share one venv.
labgrid_venv="${SMP_LABGRID_VENV:-$repo/.venv-labgrid}"
labgrid_pins=(labgrid==26.0.1 imgtool==2.5.0)
pins=(cbor2==6.2.1 smp==4.2.0 smpclient==7.3.0 smpmgr==0.19.1 imgtool==2.5.0)
build_packages=(zlib1g-dev libudev-dev pkg-config)  # what `swift build` links against (libdbus-1 is loaded at run time)
apt_packages=("${build_packages[@]}" python3-venv)
apt_packages+=(umockdev libumockdev-dev gir1.2-umockdev-1.0 python3-gi)  # udev discovery tests (a fake /sys and /dev)
pins+=(bluezoo==1.0.2 dbus-fast==5.2.0)  # Bluetooth LE test rig: a BlueZ stand-in on a private bus
apt_packages+=(dbus-daemon dbus-bin)  # Bluetooth LE test rig: the private bus
apt_packages+=(libc6-i386 lib32gcc-s1 qemu-system-arm socat)  # real Zephyr firmware: native_sim (32-bit) executables, QEMU guests and their pty bridge
apt_packages+=(ser2net)  # remote serial ports: a real ser2net serving smp-sim's pty over tcp:// and rfc2217://; the labgrid exporter starts it for each exported port
pins+=(pyserial==3.5)  # remote serial ports: pyserial's RFC 2217 server (PortManager) cross-checks our client
apt_packages+=(time)  # Scripts/bench-scale.sh: peak RSS of smp (/usr/bin/time)

log() { printf 'setup: %s\n' "$*" >&2; }

# 1. Debian packages: install only the missing ones.
((only_build)) && apt_packages=("${build_packages[@]}")
missing=()
for p in "${apt_packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { log "need root (or sudo) to install: ${missing[*]}"; exit 1; }
        sudo=(sudo -n)
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

((only_build)) && exit 0

# 2. The Python venvs with pinned packages; a stamp file in each records what is installed.
python=/usr/bin/python3
[[ -x "$python" ]] || python="$(command -v python3)"
python_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# make_venv DIR IMPORTS PIN...: creates DIR (or updates it) with the pins unless its stamp matches.
make_venv() {
    local dir="$1" imports="$2"
    shift 2
    local stamp="$dir/.smp-test-pins" want="$python_version $*"
    if [[ -x "$dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return 0
    fi
    log "creating $dir with $*"
    if [[ ! -x "$dir/bin/python" ]]; then
        "$python" -m venv "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    "$dir/bin/python" -c "import $imports" \
        || { log "the venv at $dir does not import its packages ($imports)"; exit 1; }
    printf '%s\n' "$want" >"$stamp"
    log "$dir ready"
}

make_venv "$venv" "cbor2, smp, smpclient, smpmgr, imgtool" "${pins[@]}"
make_venv "$labgrid_venv" "labgrid, imgtool" "${labgrid_pins[@]}"
