#!/usr/bin/env bash
# The library as its users meet it: a throwaway package outside this one depends on it by path, takes
# only the products each program needs (McuManager and one transport), compiles the README's examples
# (Sources/Examples/*/main.swift) unchanged, and runs the UDP firmware-upgrade example against smp-sim.
# Product and module boundaries are tested from the outside: a type the examples use that
# `import McuManager` does not bring fails here, even when the package's own targets compile.
#
# Usage: bash Scripts/consumer-test.sh        (after `swift build`: it runs .build/debug/smp-sim)
# Cost: it shares this package's build directory, where swift-nio and the library are
# already compiled with the same commands, so it compiles and links only the five programs (~15 s on
# 2 cores; with a directory of its own, the first build took ~5 min here and compiled all of them again).
# Environment:
#   SMP_CONSUMER_SCRATCH  the consumer's build directory (default <repo>/.build, shared as above)
#   SMP_BIN_DIR           where smp-sim is (default <repo>/.build/debug)
#   SMP_TEST_VENV         the Python venv with imgtool (default <repo>/.venv), to sign the test image
# Exit code: 0 when the consumer built and the upgrade succeeded; the failing step's code otherwise.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${SMP_CONSUMER_SCRATCH:-$repo/.build}"
bin_dir="${SMP_BIN_DIR:-$repo/.build/debug}"
venv="${SMP_TEST_VENV:-$repo/.venv}"
work="$(mktemp -d -t smp-consumer.XXXXXX)"
sim_pid=""
cleanup() {
    if [[ -n "$sim_pid" ]]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS
say() { printf 'consumer-test: %s\n' "$*"; }

for tool in "$bin_dir/smp-sim" "$venv/bin/imgtool"; do
    [[ -x "$tool" ]] || { say "$tool is missing: run swift build and Scripts/setup.sh first"; exit 66; }
done

# The package as a user writes it (README, "The library"), depending on this checkout by its path. Its
# identity (and so the compiler's -package-name) and source paths are then those of this package's own
# build: sharing that build directory, the consumer compiles none of the library's targets again.
name="$(basename "$repo")"
consumer="$work/consumer"
mkdir -p "$consumer/Sources"
sed -e "s|@NAME@|$name|g" -e "s|@PATH@|$repo|g" >"$consumer/Package.swift" <<'EOF'
// swift-tools-version:6.0
import PackageDescription

/// One executable per README example: McuManager and the transports it imports, nothing else.
func example(_ name: String, _ transports: [String]) -> Target {
    .executableTarget(
        name: name,
        dependencies: [.product(name: "McuManager", package: "@NAME@")]
            + transports.map { .product(name: $0, package: "@NAME@") },
        // Stricter than the default: members of a type are visible only through an imported module.
        swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")])
}

let package = Package(
    name: "consumer",
    platforms: [.macOS(.v13)],
    dependencies: [.package(path: "@PATH@")],
    targets: [
        example("udp-upgrade", ["McuMgrUDP"]),
        example("serial-upgrade", ["McuMgrSerial"]),
        example("udp-fleet", ["McuMgrUDP"]),
        example("ble-upload", ["McuMgrBLE"]),
        example("file-transfer", ["McuMgrSerial", "McuMgrUDP"]),
    ],
    swiftLanguageModes: [.v6]
)
EOF
copy() {
    mkdir -p "$consumer/Sources/$1"
    cp "$repo/Sources/Examples/$2/main.swift" "$consumer/Sources/$1/main.swift"
}
copy udp-upgrade UDPUpgrade
copy serial-upgrade SerialUpgrade
copy udp-fleet UDPFleetQuery
copy ble-upload BLEUpload
copy file-transfer FileTransfer
count=$(find "$repo/Sources/Examples" -name main.swift | wc -l)
if ((count != 5)); then
    say "Sources/Examples holds $count examples, this script builds 5: add the new one to it"
    exit 1
fi

say "building the consumer package in $scratch"
build_started=$SECONDS
if ! swift build --package-path "$consumer" --scratch-path "$scratch"; then
    say "FAILED: a package that depends on McuManager by path does not build the README examples"
    exit 1
fi
say "built in $((SECONDS - build_started)) s"

# A signed MCUboot image (hash TLVs only, as imgtool writes without a key) and a simulated device.
head -c 40000 /dev/urandom >"$work/body.bin"
"$venv/bin/imgtool" sign --header-size 0x200 --pad-header --align 4 --slot-size 0x76000 --version 1.1.0 \
    "$work/body.bin" "$work/app_update.bin" >/dev/null
# The files exist before the reads below: the background job opens them only when it gets to run (a
# loaded flake-check run read sim.out first, and set -e ended the script on sed's error).
: >"$work/sim.out"
: >"$work/sim.err"
"$bin_dir/smp-sim" --udp 127.0.0.1:0 --udp-queue unlimited >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
address=""
for _ in $(seq 1 200); do
    address="$(sed -n 's/^udp \(127\.0\.0\.1:[0-9]*\)$/\1/p' "$work/sim.out")"
    [[ -n "$address" ]] && break
    kill -0 "$sim_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z "$address" ]]; then
    say "smp-sim did not start: $(cat "$work/sim.err")"
    exit 69
fi

say "running udp-upgrade against smp-sim at $address"
status=0
timeout 120 "$scratch/debug/udp-upgrade" "udp:$address" "$work/app_update.bin" 0 >"$work/run.out" 2>&1 || status=$?
cat "$work/run.out"
if ((status != 0)) || ! grep -qx 'state: success' "$work/run.out" \
    || ! grep -qx 'image 0 slot 0: 1.1.0 active=true confirmed=true' "$work/run.out"; then
    say "FAILED: the upgrade example did not end with 1.1.0 active and confirmed (exit $status)"
    exit 1
fi
say "PASSED in $((SECONDS - started)) s"
