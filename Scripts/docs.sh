#!/usr/bin/env bash
# Builds the library's documentation with DocC: the McuManager module's symbols and its catalog
# (Sources/McuManager/McuManager.docc: getting started, transports, firmware upgrade, the simulator, the
# test rigs, the benchmarks).
#   bash Scripts/docs.sh [--out DIR] [--static] [--verbose]    (default DIR: .build/docs)
# Writes DIR/McuManager.doccarchive (open it with `docc preview`, or any static web server with --static:
# --transform-for-static-hosting). Uses the toolchain's own `docc` and `swift package dump-symbol-graph`
# (the debug build's modules), so it needs no package plugin and no network. A warning in the articles (a
# link to a symbol that does not exist, say) fails the run; warnings about the sources' doc comments are
# counted and shown.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="$repo/.build/docs"
static=()
verbose=0
while (($#)); do
    case "$1" in
        --verbose) verbose=1; shift ;;
        --out) out="$2"; shift 2 ;;
        --static) static=(--transform-for-static-hosting); shift ;;
        *) echo "docs.sh: unknown argument $1 (use --out DIR, --static, --verbose)" >&2; exit 64 ;;
    esac
done
docc="$(command -v docc || true)"
[[ -n "$docc" ]] || docc="$(dirname "$(readlink -f "$(command -v swift)")")/docc"
[[ -x "$docc" ]] || { echo "docs.sh: no docc next to swift; install a Swift toolchain that ships it (6.0 or later)" >&2; exit 69; }

module=McuManager
printf 'docs: symbol graphs (swift package dump-symbol-graph)\n' >&2
listing="$(swift package dump-symbol-graph --minimum-access-level public 2>&1)" \
    || { printf '%s\n' "$listing" >&2; echo "docs.sh: dump-symbol-graph failed" >&2; exit 1; }
graphs="$(printf '%s\n' "$listing" | sed -n 's/^Files written to //p' | tail -1)"
[[ -n "$graphs" ]] || graphs="$(find .build -type d -name symbolgraph -newer Package.swift | head -1)"
[[ -f "$graphs/$module.symbols.json" ]] || { echo "docs.sh: no $module.symbols.json under '$graphs'" >&2; exit 1; }
symbols="$(mktemp -d -t smp-docs.XXXXXX)"
trap 'rm -rf "$symbols"' EXIT
cp "$graphs/$module".symbols.json "$graphs/$module"@*.symbols.json "$symbols/" 2>/dev/null || true

mkdir -p "$out"
rm -rf "$out/$module.doccarchive"
printf 'docs: docc convert\n' >&2
diagnostics="$symbols/diagnostics.txt"
"$docc" convert "Sources/$module/$module.docc" \
    --additional-symbol-graph-dir "$symbols" \
    --fallback-display-name "$module" --fallback-bundle-identifier "org.mcumanager.linux.$module" \
    --output-path "$out/$module.doccarchive" "${static[@]}" >"$diagnostics" 2>&1 \
    || { cat "$diagnostics" >&2; echo "docs.sh: docc convert failed" >&2; exit 1; }
# A diagnostic's location line: "  --> FILE:LINE:..."; the articles are the catalog's .md files.
articles="$(grep -E '^ *--> [^ ]*\.md:' "$diagnostics" | grep -vc '^ *--> \.\./' || true)"
comments="$(grep -cE '^(warning|error):' "$diagnostics" || true)"
if ((articles > 0)); then
    cat "$diagnostics" >&2
    echo "docs.sh: $articles problems in the articles of Sources/$module/$module.docc (above)" >&2
    exit 1
fi
((comments == 0)) || printf 'docs: %s warnings about doc comments in the sources (see: bash Scripts/docs.sh --verbose)\n' "$comments" >&2
((verbose)) && cat "$diagnostics" >&2
printf 'docs: %s\n' "$out/$module.doccarchive"
