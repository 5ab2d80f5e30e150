#!/usr/bin/env bash
# The README's first command: installs the Debian packages that building needs (Scripts/setup.sh --build:
# libudev, libdbus-1, zlib headers and pkg-config; nothing when they are there), then builds the tool and
# runs `smp demo`, a whole firmware upgrade of a simulated device inside the tool.
# Arguments go to `smp demo` (e.g. --mode test-only, --images 2).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash Scripts/setup.sh --build || { echo "demo.sh: installing the build packages failed (run as root, or with sudo available)" >&2; exit 1; }
exec swift run smp demo "$@"
