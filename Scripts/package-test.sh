#!/usr/bin/env bash
# Installs what Scripts/package.sh built and checks it as a user would: `smp --version`, a command against
# the built-in simulated device, `smp-sim`, `man smp`, the bash completion (and zsh/fish syntax where those
# shells exist), the udev rule, the tarball; then removes the package and checks that nothing is left.
#   bash Scripts/package-test.sh [--system] [DIR]     (DIR: where package.sh put them, default .build/package)
# Default: `dpkg -i` into a throwaway root (--root; maintainer scripts run outside it and skip the udev
# reload there), so the machine is left as it was. --system: `dpkg -i` into this machine (root), then
# `dpkg -r` (for a fresh CI machine or a container).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
system=0
dir="$repo/.build/package"
for argument in "$@"; do
    case "$argument" in
        --system) system=1 ;;
        -*) echo "package-test.sh: unknown option $argument (use --system, or a directory)" >&2; exit 64 ;;
        *) dir="$argument" ;;
    esac
done
deb="$(ls -t "$dir"/smp_*.deb 2>/dev/null | head -1)"
tarball="$(ls -t "$dir"/smp-*-linux-*.tar.gz 2>/dev/null | head -1)"
[[ -n "$deb" && -n "$tarball" ]] || { echo "package-test.sh: no package in $dir; run bash Scripts/package.sh first" >&2; exit 66; }

work="$(mktemp -d -t smp-package-test.XXXXXX)"
root=""
cleanup() {
    if ((system)); then dpkg -r smp >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
failures=0
check() {  # check DESCRIPTION COMMAND...: runs it, prints ok or FAILED with its output
    local description="$1"
    shift
    if output="$("$@" 2>&1)"; then
        echo "ok: $description"
    else
        echo "FAILED: $description"
        printf '%s\n' "$output" | tail -15 | sed 's/^/    /'
        failures=$((failures + 1))
    fi
}
contains() { grep -q -- "$1" <<<"$2" || { echo "expected '$1' in:"; printf '%s\n' "$2" | head -20; return 1; }; }

version="$(dpkg-deb -f "$deb" Version)"
echo "package-test: $(basename "$deb") (version $version, $(du -h "$deb" | cut -f1)), $(basename "$tarball") ($(du -h "$tarball" | cut -f1))"
if ((system)); then
    [[ $(id -u) -eq 0 ]] || { echo "package-test.sh: --system installs into this machine: run as root" >&2; exit 77; }
    check "dpkg -i $(basename "$deb")" dpkg -i "$deb"
else
    root="$work/root"
    mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/log"
    touch "$root/var/lib/dpkg/status"
    # The throwaway root has no libc of its own: its dependencies are this machine's (checked below with ldd).
    check "dpkg --root -i $(basename "$deb")" \
        dpkg --root="$root" --force-depends --force-script-chrootless --force-not-root -i "$deb"
fi
smp="$root/usr/bin/smp"
sim="$root/usr/bin/smp-sim"
man1="$root/usr/share/man/man1"

check "dependencies present (ldd finds every library)" bash -c "! ldd '$smp' '$sim' | grep -q 'not found'"
check "smp --version prints $version" bash -c "[[ \"\$('$smp' --version)\" == '$version' ]]"
check "smp runs a command (os echo against the built-in simulated device)" \
    bash -c "[[ \"\$('$smp' --device sim: os echo installed)\" == installed ]]"
check "smp-sim --help" "$sim" --help
if command -v man >/dev/null; then
    check "man smp (its name line and the os echo command)" bash -c "page=\"\$(MANPATH='$root/usr/share/man' MANWIDTH=200 man -P cat smp 2>/dev/null)\"; grep -q 'smp — Manage microcontrollers over SMP' <<<\"\$page\" && grep -q 'Send text; the device echoes it back' <<<\"\$page\""
    check "man smp-sim" bash -c "MANPATH='$root/usr/share/man' man -P cat smp-sim 2>/dev/null | grep -q -i 'simulat'"
else
    echo "note: man is not installed here (apt-get install man-db); checking the pages' roff instead"
    check "man page smp.1.gz is roff" bash -c "zcat '$man1/smp.1.gz' | grep -q '^\\.TH'"
fi
check "bash completion completes groups (smp im<TAB> -> image)" bash -c "
    source '$root/usr/share/bash-completion/completions/smp'
    COMP_WORDS=(smp im); COMP_CWORD=1; COMP_LINE='smp im'; COMP_POINT=\${#COMP_LINE}
    _smp smp im smp >/dev/null 2>&1 || true
    printf '%s\n' \"\${COMPREPLY[@]}\" | grep -qx image"
check "bash completion completes commands (smp image c<TAB> -> confirm)" bash -c "
    source '$root/usr/share/bash-completion/completions/smp'
    COMP_WORDS=(smp image c); COMP_CWORD=2; COMP_LINE='smp image c'; COMP_POINT=\${#COMP_LINE}
    _smp smp c image >/dev/null 2>&1 || true
    printf '%s\n' \"\${COMPREPLY[@]}\" | grep -qx confirm"
if command -v zsh >/dev/null; then check "zsh completion parses" zsh -n "$root/usr/share/zsh/vendor-completions/_smp"; fi
if command -v fish >/dev/null; then check "fish completion parses" fish -n "$root/usr/share/fish/vendor_completions.d/smp.fish"; fi
check "udev rule installed for plugdev" grep -q 'GROUP="plugdev"' "$root/lib/udev/rules.d/70-smp-boards.rules"
if command -v udevadm >/dev/null && udevadm verify --help >/dev/null 2>&1; then
    check "udev rule syntax (udevadm verify)" udevadm verify "$root/lib/udev/rules.d/70-smp-boards.rules"
fi
check "README and copyright in /usr/share/doc/smp" test -s "$root/usr/share/doc/smp/README.md.gz" -a -s "$root/usr/share/doc/smp/copyright"

# Removal leaves nothing behind.
if ((system)); then
    check "dpkg -r smp" dpkg -r smp
    check "nothing left after removal" bash -c "! test -e /usr/bin/smp -o -e /usr/share/man/man1/smp.1.gz -o -e /lib/udev/rules.d/70-smp-boards.rules"
else
    check "dpkg --root -r smp" dpkg --root="$root" --force-script-chrootless --force-not-root -r smp
    check "nothing left after removal" bash -c "[[ -z \"\$(find '$root' -type f ! -path '$root/var/*')\" ]]"
fi

# The tarball: unpack anywhere, run from there.
mkdir -p "$work/tar"
tar -xzf "$tarball" -C "$work/tar"
top="$(ls "$work/tar")"
check "tarball: bin/smp --version" bash -c "[[ \"\$('$work/tar/$top/bin/smp' --version)\" == '$version' ]]"
check "tarball: bin/smp-sim --help" "$work/tar/$top/bin/smp-sim" --help
check "tarball: man page, completions, udev rule, README" test -s "$work/tar/$top/share/man/man1/smp.1.gz" \
    -a -s "$work/tar/$top/share/bash-completion/completions/smp" -a -s "$work/tar/$top/share/smp/70-smp-boards.rules" \
    -a -s "$work/tar/$top/share/smp/README.md"

if ((failures)); then
    echo "package-test: FAILED ($failures checks)"
    exit 1
fi
echo "package-test: PASSED"
