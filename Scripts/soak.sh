#!/usr/bin/env bash
# Soak test of smp against smp-sim's injected link faults (loss, duplication, reordering, corruption,
# console noise, resets mid-transfer) over serial and UDP; prints a table per fault profile and link.
# Usage: bash Scripts/soak.sh [--quick] [--count N] [--profiles a,b] [--links serial,udp] [--bin DIR] [--seed N]
# Builds the debug binaries first unless --bin is given. Exit 1 on any hang or lost/corrupted byte.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [[ " $* " != *" --bin "* ]]; then
    swift build --product smp >/dev/null && swift build --product smp-sim >/dev/null
fi
exec python3 Scripts/soak.py "$@"
