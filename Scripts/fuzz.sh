#!/usr/bin/env bash
# Fuzzing with libFuzzer (the Test rigs article, "Fuzzing"): builds the fuzz targets in Tests/Fuzz and runs them from
# the seed corpora in Tests/Fuzz/Corpus/<target>.
#
#   Scripts/fuzz.sh build                      build the three fuzz binaries
#   Scripts/fuzz.sh run TARGET [LIBFUZZER...]  run one target, e.g. `run cbor -runs=10000000`
#                                              or `run package -max_total_time=600`
#   Scripts/fuzz.sh smoke [RUNS]               every target over its corpus plus RUNS (default 2000)
#                                              mutations each; exit 1 on any crash
#   Scripts/fuzz.sh targets                    list the targets
#
# Targets: cbor console raw (pure core), response image package suit (client library), dbus (D-Bus
# message unmarshalling). The binaries are built with `swiftc -sanitize=fuzzer,address` from the
# library's own sources (instrumented); NIOConcurrencyHelpers and swift-log come uninstrumented
# from the debug build, so `swift build` must have run first. Builds and working corpora live under
# .build/fuzz (or $SMP_FUZZ_BUILD_DIR); new inputs found in a run go to .build/fuzz/corpus/<target> (the committed seeds stay
# as they are), crashes to .build/fuzz/artifacts/<target>. Runs at nice 10, one process (one job).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
out="${SMP_FUZZ_BUILD_DIR:-$repo/.build/fuzz}"
triple_dir="$(swift build --show-bin-path 2>/dev/null)"
modules="$triple_dir/Modules"
core_targets=(cbor console raw telnet)
manager_targets=(response image package suit)
dbus_targets=(dbus)
all_targets=("${core_targets[@]}" "${manager_targets[@]}" "${dbus_targets[@]}")
swiftc_flags=(-sanitize=fuzzer,address -parse-as-library -O -enable-testing -swift-version 6 -g -package-name mcumanager)

binary_for() {
    case "$1" in
        cbor|console|raw|telnet) echo "$out/bin/fuzz-core" ;;
        response|image|package|suit) echo "$out/bin/fuzz-manager" ;;
        dbus) echo "$out/bin/fuzz-dbus" ;;
        *) echo "fuzz.sh: unknown target '$1' (targets: ${all_targets[*]})" >&2; return 1 ;;
    esac
}

# Rebuilds when a source is newer than the output.
stale() {
    local output=$1; shift
    [[ ! -e $output ]] && return 0
    [[ -n $(find "$@" -newer "$output" -name '*.swift' -print -quit) ]]
}

# Object files of the uninstrumented dependencies from the debug build.
dependency_objects() {
    local target
    for target in Logging NIOConcurrencyHelpers CNIOAtomics; do
        [[ -d $triple_dir/$target.build ]] && find "$triple_dir/$target.build" -name '*.o'
    done
}

