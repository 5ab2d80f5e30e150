#!/usr/bin/env bash
# Captures the D-Bus fuzz seeds (Tests/Fuzz/Corpus/dbus): on a private bus with the BlueZ stand-in
# (Scripts/ble-rig.sh), smp-sim serves SMP as a BLE peripheral and smp scans, connects and sends a few
# requests to it, while `dbus-monitor --binary` records every message on the bus. Each message (wire
# format) becomes one seed file. Needs a debug build (swift build) and the test venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
bin="$(swift build --show-bin-path)"
out="$repo/Tests/Fuzz/Corpus/dbus"
capture="$(mktemp -t smp-dbus-capture.XXXXXX)"
trap 'rm -f "$capture"' EXIT

bash Scripts/ble-rig.sh run -- bash -c '
    dbus-monitor --system --binary >"$1" 2>/dev/null & monitor=$!
    "$2/smp-sim" --ble hci1 >/dev/null 2>&1 & sim=$!
    sleep 2
    address=00:00:5E:00:53:01
    "$2/smp" --device "ble:$address" os echo "hello over dbus" || true
    "$2/smp" --device "ble:$address" os params || true
    "$2/smp" --device "ble:$address" image list || true
    "$2/smp" ble scan --timeout 2 || true
    kill $sim; sleep 0.5; kill $monitor; wait
' capture "$capture" "$bin"

# Split the stream: a message is a 16-byte fixed header, the header fields array (padded to 8), the body.
mkdir -p "$out"
rm -f "$out"/msg-*
"${SMP_TEST_PYTHON:-$repo/.venv/bin/python}" - "$capture" "$out" <<'PY'
import hashlib, struct, sys
data = open(sys.argv[1], "rb").read()
seen, offset = set(), 0
while offset + 16 <= len(data):
    endian = "<" if data[offset:offset + 1] == b"l" else ">"
    body, fields = struct.unpack(endian + "I", data[offset + 4:offset + 8])[0], struct.unpack(endian + "I", data[offset + 12:offset + 16])[0]
    size = 16 + fields + (-(16 + fields)) % 8 + body
    message = data[offset:offset + size]
    offset += size
    digest = hashlib.sha1(message).hexdigest()[:12]
    if digest not in seen and len(message) <= 4096:
        seen.add(digest)
        open(f"{sys.argv[2]}/msg-{digest}", "wb").write(message)
print(f"{len(seen)} distinct messages of {len(data)} bytes captured")
PY
