#!/usr/bin/env bash
# Builds the release binaries once and packs them twice: a Debian package and a tarball.
#   bash Scripts/package.sh [--out DIR] [--fast]   (default DIR: .build/package)
# --fast compresses the package with xz -1 instead of xz -6 (30 s instead of 130 s on 2 cores, 40 MB instead
# of 35 MB): for CI, which only installs it.
# Both hold `smp` and `smp-sim` (release as Scripts/release-flags.sh builds it: Swift runtime linked in,
# whole-program optimised for size; stripped), man
# pages (swift-argument-parser's generate-manual tool, the one its generate-manual plugin runs), bash, zsh
# and fish completions (the tools' --generate-completion-script), a udev rule that gives the plugdev group
# the serial ports of known SMP boards, the README and the license. Prints what it built, with sizes and
# the time each step took. Whatever `smp` the tree builds is what gets packed.
# Needs: Swift, binutils (objdump, strip), dpkg-deb, gzip, tar. Scripts/package-test.sh installs the result.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$repo/.build/package"
xz_level=6
while (($#)); do
    case "$1" in
        --out) out="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
        --fast) xz_level=1; shift ;;
        *) echo "package.sh: unknown argument $1 (use --out DIR, --fast)" >&2; exit 64 ;;
    esac
done
for tool in objdump strip dpkg-deb gzip tar; do
    command -v "$tool" >/dev/null || { echo "package.sh: $tool is missing; apt-get install binutils dpkg gzip tar" >&2; exit 69; }
done

log() { printf 'package: %s\n' "$*" >&2; }
timed() {  # timed LABEL COMMAND...: runs it, logs how long it took
    local label="$1" start=$SECONDS
    shift
    "$@"
    log "$label: $((SECONDS - start)) s"
}

# 1. Release binaries, built once (as Scripts/bench.sh builds them: release-flags.sh), and the man page
# generator.
source Scripts/release-flags.sh
release=("${release_flags[@]}")
timed "swift build smp (release)" swift build "${release[@]}" --product smp
timed "swift build smp-sim (release)" swift build "${release[@]}" --product smp-sim
timed "swift build generate-manual" swift build "${release[@]}" --product generate-manual
bin="$(swift build "${release[@]}" --show-bin-path)"