build() {
    if [[ ! -e $modules/Logging.swiftmodule || ! -e $modules/NIOConcurrencyHelpers.swiftmodule ]]; then
        echo "fuzz.sh: run 'swift build' first (the fuzz binaries link its NIOConcurrencyHelpers and swift-log)" >&2
        exit 1
    fi
    mkdir -p "$out/modules" "$out/obj" "$out/bin"
    local cc_deps=(
        -Xcc "-fmodule-map-file=$repo/Sources/CZlibSystem/module.modulemap"
        -Xcc "-fmodule-map-file=$triple_dir/CNIOAtomics.build/module.modulemap"
    )
    local core_sources=(Sources/McuMgrCore/*/*.swift)
    local manager_sources
    mapfile -t manager_sources < <(find Sources/McuManager -name '*.swift' | sort)

    if stale "$out/obj/McuMgrCore.o" Sources/McuMgrCore; then
        echo "fuzz.sh: compiling McuMgrCore (instrumented)"
        nice -n 10 swiftc "${swiftc_flags[@]}" -wmo -module-name McuMgrCore -emit-module \
            -emit-module-path "$out/modules/McuMgrCore.swiftmodule" -c -o "$out/obj/McuMgrCore.o" "${core_sources[@]}"
    fi
    if stale "$out/obj/McuManager.o" Sources/McuManager Sources/McuMgrCore; then
        echo "fuzz.sh: compiling McuManager (instrumented)"
        nice -n 10 swiftc "${swiftc_flags[@]}" -wmo -module-name McuManager -emit-module \
            -emit-module-path "$out/modules/McuManager.swiftmodule" -I "$out/modules" -I "$modules" "${cc_deps[@]}" \
            -c -o "$out/obj/McuManager.o" "${manager_sources[@]}"
    fi
    local link_warnings='Cannot export local symbol'
    if stale "$out/bin/fuzz-core" Sources/McuMgrCore Sources/McuMgrSerial/RFC2217Codec.swift Tests/Fuzz/Core; then
        echo "fuzz.sh: linking fuzz-core"
        # The RFC 2217 codec imports nothing: it compiles into the target's module.
        nice -n 10 swiftc "${swiftc_flags[@]}" -module-name FuzzCore -I "$out/modules" Tests/Fuzz/Core/*.swift \
            Sources/McuMgrSerial/RFC2217Codec.swift \
            "$out/obj/McuMgrCore.o" -o "$out/bin/fuzz-core" 2>&1 | { grep -v "$link_warnings" || true; }
    fi
    local deps
    mapfile -t deps < <(dependency_objects)
    if stale "$out/bin/fuzz-manager" Sources/McuMgrCore Sources/McuManager Tests/Fuzz/Manager; then
        echo "fuzz.sh: linking fuzz-manager"
        nice -n 10 swiftc "${swiftc_flags[@]}" -module-name FuzzManager -I "$out/modules" -I "$modules" "${cc_deps[@]}" \
            Tests/Fuzz/Manager/*.swift "$out/obj/McuManager.o" "$out/obj/McuMgrCore.o" "${deps[@]}" -lz \
            -o "$out/bin/fuzz-manager" 2>&1 | { grep -v "$link_warnings" || true; }
    fi
    if stale "$out/bin/fuzz-dbus" Sources/McuMgrCore Sources/McuManager Sources/McuMgrDBus Tests/Fuzz/DBus; then
        echo "fuzz.sh: linking fuzz-dbus"
        # The D-Bus layer and the target compile as one module so the target reaches its internal
        # unmarshaller (DBusMarshal.decode) directly.
        nice -n 10 swiftc "${swiftc_flags[@]}" -module-name McuMgrDBus -I "$out/modules" -I "$modules" -I Sources/CDBus \
            "${cc_deps[@]}" $(pkg-config --cflags-only-I dbus-1 | sed 's/-I/-Xcc -I/g') \
            Sources/McuMgrDBus/*.swift Tests/Fuzz/DBus/*.swift "$out/obj/McuManager.o" "$out/obj/McuMgrCore.o" "${deps[@]}" \
            -lz -ldbus-1 -o "$out/bin/fuzz-dbus" 2>&1 | { grep -v "$link_warnings" || true; }
    fi
}

# Runs one target in the foreground: seeds plus the working corpus, nice 10, one job.
run() {
    local target=$1; shift
    local binary
    binary="$(binary_for "$target")"
    [[ -x $binary ]] || build
    mkdir -p "$out/corpus/$target" "$out/artifacts/$target"
    # ASan keeps every distinct allocation stack trace for the life of the process (its stack depot
    # never frees), and the recursive decoders reach new ones with every new nesting: with the default
    # 30 frames the suit target's RSS grew by ~500 bytes per execution (2 GB after 4.7 million) while
    # its live heap stayed at 25 MB. Four frames bound the depot and still say where a block came from
    # (re-run a saved crash with ASAN_OPTIONS=malloc_context_size=30 for the whole stack). libFuzzer's
    # default 2 GB RSS limit; a single allocation over 2 GB fails the run.
    SMP_FUZZ_TARGET="$target" ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:malloc_context_size=4}" nice -n 10 "$binary" \
        -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/artifacts/$target/" \
        "$@" "$out/corpus/$target" "Tests/Fuzz/Corpus/$target"
}

case "${1:-}" in
    build) build ;;
    run)
        [[ $# -ge 2 ]] || { echo "usage: fuzz.sh run TARGET [LIBFUZZER OPTIONS]" >&2; exit 2; }
        target=$2; shift 2
        run "$target" "$@"
        ;;
    smoke)
        runs=${2:-2000}
        build
        failed=0
        for target in "${all_targets[@]}"; do
            # Only the committed seeds and a fresh working directory: the smoke is the same every time.
            scratch="$(mktemp -d -t smp-fuzz-smoke.XXXXXX)"
            if SMP_FUZZ_TARGET="$target" ASAN_OPTIONS=detect_leaks=0 "$(binary_for "$target")" -runs="$runs" -seed=1 \
                -artifact_prefix="$scratch/" "$scratch" "Tests/Fuzz/Corpus/$target" >"$scratch/log" 2>&1; then
                echo "fuzz smoke: $target ok ($(grep -oE 'Done [0-9]+ runs' "$scratch/log"))"
            else
                echo "fuzz smoke: $target FAILED"; tail -30 "$scratch/log"; failed=1
            fi
            rm -rf "$scratch"
        done
        exit "$failed"
        ;;
    targets) printf '%s\n' "${all_targets[@]}" ;;
    *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