version="$("$bin/smp" --version)"
[[ "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "package.sh: smp --version printed '$version', not a version" >&2; exit 70; }
arch="$(dpkg --print-architecture)"
name="smp_${version}_${arch}"
stage="$out/stage/$name"
rm -rf "$out/stage" "$out/$name.deb" "$out/smp-$version-linux-$arch.tar.gz"
mkdir -p "$stage" "$out/stage/man"
# The pages' date: the last commit's, so that the same tree packs the same pages.
date="$(git log -1 --format=%cs 2>/dev/null || date -u +%F)"

# 2. The file tree, as installed under /.
install -d "$stage/usr/bin" "$stage/usr/share/man/man1" "$stage/usr/share/doc/smp" \
    "$stage/usr/share/bash-completion/completions" "$stage/usr/share/zsh/vendor-completions" \
    "$stage/usr/share/fish/vendor_completions.d" "$stage/lib/udev/rules.d" "$stage/DEBIAN"
for tool in smp smp-sim; do
    install -m 0755 "$bin/$tool" "$stage/usr/bin/$tool"
    strip --remove-section=.comment --remove-section=.note --strip-unneeded "$stage/usr/bin/$tool"
    "$bin/generate-manual" "$bin/$tool" --output-directory "$out/stage/man" --date "$date" \
        --authors "McuManager for Linux developers"
    "$stage/usr/bin/$tool" --generate-completion-script bash >"$stage/usr/share/bash-completion/completions/$tool"
    "$stage/usr/bin/$tool" --generate-completion-script zsh >"$stage/usr/share/zsh/vendor-completions/_$tool"
    "$stage/usr/bin/$tool" --generate-completion-script fish >"$stage/usr/share/fish/vendor_completions.d/$tool.fish"
done
for page in "$out/stage/man"/*.1; do
    gzip -9n <"$page" >"$stage/usr/share/man/man1/$(basename "$page").gz"
done
install -m 0644 Scripts/debian/70-smp-boards.rules "$stage/lib/udev/rules.d/70-smp-boards.rules"
gzip -9n <README.md >"$stage/usr/share/doc/smp/README.md.gz"
license=""
for candidate in LICENSE LICENSE.md LICENSE.txt COPYING; do
    [[ -f "$candidate" ]] && { license="$candidate"; break; }
done
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: McuManager for Linux"
    echo
    echo "Files: *"
    if [[ -n "$license" ]]; then
        echo "License: see below ($license of the source tree)"
        echo
        sed 's/^$/./; s/^/ /' "$license"
    else
        echo "License: not stated: the source tree has no LICENSE file yet; ask the authors before redistributing"
    fi
} >"$stage/usr/share/doc/smp/copyright"
[[ -n "$license" ]] || log "warning: no LICENSE file in the source tree; the package's copyright file says so"
find "$stage" -path "$stage/DEBIAN" -prune -o -type d -exec chmod 0755 {} + -o -type f ! -path '*/usr/bin/*' -exec chmod 0644 {} +

# 3. Debian metadata: dependencies from the binaries' own shared libraries (each library's Debian package;
#    libc6 at least the newest glibc symbol version the binaries use).
depends=()
for lib in $(objdump -p "$stage/usr/bin/smp" "$stage/usr/bin/smp-sim" | awk '$1 == "NEEDED" {print $2}' | sort -u); do
    # The readers take all of their input (no `exit`, no `head`): a writer cut off by an early exit dies of
    # SIGPIPE, which pipefail reports (CI at ac770e5 ended here with 141; ldconfig -p prints 47 kB).
    path="$(ldconfig -p | awk -v l="$lib" '!found && $1 == l && /x86-64|AArch64|64bit/ {print $NF; found = 1}')"
    [[ -n "$path" ]] || path="$(ldconfig -p | awk -v l="$lib" '!found && $1 == l {print $NF; found = 1}')"
    [[ -n "$path" ]] || { echo "package.sh: cannot find $lib, which the binaries need" >&2; exit 69; }
    package="$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | sed -n 1p | cut -d: -f1)" \
        || package="$(dpkg -S "$path" | sed -n 1p | cut -d: -f1)"
    [[ -n "$package" ]] || { echo "package.sh: no Debian package holds $path ($lib)" >&2; exit 69; }
    depends+=("$package")
done
glibc="$(objdump -T "$stage/usr/bin/smp" "$stage/usr/bin/smp-sim" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
depends_line=""
for package in $(printf '%s\n' "${depends[@]}" | sort -u); do
    entry="$package"
    [[ "$package" == libc6 && -n "$glibc" ]] && entry="libc6 (>= $glibc)"
    depends_line+="${depends_line:+, }$entry"
done
installed_size="$(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends_line/" \
    -e "s/@INSTALLED_SIZE@/$installed_size/" -e "s|@MAINTAINER@|smp@localhost|" \
    Scripts/debian/control.in >"$stage/DEBIAN/control"
install -m 0755 Scripts/debian/postinst "$stage/DEBIAN/postinst"
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | sort | xargs md5sum) >"$stage/DEBIAN/md5sums"

timed "dpkg-deb" dpkg-deb --root-owner-group -Zxz "-z$xz_level" --build "$stage" "$out/$name.deb" >/dev/null

# 4. The tarball: the same files under one directory, to unpack anywhere (bin/smp runs from there).
tardir="$out/stage/smp-$version-linux-$arch"
mkdir -p "$tardir/share/smp"
cp -a "$stage/usr/bin" "$tardir/bin"
cp -a "$stage/usr/share/man" "$stage/usr/share/bash-completion" "$stage/usr/share/zsh" "$stage/usr/share/fish" "$tardir/share/"
cp Scripts/debian/70-smp-boards.rules README.md "$tardir/share/smp/"
cp "$stage/usr/share/doc/smp/copyright" "$tardir/share/smp/copyright"
timed "tar" tar -C "$out/stage" --owner=0 --group=0 --numeric-owner -czf "$out/smp-$version-linux-$arch.tar.gz" "smp-$version-linux-$arch"

size() { du -h "$1" | cut -f1; }
log "built $out/$name.deb ($(size "$out/$name.deb")); Depends: $depends_line"
log "built $out/smp-$version-linux-$arch.tar.gz ($(size "$out/smp-$version-linux-$arch.tar.gz"))"
log "smp $(size "$stage/usr/bin/smp") and smp-sim $(size "$stage/usr/bin/smp-sim") stripped (unstripped $(size "$bin/smp"), $(size "$bin/smp-sim"))"
echo "$out/$name.deb"
echo "$out/smp-$version-linux-$arch.tar.gz"
